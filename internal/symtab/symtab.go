// Package symtab is the symbol table of the vendor backends, as data: one row
// per operation with its CUDA driver symbol and its HIP runtime symbol, in the
// manner of hipify's tables. The CUDA and HIP backends share one
// implementation (internal/native) and differ only in the column of this table
// they read and in their translation of enums, structs and error codes.
//
// # Columns
//
//   - Op: the project's name for the operation: the gpumem.Backend method, or
//     an internal operation (Init, SetCurrent, ...).
//   - CUDA: the exact, version-correct driver symbol (the _v2 names where the
//     driver has them). It is what dlsym looks up; cuGetProcAddress is asked
//     for its base name (CUDABase) at version CUDAVersion, which selects the
//     same ABI.
//   - HIP: the HIP runtime symbol.
//   - Required: the allocators cannot work without it; Open fails, naming it,
//     when the library lacks it. A missing optional symbol makes only its
//     operation fail with an error matching gpumem.ErrNotSupported.
//
// An empty vendor column means the operation does not exist for that vendor
// (the backend reports ErrNotSupported, or has no need of it).
package symtab

import "strings"

// Op identifies a row; rows are stored in Op order (Rows[op].ID == op).
type Op int

// Row is one operation.
type Row struct {
	ID           Op
	Op           string // the project's name: a Backend method or an internal op
	CUDA         string // CUDA driver symbol, exact (dlsym) name
	CUDAVersion  int    // CUDA version (1000*major+10*minor) whose ABI CUDA is; asked of cuGetProcAddress
	HIP          string // HIP runtime symbol
	RequiredCUDA bool   // Open fails without the CUDA symbol
	RequiredHIP  bool   // Open fails without the HIP symbol
	Notes        string
}

// CUDABase is the name cuGetProcAddress expects: the symbol without its
// _v2/_v3 suffix (the requested version picks the variant).
func (r Row) CUDABase() string {
	for _, suf := range []string{"_v2", "_v3"} {
		if strings.HasSuffix(r.CUDA, suf) {
			return strings.TrimSuffix(r.CUDA, suf)
		}
	}
	return r.CUDA
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
	NumOps
)

// req marks a row required for both vendors.
const (
	none = iota
	both
	cudaOnly
)

func row(id Op, op, cuda string, ver int, hip string, req int, notes string) Row {
	return Row{ID: id, Op: op, CUDA: cuda, CUDAVersion: ver, HIP: hip,
		RequiredCUDA: req == both || req == cudaOnly, RequiredHIP: req == both, Notes: notes}
}

// Rows is the table, indexed by Op.
var Rows = [NumOps]Row{
	row(Init, "Init", "cuInit", 2000, "hipInit", both, "called once at Open with flags 0"),
	row(DriverGetVersion, "Version", "cuDriverGetVersion", 2020, "hipDriverGetVersion", both, "works without a device"),
	row(RuntimeGetVersion, "RuntimeVersion", "", 0, "hipRuntimeGetVersion", none, "HIP only"),
	row(GetErrorName, "ErrorName", "cuGetErrorName", 6000, "hipGetErrorName", both, "names come from the library, cached per code"),
	row(GetProcAddress, "GetProcAddress", "cuGetProcAddress_v2", 12000, "", none, "CUDA 12+: resolves base names at a chosen ABI version"),
	row(GetProcAddressV1, "GetProcAddressV1", "cuGetProcAddress", 11030, "", none, "CUDA 11.3-11.8 form without symbolStatus"),
	row(DeviceGetCount, "DeviceCount", "cuDeviceGetCount", 2000, "hipGetDeviceCount", both, ""),
	row(DeviceGet, "DeviceGet", "cuDeviceGet", 2000, "", cudaOnly, "CUDA: ordinal to CUdevice"),
	row(PrimaryCtxRetain, "PrimaryCtxRetain", "cuDevicePrimaryCtxRetain", 7000, "", cudaOnly, "CUDA: each device's primary context, retained at Open"),
	row(PrimaryCtxRelease, "PrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2", 11000, "", cudaOnly, "CUDA: released at Close"),
	row(SetCurrent, "SetCurrent", "cuCtxSetCurrent", 4000, "hipSetDevice", both, "made current inside every device call, on the same thread"),
	row(GetCurrent, "GetCurrent", "cuCtxGetCurrent", 4000, "hipGetDevice", none, "benchmarks of the per-call cost"),
	row(DeviceName, "DeviceName", "cuDeviceGetName", 2000, "hipDeviceGetName", both, ""),
	row(DeviceAttribute, "DeviceAttribute", "cuDeviceGetAttribute", 2000, "hipDeviceGetAttribute", both, "attribute numbers differ per vendor"),
	row(MemInfo, "MemInfo", "cuMemGetInfo_v2", 3020, "hipMemGetInfo", both, ""),
	row(DeviceSynchronize, "DeviceSynchronize", "cuCtxSynchronize", 2000, "hipDeviceSynchronize", both, ""),
	row(Malloc, "Malloc", "cuMemAlloc_v2", 3020, "hipMalloc", both, ""),
	row(Free, "Free", "cuMemFree_v2", 3020, "hipFree", both, ""),
	row(MallocHost, "MallocHost", "cuMemHostAlloc", 2020, "hipHostMalloc", both, "portable pinned memory; device 0's context"),
	row(FreeHost, "FreeHost", "cuMemFreeHost", 2000, "hipHostFree", both, ""),
	row(MallocManaged, "MallocManaged", "cuMemAllocManaged", 6000, "hipMallocManaged", both, "attached globally"),
	row(Advise, "Advise", "cuMemAdvise_v2", 12020, "hipMemAdvise", none, "CUDA 12.2+: CUmemLocation by value, one packed 64-bit register; HIP: device id, -1 host"),
	row(AdviseLegacy, "AdviseLegacy", "cuMemAdvise", 8000, "", none, "CUDA before 12.2: CUdevice, CU_DEVICE_CPU = -1"),
	row(Prefetch, "Prefetch", "cuMemPrefetchAsync_v2", 12020, "hipMemPrefetchAsync", none, "CUDA 12.2+: CUmemLocation by value, flags 0"),
	row(PrefetchLegacy, "PrefetchLegacy", "cuMemPrefetchAsync", 8000, "", none, "CUDA before 12.2: CUdevice, CU_DEVICE_CPU = -1"),
	row(RangeLocation, "RangeLocation", "cuMemRangeGetAttribute", 8000, "hipMemRangeGetAttribute", none, "int device: -1 host, -2 none"),
	row(Memcpy, "Memcpy", "cuMemcpy", 4000, "hipMemcpy", both, "unified addresses; HIP passes hipMemcpyDefault"),
	row(MemcpyAsync, "MemcpyAsync", "cuMemcpyAsync", 4000, "hipMemcpyAsync", both, "unified addresses; HIP passes hipMemcpyDefault"),
	row(MemcpyPeerAsync, "MemcpyPeerAsync", "cuMemcpyPeerAsync", 4000, "hipMemcpyPeerAsync", none, "CUDA takes contexts, HIP device ordinals"),
	row(Memset, "Memset", "cuMemsetD8_v2", 3020, "hipMemset", both, ""),
	row(MemsetAsync, "MemsetAsync", "cuMemsetD8Async", 3020, "hipMemsetAsync", both, ""),
	row(StreamCreate, "StreamCreate", "cuStreamCreateWithPriority", 5050, "hipStreamCreateWithPriority", both, ""),
	row(StreamDestroy, "StreamDestroy", "cuStreamDestroy_v2", 4000, "hipStreamDestroy", both, ""),
	row(StreamSynchronize, "StreamSynchronize", "cuStreamSynchronize", 2000, "hipStreamSynchronize", both, ""),
	row(StreamQuery, "StreamQuery", "cuStreamQuery", 2000, "hipStreamQuery", both, "NOT_READY (600) means false"),
	row(StreamWaitEvent, "StreamWaitEvent", "cuStreamWaitEvent", 3020, "hipStreamWaitEvent", both, ""),
	row(StreamPriorityRange, "StreamPriorityRange", "cuCtxGetStreamPriorityRange", 5050, "hipDeviceGetStreamPriorityRange", none, ""),
	row(EventCreate, "EventCreate", "cuEventCreate", 2000, "hipEventCreateWithFlags", both, ""),
	row(EventDestroy, "EventDestroy", "cuEventDestroy_v2", 4000, "hipEventDestroy", both, ""),
	row(EventRecord, "EventRecord", "cuEventRecord", 2000, "hipEventRecord", both, ""),
	row(EventQuery, "EventQuery", "cuEventQuery", 2000, "hipEventQuery", both, "NOT_READY (600) means false"),
	row(EventSynchronize, "EventSynchronize", "cuEventSynchronize", 2000, "hipEventSynchronize", both, ""),
	row(EventElapsed, "EventElapsed", "cuEventElapsedTime", 2000, "hipEventElapsedTime", none, ""),
	row(LaunchHostFunc, "LaunchHostFunc", "cuLaunchHostFunc", 10000, "hipLaunchHostFunc", none, "through the process's single callback dispatcher"),
	row(DefaultMemPool, "DefaultMemPool", "cuDeviceGetDefaultMemPool", 11020, "hipDeviceGetDefaultMemPool", both, ""),
	row(MemPoolCreate, "MemPoolCreate", "cuMemPoolCreate", 11020, "hipMemPoolCreate", both, "props 88 bytes; maxSize only where the runtime has it"),
	row(MemPoolDestroy, "MemPoolDestroy", "cuMemPoolDestroy", 11020, "hipMemPoolDestroy", both, ""),
	row(MemPoolSetAttribute, "MemPoolSetAttribute", "cuMemPoolSetAttribute", 11020, "hipMemPoolSetAttribute", both, "reuse attributes are int, the rest uint64"),
	row(MemPoolGetAttribute, "MemPoolGetAttribute", "cuMemPoolGetAttribute", 11020, "hipMemPoolGetAttribute", both, ""),
	row(MemPoolTrimTo, "MemPoolTrimTo", "cuMemPoolTrimTo", 11020, "hipMemPoolTrimTo", both, ""),
	row(MemPoolSetAccess, "MemPoolSetAccess", "cuMemPoolSetAccess", 11020, "hipMemPoolSetAccess", none, "one 12-byte access descriptor"),
	row(MemPoolGetAccess, "MemPoolGetAccess", "cuMemPoolGetAccess", 11020, "hipMemPoolGetAccess", none, ""),
	row(MallocAsync, "MallocAsync", "cuMemAllocAsync", 11020, "hipMallocAsync", both, ""),
	row(MallocFromPoolAsync, "MallocFromPoolAsync", "cuMemAllocFromPoolAsync", 11020, "hipMallocFromPoolAsync", both, "hot path"),
	row(FreeAsync, "FreeAsync", "cuMemFreeAsync", 11020, "hipFreeAsync", both, "hot path"),
	row(StreamBeginCapture, "StreamBeginCapture", "cuStreamBeginCapture_v2", 10010, "hipStreamBeginCapture", none, ""),
	row(StreamEndCapture, "StreamEndCapture", "cuStreamEndCapture", 10000, "hipStreamEndCapture", none, ""),
	row(StreamCaptureInfo, "StreamCaptureInfo", "cuStreamGetCaptureInfo_v2", 11030, "hipStreamGetCaptureInfo_v2", none, "dependencies not read"),
	row(GraphInstantiate, "GraphInstantiate", "cuGraphInstantiateWithFlags", 11040, "hipGraphInstantiateWithFlags", none, "flags 0"),
	row(GraphLaunch, "GraphLaunch", "cuGraphLaunch", 10000, "hipGraphLaunch", none, ""),
	row(GraphExecDestroy, "GraphExecDestroy", "cuGraphExecDestroy", 10000, "hipGraphExecDestroy", none, ""),
	row(GraphDestroy, "GraphDestroy", "cuGraphDestroy", 10000, "hipGraphDestroy", none, ""),
	row(UserObjectCreate, "UserObjectCreate", "cuUserObjectCreate", 11030, "hipUserObjectCreate", none, "destructor through the callback dispatcher"),
	row(UserObjectRelease, "UserObjectRelease", "cuUserObjectRelease", 11030, "hipUserObjectRelease", none, ""),
	row(GraphRetainUserObject, "GraphRetainUserObject", "cuGraphRetainUserObject", 11030, "hipGraphRetainUserObject", none, "move: flags 1"),
	row(MemGranularity, "MemGranularity", "cuMemGetAllocationGranularity", 10020, "hipMemGetAllocationGranularity", none, "allocation prop 32 bytes"),
	row(MemAddressReserve, "MemAddressReserve", "cuMemAddressReserve", 10020, "hipMemAddressReserve", none, ""),
	row(MemAddressFree, "MemAddressFree", "cuMemAddressFree", 10020, "hipMemAddressFree", none, ""),
	row(MemCreate, "MemCreate", "cuMemCreate", 10020, "hipMemCreate", none, ""),
	row(MemRelease, "MemRelease", "cuMemRelease", 10020, "hipMemRelease", none, ""),
	row(MemMap, "MemMap", "cuMemMap", 10020, "hipMemMap", none, ""),
	row(MemUnmap, "MemUnmap", "cuMemUnmap", 10020, "hipMemUnmap", none, ""),
	row(MemSetAccess, "MemSetAccess", "cuMemSetAccess", 10020, "hipMemSetAccess", none, ""),
	row(CanAccessPeer, "CanAccessPeer", "cuDeviceCanAccessPeer", 4000, "hipDeviceCanAccessPeer", none, ""),
	row(EnablePeerAccess, "EnablePeerAccess", "cuCtxEnablePeerAccess", 4000, "hipDeviceEnablePeerAccess", none, "already enabled is not an error"),
	row(DisablePeerAccess, "DisablePeerAccess", "cuCtxDisablePeerAccess", 4000, "hipDeviceDisablePeerAccess", none, ""),
	row(PointerDevice, "PointerDevice", "cuPointerGetAttribute", 4000, "hipPointerGetAttribute", none, "DEVICE_ORDINAL (9 in both): which device's context a synchronous copy or memset runs in"),
	row(StreamIsCapturing, "StreamCaptureInfo", "cuStreamIsCapturing", 10000, "hipStreamIsCapturing", none, "asked first: the full capture info only when a capture is active"),
}

// Vendor selects a column.
type Vendor int

// Vendors.
const (
	CUDA Vendor = iota
	HIP
)

// Symbol returns the row's symbol for v ("" if the vendor has none).
func (r Row) Symbol(v Vendor) string {
	if v == HIP {
		return r.HIP
	}
	return r.CUDA
}

// Required reports whether v's backend needs the row's symbol to open.
func (r Row) Required(v Vendor) bool {
	if v == HIP {
		return r.RequiredHIP
	}
	return r.RequiredCUDA
}
