// Package kernel launches kernels with arguments given as Go values.
//
// A Launcher is made once per kernel from a declared signature, the kinds
// of the kernel's parameters in order:
//
//	l, err := kernel.New(k, f, kernel.Ptr, kernel.Ptr, kernel.Float32, kernel.Int32)
//	defer l.Close()
//	l.SetPtr(0, x); l.SetPtr(1, y); l.SetF32(2, 2.5); l.SetI32(3, n)
//	err = l.Launch(s, gpumem.Dim3{X: blocks}, gpumem.Dim3{X: 256}, 0)
//
// where k is a gpumem.Kernels (every gpumem.Backend is one: the CUDA and
// HIP backends, and the simulator with its Go kernels) and f a function of
// a loaded module.
//
// # Layout
//
// New lays out the vendor's kernel-parameter array (void **kernelParams of
// cuLaunchKernel and hipModuleLaunchKernel) once, in pages mapped outside
// the Go heap (mmap): the array of n pointers first, then each argument's
// bytes at its natural alignment, each pointer pointing at its argument.
// The vendor library reads those bytes during the launch call and copies
// them; memory the garbage collector manages, holding pointers into
// itself, must never be handed to C, and the mapping is not such memory.
//
// Setters write an argument's bytes in place; Launch passes the array. The
// steady path (setters and Launch) allocates nothing on the Go heap and
// uses no reflection.
//
// # Parameter kinds
//
//	Ptr                         gpumem.Ptr (a device, pinned or managed address) from any allocator
//	Int8 .. Int64, Uint8 .. Uint64  C's int8_t .. uint64_t (int is Int32, unsigned is Uint32, size_t is Uint64)
//	Float32, Float64            float, double
//	Struct(size, align)         a plain struct of those, passed by value: its bytes as C lays them out
//
// # Checks
//
// Each setter checks the index and the kind against the declared signature,
// SetStruct the size; Launch refuses while an argument has never been set.
// A mismatch is an error matching gpumem.ErrInvalidValue, returned before
// anything reaches the driver. New also checks the signature against what
// the kernel itself declares, its parameters' count and sizes, where the
// backend reports them (gpumem.ParamReporter: CUDA 12.4 and later through
// cuFuncGetParamInfo, and the simulator); a kernel given fewer arguments
// than it reads would read memory past the argument array. HIP has no such
// query: there the signature given to New must match the kernel's, and New
// refuses only what no kernel can take (parameters over MaxParamBytes
// together, as the kernel lays them out). A launch through the backend directly (gpumem.Kernels.LaunchKernel, no
// Launcher) is checked by count only, for kernels the CUDA backend looked
// up itself (ModuleFunction) on a driver that reports their parameters.
//
// # Concurrency
//
// Every method of a Launcher is safe to call from many goroutines: a mutex
// guards the argument bytes, and a launch sees the arguments as they were
// when it was called. Arguments stay set from one launch to the next. A
// goroutine's sequence of setters and Launch is not atomic, though: for
// goroutines launching the same kernel with arguments of their own, give
// each its own Launcher (Clone makes one with the same signature).
package kernel
