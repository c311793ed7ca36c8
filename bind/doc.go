// Package bind binds a vendor's C library to Go without cgo, from a table.
//
// gpumem reaches the CUDA driver and the HIP runtime through tables of
// symbols, one row per function with each vendor's name for it, and a call
// path that enters C once per call without allocating. This package opens
// that engine to any library: a program declares the library (its file
// names per vendor, an environment variable naming a file, its status
// convention) and a table of the functions it calls, opens it with Open,
// and calls the functions by their row.
//
//	var cuUUID = bind.NewTable("uuid",
//		bind.Func{Op: "DeviceUUID", Symbol: bind.Symbols("cuDeviceGetUuid_v2", "hipDeviceGetUuid"), Args: bind.Args(2), Required: bind.Both},
//	)
//
// A row is a Func: the operation's name, the symbol for CUDA and for HIP
// (empty where the vendor has no such function), the number of argument
// words each takes (Args), whether the library is useless without it
// (Required) and notes. Args is per vendor, because the dialects do not
// always agree: bind.Args(n) declares n words for both, bind.ArgsPer(3, 4)
// three for CUDA and four for HIP (cuMemcpy and hipMemcpy, whose copy kind
// CUDA lacks), bind.Args(0) a function of no arguments; a Func without Args
// is not checked (a variadic function).
// gpumem's own tables (the driver's, the run-time compilers', BLAS,
// collectives and telemetry) are tables of this type.
//
// # Loading
//
// Open tries the Library's environment variable (or the path given with
// WithPath) and then each candidate file of the vendor, and resolves every
// row. A missing required symbol fails the load with a
// *gpumem.MissingSymbolsError naming it; a missing optional symbol makes
// only its calls fail, with an error matching gpumem.ErrNotSupported that
// names the symbol. No file loading is a *gpumem.LoadError matching
// gpumem.ErrLibraryNotFound, naming every file tried and why.
//
// # Calls
//
// Lib.Call passes integer and pointer arguments (uintptr words) to the
// function of a row and returns its raw result; Lib.Check reads the result
// as the library's status (Library.Status) and returns nil or an *Error.
// CallOn and CheckOn first make a device's context current, on the same
// OS thread and in the same transition into C, as gpumem's backends do
// for their own calls: a function that works on "the current device"
// (cublasCreate, ncclCommInitRank) sees the device of the Context, from any
// goroutine, with no runtime.LockOSThread. A Context comes from a backend
// with ContextOf.
//
// A call makes no heap allocation and uses no reflection; its argument
// count is checked against the row's Args. Up to MaxArgs words are passed:
// six (amd64) or eight (arm64) in registers and the rest on the C stack.
// A struct the C ABI passes by value is laid out by the caller as the
// words that ABI uses (on amd64 a struct over 16 bytes is copied onto the
// stack in 8-byte words; on arm64 it is passed as a pointer to a copy).
// Floating-point arguments by value are not supported; the libraries this
// is for take scalars through pointers (cuBLAS's alpha and beta).
//
// # Rules for pointers
//
// The rules are cgo's. Memory the C function writes through an
// out-parameter should be heap memory kept alive with runtime.KeepAlive
// until the call returns, or a variable whose address is converted to
// uintptr in the call's own argument list. C must not keep a pointer to Go
// memory after it returns, and Go memory passed to C must not hold Go
// pointers.
//
// Nothing in this package panics on bad input: an unknown row, a wrong
// argument count, a closed library and a context of a closed backend are
// errors.
package bind
