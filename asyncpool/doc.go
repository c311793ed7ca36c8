// Package asyncpool is an allocator over the driver's stream-ordered memory
// pools (cuMemAllocFromPoolAsync / cuMemFreeAsync, hipMallocFromPoolAsync /
// hipFreeAsync): the driver does the caching, splitting and cross-stream
// reuse; this package adds what a framework needs around it, after
// PaddlePaddle's CUDA async allocator: a free stream for memory used on
// several streams, a throttle that lets pending frees land before memory
// runs out, the rules of graph capture, out-of-memory recovery and
// PyTorch-shaped statistics.
//
// # Glossary
//
//	pool            the device's default pool, or one the allocator created
//	                (Options.OwnPool). Its release threshold (KeepAll by
//	                default) keeps freed memory reserved across syncs.
//	allocation      one MallocFromPoolAsync; the allocator keeps a record of
//	                it (size, allocation stream, recorded streams) in a
//	                per-device map keyed by address.
//	allocation      the stream Allocate was called with. Work on it may use
//	stream          the memory at once.
//	recorded        a stream given to RecordStream: it uses the memory too, so
//	stream          the free must wait for it.
//	free stream     one non-blocking stream per device, made on first need.
//	                Frees that must wait for several streams happen there.
//	pending release bytes freed by users that the driver has not released yet:
//	                frees queued on the free stream, memory owned by graphs,
//	                frees deferred by a capture.
//	utilisation     (allocated + pending release) / device capacity.
//	graph state     what the allocator knows of one capture and then of the
//	                graph it produced: the allocations made in it, frees it
//	                deferred, whether it ever ran. A user object handed to the
//	                graph tells the allocator when the graph is destroyed.
//
// # Allocation path (Allocate)
//
//  1. Find the device state of s.Device (an atomic load; created on first
//     use under a lock taken only then). Take its life lock for reading
//     (Close takes it for writing). Reject a zero size or one larger than
//     the device.
//  2. Ask whether s is being captured (StreamCaptureInfo): with the default
//     CaptureCheckTracked only while the backend knows of an open capture
//     (one begun through a gpumem backend), with CaptureCheckHooks only
//     while a BeginCapture is open, with CaptureCheckEveryCall always.
//  3. Outside capture, housekeeping that costs nothing when there is
//     nothing to do (atomic checks): process graphs destroyed since the
//     last call, free what they released, and query the events of the
//     oldest pending frees (TryLock: never waits behind a free).
//  4. Throttle, outside capture: if utilisation after this request would
//     exceed Options.ThrottleRatio and frees were queued on the free stream
//     since s last joined it, join the free stream into s (EventRecord on
//     the free stream, StreamWaitEvent on s). The pool, following event
//     dependencies, can then reuse the memory those frees release.
//  5. Count size as under way (atomic, read by the throttle with the
//     tally's live bytes) until the record is made; a failed allocation
//     takes it back.
//  6. MallocFromPoolAsync(size, pool, s). During capture this makes a graph
//     allocation node; the first allocation of a capture also hands the
//     graph a user object and captures a host node that marks the graph as
//     launched when it runs.
//  7. Insert the record and update statistics and history (off unless
//     Options.HistorySize is set; one clock read per entry) under the
//     device's mutex. No heap allocation on this path beyond the map's own
//     growth.
//
// The fast path: when the backend can check for capture and allocate in one
// call (the CUDA and HIP backends and the simulator can) and there is no
// housekeeping to do (atomic checks), Allocate takes the device's mutex
// alone, checks the throttle, makes one call (the plain allocation while,
// with CaptureCheckTracked, the backend knows of no open capture; the
// checked one otherwise), and inserts the record before releasing the
// mutex: steps 1, 4's check, 6 and 7 under one lock, with no read lock on
// life (Close sets closed under the mutex too, so it cannot overtake the
// call), and no atomic add: what it hands out is in the tally, under the
// same lock, so step 5 is the full path's alone. An allocation over the
// throttle ratio, a captured stream, or an exhausted pool, sends the
// request down the full path. Deallocate has the same fast path for a live
// allocation of no capture with no recorded streams. On CUDA the plain
// allocation and free are short calls (internal/native: no system-call
// state, the context taken from the stream), so the pair costs about 55 ns
// over the same pair from C on an H200; the rest of what asyncpool adds is
// this bookkeeping: a record of 24 bytes in an open-addressed table, a
// tally that counts no figure which follows from the others, the fields
// the fast paths read together at the head of the device's state, two
// critical sections and no other atomic read-modify-write a pair; about
// 80-150 ns a pair (BenchmarkBookkeeping, here and on the H200's host).
//
// On ErrOutOfMemory from the driver (step 6), outside capture (and while no
// capture the allocator has seen is open on the device, which waiting would
// invalidate): process released graphs, DeviceSynchronize, retire every
// pending free, trim the pool to zero and try once more (num_alloc_retries);
// then call the OOM handler, with no lock held, for as long as it asks for
// another attempt (oomhooks.Retry: at most 8 attempts, the bound every
// allocator shares); then fail with *gpumem.OutOfMemoryError (num_ooms),
// which observers are told of. Its Largest field is the pool's reserved-but-unused
// bytes, an upper bound on the largest block the pool could hand out: the
// driver does not say how that memory is fragmented.
//
// # Free paths (Deallocate)
//
// Outside any capture (case 4 of the seed):
//   - No recorded stream, s on the memory's device: one FreeAsync(p, s).
//   - Otherwise: the allocation stream, s and every recorded stream are
//     joined into the free stream (an event recorded on each, waited on by
//     the free stream), and FreeAsync(p, free stream). An event recorded
//     after the free tells when it is done; until then its bytes count as
//     pending release.
//
// With graph capture, as the seed's four cases, and CUDA's rules for graph
// memory nodes (an allocation made by a graph exists from when the graph
// runs until it is freed; destroying the graph does not free it; a graph
// whose allocation is still live cannot be relaunched unless it was
// instantiated to free on launch):
//  1. Allocated and freed in the same capture: FreeAsync on the capturing
//     stream, a free node of the graph.
//  2. Allocated in a capture, freed outside it: the graph owns the memory.
//     When the graph (and every executable graph made from it) has been
//     destroyed, the allocator frees it on the free stream, after the
//     streams that used it, if the graph ever ran; if it never ran the
//     allocation never existed and there is nothing to free.
//  3. Allocated outside a capture (or in another), freed inside it: the
//     graph may touch the memory whenever it is launched, so the free waits
//     until that graph is destroyed, then goes as case 4 (or case 2 when
//     the memory is another graph's allocation). PaddlePaddle frees at the
//     end of the capture instead; a launch after that would use freed
//     memory.
//  4. Neither: the paths above.
//
// BeginCapture synchronizes the free stream before the capture starts, so
// that no free is pending inside it; during a capture the throttle is off
// and EmptyCache (trim) is refused with ErrCaptureActive. A global or
// thread-local capture must be ended by the goroutine that began it: the
// backend keeps that goroutine on its OS thread until then, as the vendors
// require.
//
// A device is set up (pool attributes, peer access) on its first use, or
// ahead of it with Setup.
//
// # Invariants
//
//   - Memory is freed exactly once, after every stream that used it (the
//     allocation stream, the freeing stream, recorded streams) and never
//     while a graph that may use it exists.
//   - A record is removed from the table before its memory is freed, and put
//     back if the free fails, so the driver can never hand out an address
//     the map still holds, and a failed call leaves the state as it was.
//   - The tally's live bytes are what users hold (plus the in-flight count
//     of allocations under way on the full path); pending counts bytes they freed
//     that are not known released; the free stream's pending list is in
//     free-stream order, so an entry is complete once any later one is.
//   - Lock order within a device: life, then freeMu, then mu; the event
//     pool and the released-graph list are leaves. The fast paths take mu
//     alone and hold it across their one backend call. No lock is shared by two
//     devices; user-object destructors and host nodes take only leaf locks
//     and never call the backend.
//
// # Statistics
//
// Stats has PyTorch's shape: allocation, allocated, requested and active
// figures count what users hold (requested equals allocated: the pool's own
// rounding is invisible); each allocation is one segment; reserved bytes are
// the pool's PoolReservedMemCurrent and PoolReservedMemHigh read in Stats;
// num_device_alloc and num_device_free count MallocFromPoolAsync and
// FreeAsync calls. Snapshot lists one segment per allocation (live, or
// pending release). Counters has the figures that MemoryStats lacks
// (throttle joins, free-stream frees, each graph case).
//
// # The memory-fraction cap
//
// per_process_memory_fraction caps the bytes handed out on a device, not the
// pool's reserved memory: the driver grows the reserve and keeps it by the
// release threshold, and the allocator could bound it only by refusing
// allocations, which is what a cap on bytes handed out does for any
// allocator. So the allocator keeps no cap of its own: the registered
// constructor (gpumem.NewAllocator with backend:asyncpool) puts the shared
// limit adaptor (adaptor.NewLimitFraction) over it, whose refusals are
// out-of-memory errors naming the key, counted in NumOOMs, after the OOM
// handler is asked (at most oomhooks.MaxAttempts times). A refusal costs no
// trim of the pool (trimming cannot lower the bytes handed out). A caller of
// New wraps the allocator the same way.
//
// # Configuration
//
// GPUMEM_ALLOC_CONF=backend:asyncpool,release_threshold_mb:N,throttle_ratio:R,
// per_process_memory_fraction:F; see OptionsFromConf. The package registers
// the allocator as "asyncpool" (gpumem.RegisterAllocator), so that
// gpumem.NewAllocator builds it from such a string.
package asyncpool
