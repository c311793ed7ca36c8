// Package sim is a simulated GPU in pure Go. *GPU implements gpumem.Backend,
// so allocators and programs can be tested, deterministically if need be, on
// machines with no GPU; it speaks like the CUDA driver (status codes, names,
// rules) and adds what a real GPU cannot give a test: a use-after-free
// detector, leak reports with creation stacks, fault injection, call
// counters and a view of managed-memory residency.
//
// # Glossary
//
//	device      a configured GPU: capacity, granularity, features (DeviceConfig)
//	object      anything with an address range: an allocation, a pool chunk,
//	            a virtual-memory mapping or reservation, a tag
//	stream      a FIFO of ops; ops complete in order
//	op          one unit of queued work: copy, memset, kernel (Launch,
//	            LaunchKernel), host function, event record, event wait, free,
//	            prefetch, graph node
//	kernel      a Go function registered under a name (Kernel) that modules
//	            resolve and LaunchKernel runs over a grid of blocks
//	capture     a stream (and the streams forked from it) recording ops into a graph
//
// # Memory
//
// Every device owns a 16 TiB slice of one 64-bit address space; pinned host
// memory, managed memory and virtual-memory reservations have regions of
// their own, so addresses are unique across devices, never 0 and aligned to
// 512 bytes. Free address ranges live in a rangeSet: segregated size classes
// with a bitmap (an O(1) good fit) and maps keyed by start and end (O(1)
// coalescing). Live objects live in a treap keyed by start, which answers
// "which allocation holds this address" for copies, kernels and the
// detector. Device memory is backed lazily by 64 KiB host pages created on
// the first write; untouched memory reads as zeros and costs nothing, so a
// 140 GiB device on which a replay reserves tens of GiB stays cheap. Pinned
// host and managed allocations up to 4 GiB are one Go slice each, which
// HostBytes returns.
//
// Capacity counts Malloc, the pools' chunks, MemCreate, launched graph
// allocations and managed pages resident on the device; exceeding it fails
// exactly as the driver does, with a *gpumem.Error of code 2
// (CUDA_ERROR_OUT_OF_MEMORY) matching gpumem.ErrOutOfMemory. Malloc evicts
// resident managed pages to the host before it fails.
//
// # Streams and time
//
// A stream counts the ops queued (enq) and completed (done); an event
// remembers the stream and count of its last record; StreamWaitEvent queues
// a wait on that count. The legacy default stream (Handle 0) waits for all
// blocking streams of its device and they wait for it; non-blocking streams
// do not. In free-running mode (the default) an op whose stream is idle and
// that is cheap (not a host function or kernel) runs at once in the caller;
// the rest run on a goroutine per stream, started when work arrives and
// gone when the stream is idle. With Config.Manual nothing runs until Step,
// Drain or a synchronizing call (StreamSynchronize, EventSynchronize,
// DeviceSynchronize, synchronous copies, Free), which drives exactly the
// work it needs, so tests can interleave streams deterministically.
//
// # Stream-ordered pools
//
// Each device has a default pool; MemPoolCreate makes more. A pool reserves
// chunks and carves allocations of 512 byte multiples from them. FreeAsync
// returns memory when its stream reaches the free; before that, MallocAsync on the same stream, or on a
// stream ordered after the free by an event wait, may reuse it at once (as
// CUDA's follow-event-dependencies). At synchronization points a pool
// releases empty chunks above its release threshold (0 by default, as in
// CUDA). Pools grow in chunks of 32 MiB multiples (PoolGranularity), as
// CUDA 13's do on an H200. The reserved and used attributes are exact: used
// is the sum of the sizes asked for by allocations whose free has not been
// reached (CUDA counts requested bytes), reserved the sum of chunks.
//
// # Graphs
//
// While a stream captures, work queued on it, and on streams that waited on
// an event recorded in the capture, becomes graph nodes. MallocAsync during
// capture is an allocation node whose address is fixed at capture and whose
// memory is taken when a launch reaches it; FreeAsync during capture is a
// free node. The calls CUDA 13 refuses during capture (as measured on an
// H200) fail with its codes and invalidate the capture: synchronizing or
// querying a capturing stream (900), querying or synchronizing an event
// recorded in a capture (907), legacy-stream work that would synchronize
// with a capturing blocking stream (906), waiting on an event recorded
// outside the capture (905), DeviceSynchronize on a device with a capture
// in any mode (900), and, while a global-mode capture is active, Malloc,
// Free, MallocHost, FreeHost and synchronizing other streams or events
// (900). The simulator cannot tell goroutines apart, so thread-local mode
// behaves like global mode; relaxed mode permits those calls. User objects
// run their destructor when their last reference goes, whether the program,
// a graph or an executable graph held it.
//
// # Kernels written in Go
//
// *GPU implements gpumem.Kernels with kernels written in Go. A Kernel is a
// name, a parameter signature (PtrParam for device pointers, ScalarParam
// for values) and a Run function; RegisterKernel registers it for every
// GPU of the process, GPU.RegisterKernel for one GPU, whose registrations
// are found first.
//
// ModuleLoadData accepts three kinds of image. A simulator image
// (ModuleImage.Bytes) and PTX text declare kernel names (PTX's .entry) and
// globals (PTX's .global and .const variables, zeroed); ModuleFunction
// finds a name only if the image declares it and a kernel of that name is
// registered, and fails with CUDA_ERROR_NOT_FOUND (500) otherwise. Any
// other image (a cubin, a fatbin, a code object) is opaque: every
// registered kernel is one of its functions and it has no globals. Globals
// are device memory, allocated at load, freed at ModuleUnload and listed
// by Leaks while the module is loaded.
//
// LaunchKernel reads the vendor's parameter array during the call and
// copies the arguments (the array carries no sizes: the simulator checks
// the count, null pointers, arguments laid out shorter than the signature
// says, and that each pointer argument is memory the device may touch;
// mismatches are CUDA_ERROR_INVALID_VALUE). The launch is an op of the
// stream, run after the stream's earlier work and the events it waits for,
// or, during a capture, a kernel node whose replays use the captured
// arguments. When it runs, Run is called once per block, blocks in order of
// their linear index, on the stream's goroutine with no lock held; inside a
// block, KernelCall.Threads calls a function for each thread, and each call
// of Threads is a phase that all threads finish before the next (the model
// of __syncthreads). KernelCall.Shared is the block's shared memory, and
// Load, Store, AtomicAdd, Read and Write touch device memory, each access
// taking the GPU's lock. Every access is checked: an address outside a live
// allocation, or past the size the allocation asked for, stops the kernel;
// a panic in Run stops it too. A stopped kernel is a Violation and its
// device's sticky error, as CUDA's faults are: CUDA_ERROR_ILLEGAL_ADDRESS
// (700) for memory, CUDA_ERROR_UNKNOWN (999) for a panic,
// CUDA_ERROR_INVALID_VALUE (1) for an argument read as a type of another
// size. Synchronizing and querying streams, events and the device, and
// later launches on the device, return it; only a new GPU clears it.
//
// Function attributes come from the registration (MaxThreads, default
// 1024; SharedBytes; Regs), with PTX and binary version 90 and a dynamic
// shared memory limit of 48 KiB less the static, settable up to 227 KiB
// less the static. Occupancy models one of 132 multiprocessors of 2048
// threads in warps of 32, 32 blocks, 228 KiB of shared memory and 65536
// registers allocated per warp in units of 256.
//
// Every Kernels operation has its row in the driver table: it is counted
// and fault-injectable like every other method, by its Go name (Calls,
// InjectFault: "ModuleLoadData", "ModuleFunction", "LaunchKernel", ...),
// and its errors name the method and the CUDA symbol.
//
// # The use-after-free detector
//
// When an op that touches memory (copy, memset, Launch, LaunchKernel for
// each of its pointer arguments, Prefetch) is queued,
// the simulator resolves its range to the innermost owner: a Tag, a
// stream-ordered allocation, or the allocation or mapping itself. When the
// op runs it checks the owner again: if it was freed in between (Free,
// FreeAsync reached, MemUnmap, Untag) it records a Violation, naming what
// the range belongs to now. A range can only change hands after its owner
// was freed (stream-ordered reuse on the freeing stream aside, which is
// safe), so this also catches memory handed to another allocation while
// work on another stream still used it. Caching allocators that carve
// segments get the same check per block: Tag when a block is handed out;
// UntagAsync(block, s) when it becomes reusable on stream s (the tag
// counts as freed when s gets there, so same-stream reuse stays legal);
// Untag when it becomes reusable everywhere (after the events of the
// streams that used it completed). Free, like cuMemFree, waits for the
// work queued on its device first; MemUnmap does not.
//
// In free-running mode idle streams often finish work the moment it is
// queued, so a missing ordering between streams shows up reliably in
// Manual mode, where a test steps the streams in the order that breaks it.
//
// # Test support
//
// Leaks lists every live object with the stack that created it (frame
// pointers are walked at creation, which costs nanoseconds; the stack is
// formatted only when reported). Violations lists detector reports.
// InjectFault makes the nth future call of any Backend method that returns
// an error fail (Name, Library and ErrorName cannot fail). Calls counts
// calls per method. HostBytes, Residency and Migrated expose host views and
// managed-memory state.
//
// The package registers itself as the "sim" backend of gpumem.Open;
// GPUMEM_SIM_DEVICES sets its device count (default 1) and
// GPUMEM_SIM_CAPACITY the bytes per device.
package sim
