// Package symtab holds the tables of the vendor libraries, as data. A Table
// is one library's functions: one Row per function with each vendor's symbol,
// in the manner of hipify's tables. The CUDA and HIP backends share one
// implementation (internal/native) and differ only in the column of a table
// they read and in their translation of enums, structs and status codes.
// Driver is the table of the CUDA driver API and the HIP runtime; the tables
// of run-time compilers, BLAS, collectives and telemetry are Tables too.
//
// # Columns
//
// Every per-vendor column is an array indexed by Vendor:
//
//   - Op: the project's name for the function: the gpumem.Backend method, or
//     an internal operation (Init, SetCurrent, ...).
//   - Symbol[v]: the exact, version-correct symbol (CUDA's _v2 names where
//     the driver has them). It is what dlsym looks up; CUDA's
//     cuGetProcAddress is asked for its base name (Base) at version ABI[v],
//     which selects the same ABI.
//   - Required[v]: the allocators cannot work without it; Open fails, naming
//     it, when the library lacks it. A missing optional symbol makes only its
//     operation fail with an error matching gpumem.ErrNotSupported.
//   - ABI[v]: the library version whose signature the project calls.
//   - Args[v]: the number of argument words that signature takes, an
//     Arity: 0 where the table does not declare it, NoArgs for a function
//     of no arguments (cuCtxSynchronize), else the count. It is per vendor
//     because the dialects differ (hipMemcpy takes a copy kind cuMemcpy
//     lacks); the rows whose vendors differ say so in their notes. Build
//     it with Args(n) (Args(0) is f(void)) or ArgsPer(cuda, hip).
//   - StreamContext[v]: the function takes its context from its arguments
//     when its stream is an explicit one, so the backend makes no context
//     current before calling it (one foreign call less on the allocation
//     hot path). Marked only where it has been seen on the vendor's library:
//     CUDA's two stream-ordered pool calls, on an H200 with driver 580
//     (scripts/gpu/poolcall.c).
//   - Short[v]: the function returns promptly, never waiting for the device,
//     and never calls back into the program, so the backend calls it as a
//     short call (internal/ccall.Short6), without the scheduler's
//     system-call state. Marked only where it has been measured on the
//     vendor's library: CUDA's stream-ordered allocation and free.
//
// An empty symbol means the function does not exist for that vendor (the
// backend reports ErrNotSupported, or has no need of it). A few rows have no
// symbol for any vendor: operations the backends answer themselves (Name,
// Library, Close, CopyToDevice), given ids so that everything indexed by Op
// (the simulator's call counters and fault injection) has one id space.
//
// # Status codes
//
// Statuses holds one table of status codes per vendor (number, header name,
// the gpumem sentinel it means), read by the backends, the simulator (which
// speaks CUDA's codes) and the header tests.
package symtab

import (
	"strconv"
	"strings"
)

// Vendor selects a column of a table: every row holds one symbol, one
// required flag and one ABI version per vendor, in arrays indexed by Vendor.
type Vendor int

// Vendors.
const (
	CUDA Vendor = iota
	HIP

	NumVendors // the number of vendor columns
)

var vendorNames = [NumVendors]string{CUDA: "cuda", HIP: "hip"}

// String returns the vendor's backend name ("cuda", "hip").
func (v Vendor) String() string {
	if v < 0 || v >= NumVendors {
		return "vendor(" + strconv.Itoa(int(v)) + ")"
	}
	return vendorNames[v]
}

// Op identifies a row of a table; a table's rows are stored in Op order
// (Rows[op].ID == op).
type Op int

// Row is one function of a library, in every vendor's dialect.
type Row struct {
	ID Op
	// Op is the project's name for the function: a gpumem.Backend method or
	// an internal operation.
	Op string
	// Symbol is the vendor's exact (dlsym) symbol, "" where the vendor has
	// no such function.
	Symbol [NumVendors]string
	// Required: the backend cannot open without the vendor's symbol.
	Required [NumVendors]bool
	// ABI is the library version whose signature of Symbol the project
	// calls, in the vendor's numbering (CUDA: 1000*major+10*minor, asked of
	// cuGetProcAddress); 0 where it does not matter.
	ABI [NumVendors]int
	// Args is the number of argument words each vendor's function takes
	// (see Arity: 0 undeclared, NoArgs for f(void)); build it with Args
	// or ArgsPer. Calls through the public binding package are checked
	// against it, and the header tests check it against the vendors'
	// prototypes.
	Args  Arity
	Notes string
	// StreamContext is true for a vendor whose function takes its context
	// from its arguments (an explicit stream, a pool, an address) and not
	// from the calling thread, when the stream is not a default one: the
	// backend calls it without making a context current first, and makes
	// it current only if such a call fails for want of something other
	// than memory (native.Dialect.DirectCalls).
	// False wherever that has not been seen on the vendor's library
	// (scripts/gpu/poolcall.c checks it on CUDA).
	StreamContext [NumVendors]bool
	// Short is true for a vendor whose function returns promptly (no wait
	// for the device or for another thread's long call) and never calls
	// back into Go: the backend makes it a short call (internal/ccall's
	// Short6 and ShortPre6), without entering the scheduler's system-call
	// state, about 40 ns less a call.
	Short [NumVendors]bool
}

// Base is the vendor's symbol without its _v2/_v3 suffix: the name
// cuGetProcAddress expects (the requested ABI version picks the variant).
func (r *Row) Base(v Vendor) string {
	s := r.Symbol[v]
	for _, suf := range []string{"_v2", "_v3"} {
		if strings.HasSuffix(s, suf) {
			return strings.TrimSuffix(s, suf)
		}
	}
	return s
}

// Table is a library's functions as data: one row per function with every
// vendor's symbol. The driver table (Driver) is the first; run-time
// compilers, BLAS, collectives and telemetry are tables of the same type.
type Table struct {
	// Name names the table ("driver"): what the symbols command and the
	// docs call it.
	Name string
	// Rows are indexed by the table's op ids.
	Rows []Row
}

// Column returns the rows for which v has a symbol, in table order.
func (t *Table) Column(v Vendor) []*Row {
	var out []*Row
	for i := range t.Rows {
		if t.Rows[i].Symbol[v] != "" {
			out = append(out, &t.Rows[i])
		}
	}
	return out
}

// ByName returns the first row whose Op is name.
func (t *Table) ByName(name string) (*Row, bool) {
	for i := range t.Rows {
		if t.Rows[i].Op == name {
			return &t.Rows[i], true
		}
	}
	return nil, false
}

// Operation ids, in table order.
const (
	Init Op = iota
	DriverGetVersion
	RuntimeGetVersion
	GetErrorName
	GetProcAddress
	GetProcAddressV1
	DeviceGetCount
	DeviceGet
	PrimaryCtxRetain
	PrimaryCtxRelease
	SetCurrent
	GetCurrent
	DeviceName
	DeviceAttribute
	MemInfo
	DeviceSynchronize
	Malloc
	Free
	MallocHost
	FreeHost
	MallocManaged
	Advise
	AdviseLegacy
	Prefetch
	PrefetchLegacy
	RangeLocation
	Memcpy
	MemcpyAsync
	MemcpyPeerAsync
	Memset
	MemsetAsync
	StreamCreate
	StreamDestroy
	StreamSynchronize
	StreamQuery
	StreamWaitEvent
	StreamPriorityRange
	EventCreate
	EventDestroy
	EventRecord
	EventQuery
	EventSynchronize
	EventElapsed
	LaunchHostFunc
	DefaultMemPool
	MemPoolCreate
	MemPoolDestroy
	MemPoolSetAttribute
	MemPoolGetAttribute
	MemPoolTrimTo
	MemPoolSetAccess
	MemPoolGetAccess
	MallocAsync
	MallocFromPoolAsync
	FreeAsync
	StreamBeginCapture
	StreamEndCapture
	StreamCaptureInfo
	GraphInstantiate
	GraphLaunch
	GraphExecDestroy
	GraphDestroy
	UserObjectCreate
	UserObjectRelease
	GraphRetainUserObject
	MemGranularity
	MemAddressReserve
	MemAddressFree
	MemCreate
	MemRelease
	MemMap
	MemUnmap
	MemSetAccess
	CanAccessPeer
	EnablePeerAccess
	DisablePeerAccess
	PointerDevice
	StreamIsCapturing

	// Modules, functions and launches (gpumem.Kernels). CUDA 12.0+ loads
	// through the library API (context-independent, CUlibrary and
	// CUkernel, turned into a CUfunction of the device's context); older
	// drivers through the module API.
	ModuleLoadData
	ModuleUnload
	ModuleGetFunction
	ModuleGetGlobal
	LibraryLoadData
	LibraryUnload
	LibraryGetKernel
	KernelGetFunction
	LibraryGetGlobal
	FuncGetAttribute
	FuncSetAttribute
	FuncGetParamInfo
	LaunchKernel
	OccupancyMaxActiveBlocks
	OccupancyMaxPotentialBlockSize
	DeviceProperties      // HIP before 6.0: hipDeviceProp_t (R0000), for the device's gcnArchName
	DevicePropertiesR0600 // HIP from 6.0: hipDeviceProp_tR0600

	// Operations the backends answer without a library function of their
	// own: they have rows (with no symbol) so that everything indexed by
	// Op, such as the simulator's call counters and fault injection, has
	// one id space.
	Name           // answered by the backend
	Library        // answered by the backend
	Close          // releases what Open acquired (contexts), through other rows
	CopyToDevice   // through Memcpy
	CopyFromDevice // through Memcpy
	Launch         // the simulator's kernels written in Go; no vendor symbol yet

	NumOps // the number of rows of the driver table
)

// Required-flag shorthands of the driver table.
const (
	none     = iota // optional for both vendors
	both            // required for both
	cudaOnly        // required for CUDA, absent or optional for HIP
)

// row builds a row of the driver table; a vendor without a symbol gets no
// argument count.
func row(id Op, op, cuda string, ver int, hip string, req int, args Arity, notes string) Row {
	r := Row{ID: id, Op: op, Args: args, Notes: notes}
	r.Symbol[CUDA], r.Symbol[HIP] = cuda, hip
	for v := range r.Symbol {
		if r.Symbol[v] == "" {
			r.Args[v] = 0
		}
	}
	r.ABI[CUDA] = ver
	r.Required[CUDA] = req == both || req == cudaOnly
	r.Required[HIP] = req == both
	return r
}

// fromStream marks r as taking its context from its stream on vendor v
// (Row.StreamContext).
func fromStream(r Row, v Vendor) Row {
	r.StreamContext[v] = true
	return r
}

// short marks r as a short call on vendor v (Row.Short).
func short(r Row, v Vendor) Row {
	r.Short[v] = true
	return r
}

// Driver is the table of the CUDA driver API and the HIP runtime: the
// functions of gpumem.Backend, indexed by the op ids above.
var Driver = Table{Name: "driver", Rows: driverRows[:]}

// driverRows is Driver's rows, indexed by Op. The argument words are the
// prototypes' in cuda.h (11.8 and 12.5 for the 12.x-only symbols; a
// versioned symbol's signature never changes, so they hold for 13.x) and
// hip_runtime_api.h (ROCm 5.2, 5.7, 6.4 and 7.2); driver's and hip's
// header tests compare every row with the header they are given. The
// vendors differ in five rows (ErrorName, Memcpy, MemcpyAsync, Prefetch,
// OccupancyMaxPotentialBlockSize), whose notes say so.
var driverRows = [NumOps]Row{
	row(Init, "Init", "cuInit", 2000, "hipInit", both, Args(1), "called once at Open with flags 0"),
	row(DriverGetVersion, "Version", "cuDriverGetVersion", 2020, "hipDriverGetVersion", both, Args(1), "works without a device"),
	row(RuntimeGetVersion, "RuntimeVersion", "", 0, "hipRuntimeGetVersion", none, Args(1), "HIP only"),
	row(GetErrorName, "ErrorName", "cuGetErrorName", 6000, "hipGetErrorName", both, ArgsPer(2, 1), "names come from the library, cached per code. Vendors differ: cuGetErrorName(error, &name) returns a status, 2 words; hipGetErrorName(error) returns the name, 1"),
	row(GetProcAddress, "GetProcAddress", "cuGetProcAddress_v2", 12000, "", none, Args(5), "CUDA 12+: resolves base names at a chosen ABI version"),
	row(GetProcAddressV1, "GetProcAddressV1", "cuGetProcAddress", 11030, "", none, Args(4), "CUDA 11.3-11.8 form without symbolStatus"),
	row(DeviceGetCount, "DeviceCount", "cuDeviceGetCount", 2000, "hipGetDeviceCount", both, Args(1), ""),
	row(DeviceGet, "DeviceGet", "cuDeviceGet", 2000, "", cudaOnly, Args(2), "CUDA: ordinal to CUdevice"),
	row(PrimaryCtxRetain, "PrimaryCtxRetain", "cuDevicePrimaryCtxRetain", 7000, "", cudaOnly, Args(2), "CUDA: each device's primary context, retained at Open"),
	row(PrimaryCtxRelease, "PrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2", 11000, "", cudaOnly, Args(1), "CUDA: released at Close"),
	row(SetCurrent, "SetCurrent", "cuCtxSetCurrent", 4000, "hipSetDevice", both, Args(1), "made current inside every device call, on the same thread (not before a StreamContext row on an explicit stream)"),
	row(GetCurrent, "GetCurrent", "cuCtxGetCurrent", 4000, "hipGetDevice", none, Args(1), "benchmarks of the per-call cost"),
	row(DeviceName, "DeviceName", "cuDeviceGetName", 2000, "hipDeviceGetName", both, Args(3), ""),
	row(DeviceAttribute, "DeviceAttribute", "cuDeviceGetAttribute", 2000, "hipDeviceGetAttribute", both, Args(3), "attribute numbers differ per vendor"),
	row(MemInfo, "MemInfo", "cuMemGetInfo_v2", 3020, "hipMemGetInfo", both, Args(2), ""),
	row(DeviceSynchronize, "DeviceSynchronize", "cuCtxSynchronize", 2000, "hipDeviceSynchronize", both, Args(0), ""),
	row(Malloc, "Malloc", "cuMemAlloc_v2", 3020, "hipMalloc", both, Args(2), ""),
	row(Free, "Free", "cuMemFree_v2", 3020, "hipFree", both, Args(1), ""),
	row(MallocHost, "MallocHost", "cuMemHostAlloc", 2020, "hipHostMalloc", both, Args(3), "portable pinned memory; device 0's context"),
	row(FreeHost, "FreeHost", "cuMemFreeHost", 2000, "hipHostFree", both, Args(1), ""),
	row(MallocManaged, "MallocManaged", "cuMemAllocManaged", 6000, "hipMallocManaged", both, Args(3), "attached globally"),
	row(Advise, "Advise", "cuMemAdvise_v2", 12020, "hipMemAdvise", none, Args(4), "CUDA 12.2+: CUmemLocation by value, one packed 64-bit register; HIP: device id, -1 host"),
	row(AdviseLegacy, "AdviseLegacy", "cuMemAdvise", 8000, "", none, Args(4), "CUDA before 12.2: CUdevice, CU_DEVICE_CPU = -1"),
	row(Prefetch, "Prefetch", "cuMemPrefetchAsync_v2", 12020, "hipMemPrefetchAsync", none, ArgsPer(5, 4), "CUDA 12.2+: CUmemLocation by value, flags 0. Vendors differ: cuMemPrefetchAsync_v2 takes 5 words (ptr, count, location, flags, stream), hipMemPrefetchAsync 4 (ptr, count, device, stream)"),
	row(PrefetchLegacy, "PrefetchLegacy", "cuMemPrefetchAsync", 8000, "", none, Args(4), "CUDA before 12.2: CUdevice, CU_DEVICE_CPU = -1"),
	row(RangeLocation, "RangeLocation", "cuMemRangeGetAttribute", 8000, "hipMemRangeGetAttribute", none, Args(5), "int device: -1 host, -2 none"),
	row(Memcpy, "Memcpy", "cuMemcpy", 4000, "hipMemcpy", both, ArgsPer(3, 4), "unified addresses. Vendors differ: hipMemcpy takes the copy kind (hipMemcpyDefault) as a 4th word, cuMemcpy 3"),
	row(MemcpyAsync, "MemcpyAsync", "cuMemcpyAsync", 4000, "hipMemcpyAsync", both, ArgsPer(4, 5), "unified addresses. Vendors differ: hipMemcpyAsync takes the copy kind (hipMemcpyDefault) before the stream, 5 words; cuMemcpyAsync 4"),
	row(MemcpyPeerAsync, "MemcpyPeerAsync", "cuMemcpyPeerAsync", 4000, "hipMemcpyPeerAsync", none, Args(6), "CUDA takes contexts, HIP device ordinals"),
	row(Memset, "Memset", "cuMemsetD8_v2", 3020, "hipMemset", both, Args(3), ""),
	row(MemsetAsync, "MemsetAsync", "cuMemsetD8Async", 3020, "hipMemsetAsync", both, Args(4), ""),
	row(StreamCreate, "StreamCreate", "cuStreamCreateWithPriority", 5050, "hipStreamCreateWithPriority", both, Args(3), ""),
	row(StreamDestroy, "StreamDestroy", "cuStreamDestroy_v2", 4000, "hipStreamDestroy", both, Args(1), ""),
	row(StreamSynchronize, "StreamSynchronize", "cuStreamSynchronize", 2000, "hipStreamSynchronize", both, Args(1), ""),
	row(StreamQuery, "StreamQuery", "cuStreamQuery", 2000, "hipStreamQuery", both, Args(1), "NOT_READY (600) means false"),
	row(StreamWaitEvent, "StreamWaitEvent", "cuStreamWaitEvent", 3020, "hipStreamWaitEvent", both, Args(3), ""),
	row(StreamPriorityRange, "StreamPriorityRange", "cuCtxGetStreamPriorityRange", 5050, "hipDeviceGetStreamPriorityRange", none, Args(2), ""),
	row(EventCreate, "EventCreate", "cuEventCreate", 2000, "hipEventCreateWithFlags", both, Args(2), ""),
	row(EventDestroy, "EventDestroy", "cuEventDestroy_v2", 4000, "hipEventDestroy", both, Args(1), ""),
	row(EventRecord, "EventRecord", "cuEventRecord", 2000, "hipEventRecord", both, Args(2), ""),
	row(EventQuery, "EventQuery", "cuEventQuery", 2000, "hipEventQuery", both, Args(1), "NOT_READY (600) means false"),
	row(EventSynchronize, "EventSynchronize", "cuEventSynchronize", 2000, "hipEventSynchronize", both, Args(1), ""),
	row(EventElapsed, "EventElapsed", "cuEventElapsedTime", 2000, "hipEventElapsedTime", none, Args(3), ""),
	row(LaunchHostFunc, "LaunchHostFunc", "cuLaunchHostFunc", 10000, "hipLaunchHostFunc", none, Args(3), "through the process's single callback dispatcher"),
	row(DefaultMemPool, "DefaultMemPool", "cuDeviceGetDefaultMemPool", 11020, "hipDeviceGetDefaultMemPool", both, Args(2), ""),
	row(MemPoolCreate, "MemPoolCreate", "cuMemPoolCreate", 11020, "hipMemPoolCreate", both, Args(2), "props 88 bytes; maxSize only where the runtime has it"),
	row(MemPoolDestroy, "MemPoolDestroy", "cuMemPoolDestroy", 11020, "hipMemPoolDestroy", both, Args(1), ""),
	row(MemPoolSetAttribute, "MemPoolSetAttribute", "cuMemPoolSetAttribute", 11020, "hipMemPoolSetAttribute", both, Args(3), "reuse attributes are int, the rest uint64"),
	row(MemPoolGetAttribute, "MemPoolGetAttribute", "cuMemPoolGetAttribute", 11020, "hipMemPoolGetAttribute", both, Args(3), ""),
	row(MemPoolTrimTo, "MemPoolTrimTo", "cuMemPoolTrimTo", 11020, "hipMemPoolTrimTo", both, Args(2), ""),
	row(MemPoolSetAccess, "MemPoolSetAccess", "cuMemPoolSetAccess", 11020, "hipMemPoolSetAccess", none, Args(3), "one 12-byte access descriptor"),
	row(MemPoolGetAccess, "MemPoolGetAccess", "cuMemPoolGetAccess", 11020, "hipMemPoolGetAccess", none, Args(3), ""),
	short(row(MallocAsync, "MallocAsync", "cuMemAllocAsync", 11020, "hipMallocAsync", both, Args(3), "CUDA: a short call"), CUDA),
	short(fromStream(row(MallocFromPoolAsync, "MallocFromPoolAsync", "cuMemAllocFromPoolAsync", 11020, "hipMallocFromPoolAsync", both, Args(4), "hot path; CUDA: no context made current on an explicit stream (the pool names the device), a short call"), CUDA), CUDA),
	short(fromStream(row(FreeAsync, "FreeAsync", "cuMemFreeAsync", 11020, "hipFreeAsync", both, Args(2), "hot path; CUDA: no context made current on an explicit stream, a short call"), CUDA), CUDA),
	row(StreamBeginCapture, "StreamBeginCapture", "cuStreamBeginCapture_v2", 10010, "hipStreamBeginCapture", none, Args(2), ""),
	row(StreamEndCapture, "StreamEndCapture", "cuStreamEndCapture", 10000, "hipStreamEndCapture", none, Args(2), ""),
	row(StreamCaptureInfo, "StreamCaptureInfo", "cuStreamGetCaptureInfo_v2", 11030, "hipStreamGetCaptureInfo_v2", none, Args(6), "dependencies not read"),
	row(GraphInstantiate, "GraphInstantiate", "cuGraphInstantiateWithFlags", 11040, "hipGraphInstantiateWithFlags", none, Args(3), "flags 0"),
	row(GraphLaunch, "GraphLaunch", "cuGraphLaunch", 10000, "hipGraphLaunch", none, Args(2), ""),
	row(GraphExecDestroy, "GraphExecDestroy", "cuGraphExecDestroy", 10000, "hipGraphExecDestroy", none, Args(1), ""),
	row(GraphDestroy, "GraphDestroy", "cuGraphDestroy", 10000, "hipGraphDestroy", none, Args(1), ""),
	row(UserObjectCreate, "UserObjectCreate", "cuUserObjectCreate", 11030, "hipUserObjectCreate", none, Args(5), "destructor through the callback dispatcher"),
	row(UserObjectRelease, "UserObjectRelease", "cuUserObjectRelease", 11030, "hipUserObjectRelease", none, Args(2), ""),
	row(GraphRetainUserObject, "GraphRetainUserObject", "cuGraphRetainUserObject", 11030, "hipGraphRetainUserObject", none, Args(4), "move: flags 1"),
	row(MemGranularity, "MemGranularity", "cuMemGetAllocationGranularity", 10020, "hipMemGetAllocationGranularity", none, Args(3), "allocation prop 32 bytes"),
	row(MemAddressReserve, "MemAddressReserve", "cuMemAddressReserve", 10020, "hipMemAddressReserve", none, Args(5), ""),
	row(MemAddressFree, "MemAddressFree", "cuMemAddressFree", 10020, "hipMemAddressFree", none, Args(2), ""),
	row(MemCreate, "MemCreate", "cuMemCreate", 10020, "hipMemCreate", none, Args(4), ""),
	row(MemRelease, "MemRelease", "cuMemRelease", 10020, "hipMemRelease", none, Args(1), ""),
	row(MemMap, "MemMap", "cuMemMap", 10020, "hipMemMap", none, Args(5), ""),
	row(MemUnmap, "MemUnmap", "cuMemUnmap", 10020, "hipMemUnmap", none, Args(2), ""),
	row(MemSetAccess, "MemSetAccess", "cuMemSetAccess", 10020, "hipMemSetAccess", none, Args(4), ""),
	row(CanAccessPeer, "CanAccessPeer", "cuDeviceCanAccessPeer", 4000, "hipDeviceCanAccessPeer", none, Args(3), ""),
	row(EnablePeerAccess, "EnablePeerAccess", "cuCtxEnablePeerAccess", 4000, "hipDeviceEnablePeerAccess", none, Args(2), "already enabled is not an error"),
	row(DisablePeerAccess, "DisablePeerAccess", "cuCtxDisablePeerAccess", 4000, "hipDeviceDisablePeerAccess", none, Args(1), ""),
	row(PointerDevice, "PointerDevice", "cuPointerGetAttribute", 4000, "hipPointerGetAttribute", none, Args(3), "DEVICE_ORDINAL (9 in both): which device's context a synchronous copy or memset runs in"),
	row(StreamIsCapturing, "StreamCaptureInfo", "cuStreamIsCapturing", 10000, "hipStreamIsCapturing", none, Args(2), "asked first: the full capture info only when a capture is active"),
	row(ModuleLoadData, "ModuleLoadData", "cuModuleLoadData", 2000, "hipModuleLoadData", none, Args(2), "CUDA before 12.0; image copied with a NUL appended (PTX is text)"),
	row(ModuleUnload, "ModuleUnload", "cuModuleUnload", 2000, "hipModuleUnload", none, Args(1), ""),
	row(ModuleGetFunction, "ModuleFunction", "cuModuleGetFunction", 2000, "hipModuleGetFunction", none, Args(3), "name NUL-terminated"),
	row(ModuleGetGlobal, "ModuleGlobal", "cuModuleGetGlobal_v2", 3020, "hipModuleGetGlobal", none, Args(4), "address and size_t size"),
	row(LibraryLoadData, "LibraryLoadData", "cuLibraryLoadData", 12000, "", none, Args(8), "CUDA 12.0+: ModuleLoadData through the library API; no options (8 arguments)"),
	row(LibraryUnload, "LibraryUnload", "cuLibraryUnload", 12000, "", none, Args(1), "CUDA 12.0+: ModuleUnload"),
	row(LibraryGetKernel, "LibraryGetKernel", "cuLibraryGetKernel", 12000, "", none, Args(3), "CUDA 12.0+: ModuleFunction, then KernelGetFunction"),
	row(KernelGetFunction, "KernelGetFunction", "cuKernelGetFunction", 12000, "", none, Args(2), "CUDA 12.0+: the CUfunction of the current (device's) context"),
	row(LibraryGetGlobal, "LibraryGetGlobal", "cuLibraryGetGlobal", 12000, "", none, Args(4), "CUDA 12.0+: ModuleGlobal in the current context"),
	row(FuncGetAttribute, "FuncAttribute", "cuFuncGetAttribute", 2020, "hipFuncGetAttribute", none, Args(3), "CUfunction_attribute / hipFunction_attribute: same numbers 0-8"),
	row(FuncSetAttribute, "FuncSetMaxDynamicSharedMemory", "cuFuncSetAttribute", 9000, "", none, Args(3), "HIP: hipFuncSetAttribute takes a host stub, not a hipFunction_t; the backend checks the limit instead"),
	row(FuncGetParamInfo, "FuncParams", "cuFuncGetParamInfo", 12040, "", none, Args(4), "CUDA 12.4+: one parameter's offset and size a call, CUDA_ERROR_INVALID_VALUE past the last; HIP has none"),
	row(LaunchKernel, "LaunchKernel", "cuLaunchKernel", 4000, "hipModuleLaunchKernel", none, Args(11), "11 arguments; kernelParams, extra NULL"),
	row(OccupancyMaxActiveBlocks, "OccupancyMaxActiveBlocks", "cuOccupancyMaxActiveBlocksPerMultiprocessor", 6050, "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor", none, Args(4), ""),
	row(OccupancyMaxPotentialBlockSize, "OccupancyMaxPotentialBlockSize", "cuOccupancyMaxPotentialBlockSize", 6050, "hipModuleOccupancyMaxPotentialBlockSize", none, ArgsPer(6, 5), "Vendors differ: CUDA takes a block-size-to-smem callback (NULL) before the smem, 6 words; HIP does not, 5"),
	row(DeviceProperties, "DeviceProperties", "", 0, "hipGetDeviceProperties", none, Args(2), "HIP before 6.0 (the R0000 layout): the device's gcnArchName, a compile target"),
	row(DevicePropertiesR0600, "DevicePropertiesR0600", "", 0, "hipGetDevicePropertiesR0600", none, Args(2), "HIP from 6.0 (hipGetDeviceProperties is a macro for it)"),
	row(Name, "Name", "", 0, "", none, Arity{}, "answered by the backend"),
	row(Library, "Library", "", 0, "", none, Arity{}, "answered by the backend"),
	row(Close, "Close", "", 0, "", none, Arity{}, "releases the contexts Open retained"),
	row(CopyToDevice, "CopyToDevice", "", 0, "", none, Arity{}, "through Memcpy"),
	row(CopyFromDevice, "CopyFromDevice", "", 0, "", none, Arity{}, "through Memcpy"),
	row(Launch, "Launch", "", 0, "", none, Arity{}, "the simulator's kernels written in Go"),
}
