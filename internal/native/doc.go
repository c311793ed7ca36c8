// Package native is the one implementation of gpumem.Backend that the CUDA
// driver backend (driver/) and the HIP runtime backend (hip/) share. A
// backend is this code plus a Dialect: the vendor's column of the symbol
// table (internal/symtab) and its translation of enums, device attributes,
// advice values, locations, struct layouts and status codes.
//
// # Calls
//
// Every call that concerns a device goes through ccall.CallPre6: the device's
// "make current" function (cuCtxSetCurrent with the device's primary context,
// retained at Open; hipSetDevice with the ordinal) and then the operation, in
// one transition into C on one OS thread, so callers on any goroutine never
// lock threads. Calls with no device (pinned host memory, copies between
// unified addresses, virtual address reservations) use device 0.
//
// Out-parameters live in cells taken from a sync.Pool: heap memory that does
// not move while C writes into it (a Go stack may move between the moment an
// address is taken and the call), and that costs no allocation in steady
// state. The hot paths (MallocFromPoolAsync, MallocAsync, FreeAsync,
// EventRecord, EventQuery, StreamWaitEvent, MemcpyAsync) allocate nothing on
// the Go heap and use no reflection.
//
// # Symbols
//
// Symbols are resolved once at Open into a table of addresses indexed by
// symtab.Op. A missing required symbol fails Open with an error naming it; a
// missing optional one makes its operation return a *gpumem.NotSupportedError
// naming the symbol and the library. The library is loaded behind a
// three-method seam (Library) that tests replace.
//
// # Callbacks
//
// Host functions and user-object destructors all go through the process's
// single C-callable dispatcher (internal/callback; purego callbacks are
// limited in number and never freed): fn is registered under an id that the
// runtime passes back as userData, and runs once, or at every launch of a
// graph it was captured into.
//
// # Errors
//
// A non-zero status becomes a *gpumem.Error with the backend, the symbol, the
// code, the library's own name for the code (cuGetErrorName, hipGetErrorName;
// cached per code) and the sentinel the dialect maps the code to.
package native
