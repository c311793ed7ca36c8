// Package rtc compiles one kernel source at run time for both vendors: with
// NVRTC (libnvrtc) into PTX on NVIDIA and with hipRTC (libamdhip64 in ROCm 5,
// libhiprtc from ROCm 6) into a code object on AMD, through the same call
// and without cgo.
//
// # Overview
//
//	res, err := rtc.Compile(ctx, rtc.Request{
//		Source: kernels.Saxpy.Source, Name: kernels.Saxpy.File, Target: "sm_90",
//	})
//
// Compile picks the compiler from the target (sm_XX and compute_XX: NVRTC;
// gfxNNN: hipRTC) and keeps one Compiler per vendor for the process. Open
// gives a Compiler of one's own (an explicit library file, a disk cache).
// TargetOf names the target of a device a gpumem.Backend sees.
//
// # The common dialect
//
// Before compiling, the source is prefixed with a header rendered from the
// project's table of dialect differences (Header): macros such as
// GPUMEM_SHFL_DOWN(mask, v, delta) and GPUMEM_WARP_SIZE that spell the same
// operation in CUDA's and HIP's dialect, so that one source compiles for both
// vendors. A #line directive after the header keeps the compiler's line
// numbers those of the source. Request.NoDialect leaves the source alone.
//
// # Targets
//
// A target the loaded compiler does not support is refused with an error
// matching gpumem.ErrNotSupported before the compiler is called: hipRTC of
// ROCm 5.2 aborts the process (libc "munmap_chunk(): invalid pointer") when
// asked for a target it does not know, such as gfx942 or gfx1100. NVRTC's
// supported architectures come from nvrtcGetSupportedArchs where the library
// has it; otherwise, and always for hipRTC, from a table by compiler version
// kept as data (Targets lists it).
//
// # Cache
//
// Images are cached by (vendor, compiler version, target, options, name
// expressions, source): in memory for the Compiler's life, and on disk when
// WithCacheDir names a directory (one file per key named by its SHA-256,
// written atomically; a file that does not read back whole is ignored and
// rewritten).
//
// # Concurrency
//
// A Compiler is safe for use from many goroutines. NVRTC programs are
// independent and compile in parallel; hipRTC compiles are serialised per
// Compiler (ROCm 5's hipRTC shares state between programs). Close waits for
// compiles in flight.
//
// # Calls
//
// The compilers are called through internal/ccall with the RTC table of
// internal/symtab (one row per function, a column per vendor). Strings and
// out-parameters live in Go heap memory kept alive across each call (never
// on the goroutine stack: a compile is long and may call back), and
// everything the compiler returns is copied before its program is destroyed.
package rtc
