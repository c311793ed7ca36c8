package gpumem

import "fmt"

// Module is a code module loaded on one device: CUDA's CUlibrary (from CUDA
// 12.0, where the driver has the library API) or CUmodule, HIP's
// hipModule_t. The zero Module is no module.
type Module struct {
	Device int     // ordinal of the device it was loaded for
	Handle uintptr // CUlibrary, CUmodule or hipModule_t
}

// Function is a kernel of a loaded module, usable on the module's device:
// CUDA's CUfunction of the device's context (with the library API, the
// CUkernel's function for that context) or HIP's hipFunction_t.
type Function struct {
	Device int     // ordinal of the module's device
	Handle uintptr // CUfunction or hipFunction_t
	Name   string  // the name it was looked up by
}

// Dim3 is a grid or block size. A zero component counts as 1, so Dim3{X: n}
// is a one-dimensional size.
type Dim3 struct{ X, Y, Z uint32 }

// Threads returns X*Y*Z (1 for a zero component).
func (d Dim3) Threads() uint64 {
	n := uint64(1)
	for _, v := range [3]uint32{d.X, d.Y, d.Z} {
		if v != 0 {
			n *= uint64(v)
		}
	}
	return n
}

// FuncAttribute is a function attribute, translated per vendor.
type FuncAttribute int

// Function attributes (CUfunction_attribute / hipFunction_attribute).
const (
	FuncMaxThreadsPerBlock        FuncAttribute = iota // the largest block the function can be launched with
	FuncSharedSizeBytes                                // static shared memory per block
	FuncConstSizeBytes                                 // constant memory
	FuncLocalSizeBytes                                 // local memory per thread
	FuncNumRegs                                        // registers per thread
	FuncPTXVersion                                     // the PTX (or ISA) version it was compiled for, 10*major+minor
	FuncBinaryVersion                                  // the binary architecture version, 10*major+minor
	FuncMaxDynamicSharedSizeBytes                      // the dynamic shared memory limit (settable)
	numFuncAttributes
)

var funcAttrNames = [numFuncAttributes]string{
	"max_threads_per_block", "shared_size_bytes", "const_size_bytes", "local_size_bytes",
	"num_regs", "ptx_version", "binary_version", "max_dynamic_shared_size_bytes",
}

// String names the attribute.
func (a FuncAttribute) String() string {
	if a >= 0 && a < numFuncAttributes {
		return funcAttrNames[a]
	}
	return fmt.Sprintf("func_attribute(%d)", int(a))
}

// ParamInfo is where one kernel parameter lies in the device-side
// parameter layout, and its size.
type ParamInfo struct {
	Offset, Size uint64
}

// ParamReporter is implemented by the Kernels that can list a kernel's
// parameters: the CUDA backend from CUDA 12.4 (cuFuncGetParamInfo; older
// drivers and HIP answer ErrNotSupported) and the simulator. kernel.New
// checks a declared signature against it, so that a launch never gives the
// vendor fewer arguments than the kernel reads.
type ParamReporter interface {
	// FuncParams returns f's parameters, in order.
	FuncParams(f Function) ([]ParamInfo, error)
}

// KernelParams is the vendor's kernel-parameter array (void **kernelParams
// of cuLaunchKernel and hipModuleLaunchKernel): Count pointers, each to one
// argument's bytes. The array and the arguments live in memory the Go
// garbage collector does not manage (the kernel package's argument
// buffers), so that the vendor library may read them during the call.
type KernelParams struct {
	Array uintptr // address of void *[Count]
	Count int
}

// Kernels loads modules and launches their kernels. It is part of every
// Backend: the native backends (CUDA, HIP) call the vendor's module and
// launch functions, the simulator runs Go kernels registered by name
// (sim.RegisterKernel), and a backend without kernels (a test fake)
// answers ErrNotSupported. Operations a vendor or version lacks return an
// error matching ErrNotSupported.
//
// Methods are safe for concurrent use; handles carry their device, made
// current inside each call. The kernel package builds argument arrays and
// launches through it.
type Kernels interface {
	// ModuleLoadData loads a module from an image in memory on device dev:
	// PTX, a cubin or a fatbin for CUDA; a code object or an offload
	// bundle of them for HIP.
	ModuleLoadData(dev int, image []byte) (Module, error)
	// ModuleUnload unloads m; its functions become invalid.
	ModuleUnload(m Module) error
	// ModuleFunction returns the kernel named name (its lowered name for a
	// template instance or a C++ function).
	ModuleFunction(m Module, name string) (Function, error)
	// ModuleGlobal returns the device address and size of a module global
	// (a __device__ or __constant__ variable).
	ModuleGlobal(m Module, name string) (Ptr, uint64, error)
	// FuncAttribute reads an attribute of f.
	FuncAttribute(f Function, a FuncAttribute) (int, error)
	// FuncSetMaxDynamicSharedMemory sets the dynamic shared-memory limit of
	// f (above 48 KiB needs it on CUDA).
	FuncSetMaxDynamicSharedMemory(f Function, bytes int) error
	// LaunchKernel launches f on s with the given grid and block, dynamic
	// shared memory bytes and parameters, in stream order; f and s belong
	// to one device. During a capture of s it adds a kernel node to the
	// graph (from any goroutine: a launch is allowed in every capture
	// mode). params must stay valid and unchanged until it returns; the
	// vendor copies the argument bytes. It allocates nothing on success.
	// Where the backend knows f's parameter count (the CUDA backend, for
	// kernels of its ModuleFunction on CUDA 12.4+; the simulator), a
	// params.Count other than it is an error matching ErrInvalidValue.
	LaunchKernel(f Function, grid, block Dim3, sharedMem uint32, s Stream, params KernelParams) error
	// OccupancyMaxActiveBlocks is the number of blocks of blockSize threads
	// (with dynSmem bytes of dynamic shared memory each) that can be active
	// on one multiprocessor.
	OccupancyMaxActiveBlocks(f Function, blockSize int, dynSmem uint64) (int, error)
	// OccupancyMaxPotentialBlockSize suggests a block size that maximises
	// occupancy (at most blockLimit threads when blockLimit > 0), and the
	// smallest grid that fills the device with it.
	OccupancyMaxPotentialBlockSize(f Function, dynSmem uint64, blockLimit int) (minGrid, blockSize int, err error)
}
