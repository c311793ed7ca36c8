// Package native is the one implementation of gpumem.Backend that the CUDA
// driver backend (driver/) and the HIP runtime backend (hip/) share. A
// backend is this code plus a Dialect: the vendor's column of the driver
// table (symtab.Driver), its status table (symtab.Statuses) and its
// translation of enums, device attributes, advice values, locations and
// struct layouts.
//
// # Files
//
// One role each:
//
//	library.go  the loading seam (Library, Loader) and the real loader, DL
//	dialect.go  what distinguishes one vendor from another
//	abi.go      struct sizes, layouts and values both vendors' headers share
//	open.go     Load (resolve every row), Open (check, start, refine)
//	backend.go  the Backend type and its identity (name, library, versions)
//	call.go     the call path: device checks, one transition into C, errors
//	cell.go     out-parameter cells
//	report.go   symbol reports for the symbols command
//	device.go, memory.go, copy.go, stream.go, event.go, pool.go,
//	guarded.go, graph.go, vmm.go, peer.go: the Backend methods by concern
//	module.go   the Backend's gpumem.Kernels: modules (CUDA's library API from 12.0), functions, attributes
//	launch.go   the Backend's gpumem.Kernels: launches (eleven arguments, through ccall.CallPre12), occupancy
//
// # Calls
//
// Every call that concerns a device goes through ccall.CallPre6 (CallPre12
// for the kernel launch and cuLibraryLoadData): the device's
// "make current" function (cuCtxSetCurrent with the device's primary context,
// retained at Open; hipSetDevice with the ordinal) and then the operation, in
// one transition into C on one OS thread, so callers on any goroutine never
// lock threads. Calls with no device (pinned host memory, copies between
// unified addresses, virtual address reservations) use device 0.
//
// The exception is a row marked symtab.Row.StreamContext for the vendor
// (CUDA's cuMemAllocFromPoolAsync and cuMemFreeAsync), called on an explicit
// stream by a dialect with DirectCalls: the driver takes the context from
// the stream and the pool or the address, so the call is made alone
// (ccall.Call6), one foreign call less (about 25 ns on an H200). This is
// asyncpool's hot path while no capture is open (CaptureCheckTracked); its
// guarded calls, which ask the capture status in the same transition, still
// make the context current. The default streams (handles 0, 1 and 2) stand
// for the current context's, and always make it current. A direct call that
// fails for any reason but a lack of memory is made again with the context
// current. Close does not wait for calls under way, direct or not: a call
// that races Close may find the context released.
//
// A row marked symtab.Row.Short for the vendor (CUDA's stream-ordered
// allocation and free) is made as a short call: ccall.Short6, ShortPre6
// with the context made current, or ShortOut6 for an allocation, whose
// out-pointer then lives on the C stack. The goroutine is pinned to its
// processor and C runs on a stack of the processor's own, without
// runtime.cgocall's system-call state: about 40 ns less a call on an H200.
// While any callback of internal/callback is registered, or with
// GPUMEM_SHORT_CALLS=0, they are ordinary calls (docs/architecture.md,
// "Short calls").
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
// symtab.Op (an array: a call's lookup is one index). A missing required
// symbol fails Open with an error naming it; a missing optional one makes
// its operation return a *gpumem.NotSupportedError naming the symbol and the
// library. The library is loaded behind a
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
// cached per code) and the sentinel the vendor's status table maps the code
// to. A library that lacks required symbols fails Open with a
// *gpumem.MissingSymbolsError; one that does not load, with a
// *gpumem.LoadError (both public, for errors.As).
package native
