package gpumem

// Module is a code module loaded on one device: CUDA's CUlibrary (from CUDA
// 12.0, where the driver has the library API) or CUmodule, HIP's
// hipModule_t. The zero Module is no module.
type Module struct {
	Device int
	Handle uintptr
}

// Function is a kernel of a loaded module (CUDA's CUkernel or CUfunction,
// HIP's hipFunction_t), usable on the module's device.
type Function struct {
	Device int
	Handle uintptr
	Name   string // the name it was looked up by
}

// Dim3 is a grid or block size.
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

// KernelParams is the vendor's kernel-parameter array (void **kernelParams
// of cuLaunchKernel and hipModuleLaunchKernel): Count pointers, each to one
// argument's bytes. The array and the arguments live in memory the Go
// garbage collector does not manage (the kernel package's argument
// buffers), so that the vendor library may read them during the call.
type KernelParams struct {
	Array uintptr // address of void *[Count]
	Count int
}

// Kernels loads modules and launches their kernels. Operations a vendor or
// version lacks return an error matching ErrNotSupported.
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
	// shared memory bytes and parameters, in stream order. During a capture
	// of s it adds a kernel node to the graph.
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
