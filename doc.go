// Package gpumem is the GPU layer for Go without cgo: one Backend interface
// over the vendor's own library loaded at run time (the CUDA driver,
// libcuda.so.1, or the HIP runtime, libamdhip64.so), the contract every
// allocator and adaptor meets (Allocator), and the registries through which
// backends and allocators are found by name.
//
// # Packages
//
//	gpumem            the Backend and Kernels interfaces, handle types, errors, the
//	                  Allocator contract, statistics, the backend and allocator registries
//	driver/           the CUDA driver API backend
//	hip/              the HIP runtime backend
//	sim/              a simulated GPU in pure Go, for tests and demos with no GPU
//	all/              imports every backend and allocator, so that Open and
//	                  NewAllocatorFromEnv can choose among them
//	caching/          the PyTorch-semantics caching allocator
//	asyncpool/        the stream-ordered pool allocator over the driver's pools
//	managed/          unified (managed) memory with the caching allocator's pools
//	deferrable/       memory that spills to pinned host memory or disk while unused
//	adaptor/          adaptors that wrap any allocator: limit, statistics, recorder, OOM retry
//	allocatortest/    the conformance suite every allocator and adaptor passes
//	backendtest/      the conformance suite every backend passes
//	simtest/          test helpers that report simulated memory left alive
//	config/           the GPUMEM_ALLOC_CONF keys and their meaning
//	metrics/          statistics through expvar and Prometheus text, from collectors
//	trace/            allocation traces: reading and writing
//	trace/torchsnapshot/ PyTorch memory snapshots, read without executing them
//	replay/           replays a trace through an allocator and measures it
//	cmd/gpumem/       the command-line tool
//	examples/         complete programs
//	internal/...      what users never name: the native engine (internal/native), the
//	                  symbol and status tables (internal/symtab), the loader (internal/dl),
//	                  the call path (internal/ccall) and the allocators' shared parts
//
// docs/architecture.md draws the layers and says where a new backend
// operation, vendor library, allocator or adaptor goes.
//
// # Choosing a backend
//
// Open reads GPUMEM_BACKEND (cuda, hip, sim or auto; default auto) and each
// backend's library variable (GPUMEM_CUDA_LIBRARY, GPUMEM_HIP_LIBRARY). Auto
// tries the registered backends in their order (CUDA, then HIP), and fails
// with an error naming every library tried and why it failed; it never falls
// back to the simulator. Backends register themselves when their package is
// imported; import github.com/gpumem/gpumem/all to have them all.
//
// # Choosing an allocator
//
// NewAllocatorFromEnv builds the allocator GPUMEM_ALLOC_CONF asks for (its
// backend key; the caching allocator by default), NewAllocator the one a
// configuration string asks for, NewNamedAllocator one by name. Allocators
// register themselves when their package is imported.
//
// # Threads
//
// CUDA's current context and HIP's current device are per-OS-thread state.
// Every Backend method is correct from any goroutine: handles carry their device
// and the backend makes that device current inside the same foreign call. Callers
// never lock OS threads.
package gpumem
