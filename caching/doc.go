// Package caching is a caching device-memory allocator with the semantics of
// PyTorch's CUDA caching allocator, over any gpumem.Backend (CUDA, HIP or the
// simulator), with extensions that cut fragmentation and device calls:
// cross-stream reuse, release before growth, growable segments that grow in
// place, and expandable segments that return free chunks.
//
// Other files say "See doc.go for an overview."
//
// # Glossary
//
//	segment     one device allocation (Upstream.Alloc, by default the backend's
//	            Malloc), one growable segment (physical memory mapped into a
//	            virtual range with room to grow), or one expandable segment: a
//	            virtual range reserved once per stream and pool, backed by
//	            physical chunks mapped on demand.
//	block       a range of a segment; the segment's blocks tile it in address
//	            order (prev/next). A block is allocated, pending (freed but
//	            awaiting events of streams that used it) or free (cached).
//	pool        the free blocks of one kind: small (requests of at most 1 MiB,
//	            carved from 2 MiB segments) or large. Each device has a small
//	            and a large pool; each graph capture pool has its own pair.
//	tree        the free blocks of one pool and one stream, ordered by
//	            (size, address): a treap whose nodes are the blocks themselves.
//	owner       the stream a block was allocated on; a freed block returns to
//	            its owner's tree, as PyTorch's raw_delete.
//	use         a stream other than the owner that touched a block
//	            (RecordStream, or a Deallocate ordered on another stream).
//	event       recorded on each use stream at free time; the block is reused
//	            only once every such event has completed.
//	private pool the pool of a graph capture (BeginCapture), released with
//	            ReleasePool when the graph is destroyed.
//
// # Locks
//
// Each device has one mutex, d.mu, guarding all of that device's state
// (its pools, trees, segments, blocks, events and statistics); no lock is
// shared between devices. The OOM handler and observers run with no lock
// held. Upstream and OnNewSegment run with d.mu held.
//
// A function that requires d.mu held is named …Locked, as in the Go
// runtime, and its doc comment says so. Only New's set-up of a device
// (initExpandable, initGrowable) calls them without the lock, before the
// device is shared.
//
// # Files
//
//	types.go     blocks, segments, pools, devices; New
//	alloc.go     the allocation path (Allocate, best fit, split, new segments)
//	free.go      the free path (Deallocate, RecordStream, merging)
//	events.go    stream-ordered reuse: events of pending frees, cross-stream reuse
//	release.go   memory back to the device: release before growth, the
//	             out-of-memory releases, garbage collection, EmptyCache, Close
//	stats.go     statistics, history, snapshots, out-of-memory reports
//	tree.go      the treap of free blocks
//	sleep.go     Sleep: cached memory released, kept contents saved, memory unmapped
//	wake.go      Wake: memory mapped back at the same addresses, contents restored
//	borrow.go    expandable segments borrowing another stream's mapped memory
//	expandable_unmap.go  expandable segments' physical allocations unmapped
//	physical.go  physical memory made and mapped (virtual memory API)
//	orphans.go   physical memory and ranges whose release the device refused
//	expandable.go, growable.go, capture.go, options.go, conf.go, register.go
//
// # Allocation path (Allocate)
//
//  1. Validate the size (zero or above 2^62: ErrInvalidValue) and round it:
//     to 512 bytes, or to roundup_power2_divisions steps. No lock.
//  2. Lock d.mu. If captures are underway on the device, choose the
//     capture's private pool for streams that belong to it (a
//     StreamCaptureInfo call, only while a capture is underway). Otherwise,
//     if frees are pending, query their events (in record order per stream,
//     stopping at the first incomplete one) and return completed blocks to
//     their pools; this is skipped when the stream is being captured.
//  3. Best fit: the smallest free block of the pool on the requesting stream
//     with size >= the rounded size, lowest address first among equals, one
//     O(log n) tree search. With max_split_size set, a request below it never
//     takes a block at or above it, and a request above it takes only a block
//     smaller than request + 20 MiB. This step makes no backend call and
//     allocates nothing: it is the path that amortizes every device call.
//  4. On a miss, with cross-stream reuse on, take the best-fitting free block
//     cached on another stream instead: record the owner's event (one cached
//     event per stream) and make the requesting stream wait on it; the block
//     keeps its owner and records the requester as a use, so its free orders
//     the owner after the requester. Two cheap stream-ordered calls replace a
//     device allocation.
//  5. With garbage_collection_threshold set and reserved memory above
//     threshold × allowed, free wholly free large segments not reused for
//     the longest (PyTorch's garbage_collect_cached_blocks).
//  6. With growable segments on (DefaultOptions), grow a wholly free
//     growable segment of the pool and stream in place instead: the largest
//     one smaller than the new segment would be, whose reserved virtual range
//     has room. One create, map and access call add the difference after
//     it; no synchronization, no free. Release before growth applies to the
//     difference, the grown segment excepted.
//  7. Ask for a new segment: 2 MiB for small requests, 20 MiB for requests
//     under 10 MiB, else the request rounded to 2 MiB; DefaultOptions
//     enlarge large segments to 256 MiB, but to no more than an eighth of
//     what the device already holds. A large segment is growable where the
//     backend has a virtual memory API: its physical memory is mapped at the
//     start of a virtual range eight times its size (at most twice the
//     device's capacity). With release before growth on and the
//     segment raising reserved memory above its high-water mark (plus
//     GrowthSlack over the allocated high-water mark, if set), first
//     free wholly free cached segments after one device synchronization:
//     the smallest that covers what is still needed, else the largest,
//     until the growth is covered. The memory fraction caps reserved memory
//     (see The memory fraction's cap, below).
//  8. If the device is out of memory: free oversize cached blocks
//     (max_split_size), retry; then wait for every pending event, free every
//     wholly free segment and unmap every free chunk, retry (num_alloc_retries).
//  9. Still out of memory: unlock, call the OOM handler (it may free memory
//     and ask for a retry: back to 2), else count the OOM, unlock, tell the
//     observers and return an *OutOfMemoryError that says what was asked, the
//     device's capacity and free memory, what is allocated and reserved, the
//     largest cached block, and the setting that would help. The handler is
//     asked at most oomhooks.MaxAttempts (8) times for one allocation
//     (attempt 0 to 7), as in every allocator of the project: a handler that
//     frees nothing but keeps answering yes would otherwise hold the caller
//     forever. Once the last retry it asked for has failed, so does the
//     allocation.
//  10. Split the block if the remainder is worth keeping (small pool: at least
//     512 bytes; large pool: more than 1 MiB and the request below
//     max_split_size; expandable: at least 512 bytes), cache the remainder,
//     record the block in the address table and count it.
//
// Expandable segments replace steps 6 and 7: each stream's pool has one virtual
// range twice the device's capacity; its free blocks are searched like any
// other, and the chunks (2 MiB small, 20 MiB large by default) under the
// chosen block are created, mapped and made accessible. Release before
// growth then unmaps free chunks elsewhere instead of raising the high-water
// mark, so physical memory moves between streams and holes instead of
// accumulating in them. Unmapping is not stream-ordered, so a move that
// unmaps first synchronizes the device; a growth with nothing to unmap
// (every growth while a workload first climbs to its peak) does not, since
// a synchronization on a busy GPU stalls every stream.
//
// Moves within a segment leave ghosts (ghost.go). A handle may be mapped at
// several addresses at once, so a free chunk of the growing segment moves by
// a map and an access grant at the new place alone: the old place stays
// mapped to it, unused (a ghost), and nothing is unmapped or synchronized.
// Both places belong to one stream, whose order keeps the work that used
// the old place ahead of the work that uses the new. A ghost is unmapped
// only when its address range is wanted for another handle (the unmap the
// move would have made, made later) or when its handle is released or
// leaves the segment (EmptyCache, Sleep, Close, a move to another stream's
// segment). The first waits for an event recorded on the segment's stream
// after the ghost was made, not for the device: by then the event has
// usually completed, and nothing waits at all. When a block lands on ghosts whose
// handles are free where they are active, the ghosts become active again
// with no device call at all: a workload that alternates phases moves the
// same chunks back and forth, and pays for a place once. The argument: the
// unmap is the dearest part of a move on a GPU (a 20 MiB chunk moves in 40
// µs with it and 25 µs without on an H200, as fast as a map alone;
// scripts/gpu/ghostbench.c), and the only part that needs the device
// drained; a ghost costs address space alone, of which a segment reserves
// twice the device, and no physical memory. Moves from another stream's
// segment still unmap, since that stream's work is not ordered with this
// one's. A backend that refuses a second mapping of a handle gets moves
// that unmap, from the first refusal on. Over one pass of the recorded
// traces this cut the chunks unmapped from 126 to 70 on gpt2, 205 to 94 on
// mix2 and 361 to 276 on unet (cnn, kvserve and pytorch-gpt move chunks
// between segments and pools, and kept their unmaps), with as many maps or
// fewer; unet's footprint rose by 0.4 % of its floor, still under the best
// of PyTorch's and the driver's.
//
// Allocations of several chunks (Options.ExpandableHandleChunks, off by
// default). What a mapping costs on a GPU is counted in physical
// allocations, not bytes: on an H200 a create, a map and an access grant of
// one allocation take about 60 µs whether it holds 2 MiB or 200 MiB, and
// every further allocation granted in the same call adds about 40 µs
// (tests.BenchmarkGPUVMMCosts). So a mapping may cover a run of up to N
// consecutive unmapped chunks with one allocation: one create, one map, and
// the run's grant counts it once. An allocation is unmapped whole, because
// the driver unmaps and frees what it mapped, not part of it; so a free
// chunk gives its memory back only with the rest of its allocation, and
// only a chunk that is an allocation of its own moves (a ghost). Where
// memory moves (a workload that changes phase), the chunks of an allocation
// that a long-lived block of the new phase partly covers stay mapped, and
// what would have moved as ghosts is unmapped and created again after a
// synchronization. On the H200, allocations of four chunks with a 2.5 %
// slack took 0.31-0.97 of PyTorch expandable's host time on nine recorded
// traces and 1.31 on mix2, against 0.33-0.94 for one chunk an allocation
// with 3 % (same call); on the simulator, seven of fifty-four phase
// workloads reserve more than the driver pool with it, none without. It
// pays where memory grows and stays (moe 0.41 against 0.62, prefetch 0.43
// against 0.71), not where it moves, so it is an option.
//
// Placement in an expandable segment, by default (DefaultOptions), is
// PyTorch's: the best fit by size, with the chunks the block lacks mapped
// there. What differs from PyTorch is where the physical memory comes from.
// PyTorch creates it and never unmaps, so its footprint is the span its
// best fit ever reached. Here, while reserved memory stays within
// ExpandableSlack (3 %) over the allocated high-water mark, or under the
// reserved high-water mark, new memory is created as PyTorch does; past
// that, free chunks are moved (a ghost revived, a chunk of this segment
// left as a ghost, or chunks unmapped elsewhere, as release before growth
// frees regular segments). So on one stream the footprint is at most
// PyTorch's, whose layout it shares and whose mapped chunks are a superset
// of its own, and at most the slack over the floor wherever moves can
// bring it there. The argument for a slack: a move costs an unmap, a map
// and an access grant (about 75 µs of host time on an H200) and buys
// memory that would otherwise sit mapped and free. Early in a run, while
// the allocated high-water mark still rises, a footprint held exactly at
// the reserved high-water mark moves memory on almost every growth; with
// no slack, best fit took up to 1.64 times PyTorch expandable's host time
// on the ten recorded traces (the U-Net: 2,531 chunks mapped against
// PyTorch's 253). On the H200, nine interleaved rounds: with 3 % every
// recorded trace is at or under the best of PyTorch native, PyTorch
// expandable and the driver pool, at 0.32-0.94 of PyTorch expandable's
// time; with 2 %, gpt2 and the U-Net were over PyTorch's time (1.04,
// 1.07); 4 % puts two traces over the driver pool's footprint (1.032 of
// the floor). On 400 generated workloads (testdata/phase) it is above the
// best anchor on 23 (at most 2.7 % over it), where mapped-first placement
// without a slack was above on 42 (1.6 %); the generated workloads, with
// few allocations between device calls, take more host time than PyTorch
// under either rule (docs/gpu-results.md).
//
// Mapped-first placement (expandable_placement:mapped_first) minimizes
// mapping, not address space.
// When the best fit by size would need chunks mapped, the smallest free
// block of the segment that holds the request on chunks already mapped is
// taken instead. The request goes at the start of the block's mapped run if
// the run starts the block, else at the run's end (the block split in front
// of it), so that what it leaves of the run stays joined to the rest of the
// block in one free block; a run cut off on the far side of the request
// would be a mapped sliver that only a small request can use, and a chunk
// partly used by such a request cannot move. Over 400 generated workloads
// whose footprints under PyTorch and the driver pool were measured on an
// H200 (testdata/phase/generated-anchors.jsonl, BenchmarkAgainstPyTorch),
// taking the run's start where it starts the block, instead of always its
// end, cut the workloads above the best anchor's footprint from 58 to 42
// and the device calls' cost by 2-3 % on the median workload and 8 % on
// the dearest. On one pass of the recorded traces it leaves the footprint
// the same on five and lower on the U-Net (1.021 to 1.019 of the floor), and
// makes 10 % fewer device calls on mix2, 6 % more on the U-Net and about as
// many on the others (docs/gpu-results.md). The argument for
// mapped memory first: in a virtual range of
// twice the device, address space costs nothing and physical memory and
// device calls cost everything. A mapping is a create or a move (an unmap
// elsewhere) plus an access grant, tens of microseconds each on a GPU (the
// grant 40 to 130 µs on an H200), and it grows reserved memory or moves it,
// while the mapped memory the best fit passed over stays idle. Serving from
// mapped memory first leaves reserved memory where it is and maps only when
// no mapped run is long enough. When none is, the request goes to the
// window, among the free blocks of its segment that fit it, that needs the
// fewest chunks mapped, a ghost that would become active again counting as
// mapped (the best fit by size wins a tie): a workload that alternates
// phases finds the places its blocks had before as ghosts and maps nothing
// there, where the best fit by size would map and move chunks again on
// every pass. Over the fifty-four phase workloads of testdata/phase (three
// passes each) the window search makes 16,065 device calls against 17,968
// for the best fit alone, fewer on 28 workloads and more on 10, with no
// larger a footprint in all; on three passes of the recorded U-Net it makes
// more (1,849 against 1,522). Earlier, over four passes of forty random
// phase workloads (scripts/phase_traces.py 0 40), ghosts and the window
// search made 20,301 calls against 23,526 for ghosts with the best fit
// (commit 485fc03) and 28,544 before ghosts (7c6b303); the footprint was
// better than before ghosts on eleven workloads and worse on five, by at most 0.8 % of
// the floor. The moves themselves unmap runs of
// consecutive free chunks in one call, and take chunks of the size being
// mapped first (moved, not released and created again), then segments in
// address order so that a run is repeatable; scans for mapped chunks stop
// at a segment's highest mapped chunk. On the simulator over six recorded traces this cut
// the chunk maps by 1.1x to 3.5x, the access grants by 1.3x to 5x and the
// unmap calls by 2.6x to 93x; peak reserved memory went down on one trace,
// stayed on three and rose on two (by 0.16 % and 0.58 % of the floor),
// everywhere under the best of PyTorch's and the driver's footprints
// (docs/gpu-results.md has the GPU run).
//
// The rule has a cost in footprint where requests sit just under a chunk:
// a mapped run elsewhere takes them where the best fit would move chunks,
// and the chunks at the seams stay partly used, so they cannot move. On
// beam search, whose caches grow by a few hundred KiB a token, it reserves
// 1.100 of the floor against PyTorch expandable's 1.063 on an H200, which
// is why best fit is the default.
//
// Borrowing across streams (borrow.go). With cross-stream reuse on (as in
// DefaultOptions), a large-pool request whose own segment would have to
// take memory from other segments (its mapping takes reserved memory past
// the high-water mark by more than the segment's own free mapped chunks
// cover) is served instead from a free block of another stream's segment of
// the same pool that holds it on mapped chunks alone, as step 4 lends a
// regular block: the owner's event is recorded and the requester made to
// wait for it (stream-ordered, no host wait), and the block keeps its owner
// and records the requester as a use. Of all such blocks the tightest
// mapped run wins, so that the owner keeps the long runs its own large
// blocks need whole. The argument: the move it replaces synchronizes the
// device, unmaps the chunks in the other segment and maps and grants them
// again (about 60 µs a 20 MiB chunk on an H200, and a stall of every
// stream), where the loan costs an event record and a stream wait, and the
// memory stays mapped where it is. A workload whose streams take turns with
// the same memory would otherwise move it back and forth on every turn: on
// twenty-four random phase workloads of one or two streams that no policy
// here was tuned on (scripts/phase_traces.py 100 124, three passes each) the
// device calls fall from 14,849 to 7,921 and the synchronizations from 708
// to 100, and on an H200 the worst host time against PyTorch's expandable
// segments from 5.7x to 1.8x. The cost is in the footprint, since a loan
// pins the owner's mapped run where a move takes free chunks wherever they
// lie: better on six of the twenty-four, worse on three, by at most 3.1 %
// of the floor (1.4 % to 4.5 %, still under the driver pool's 5.3 %), and
// above the best anchor on none that was under it. The small pool does not
// borrow: lending its 2 MiB chunks pinned the owner's runs and raised the
// footprint of a recorded trace (pytorch-gpt, 1.029 to 1.051, over the best
// anchor's 1.042) for little saving.
//
// # Free path (Deallocate)
//
//  1. Find the block in the device's open-addressing address table (the
//     stream's device first); not found: ErrInvalidValue (double free or a
//     foreign pointer).
//  2. A free ordered on a stream other than the owner records that stream
//     as a use. Uncount the allocation.
//  3. No uses: merge with free neighbours of the same stream (and segment)
//     and insert into the owner's tree: no backend call, no allocation.
//  4. With uses: record one event per use stream (a cached event), keep the
//     block pending until all complete (step 2 of allocation). During a
//     capture the events are recorded only when the last capture ends.
//
// # Memory the device refuses to give back
//
// A physical allocation or a virtual range whose release the device refuses
// (MemRelease, MemAddressFree) is not forgotten: it leaves ReservedBytes,
// MemoryStats.UnreleasedBytes counts it while the device holds it, and
// EmptyCache and Close try again (orphans.go). Sleep's releases go the same
// way, and a pinned save buffer whose FreeHost fails is kept for the next
// Sleep. Close reports what still fails and keeps it (segments whose free
// is refused, events whose destroy is refused, the sleep buffer and its
// stream with the releases above), and a second Close tries it all again,
// so a Close that failed can be retried until nothing leaks.
//
// # The memory fraction's cap
//
// per_process_memory_fraction (Options.PerProcessMemoryFraction) caps the
// bytes of reserved segments, as PyTorch's set_per_process_memory_fraction
// does, and the cap stays inside the allocator: it is checked where the
// allocator is about to grow (before a new or grown segment, and before
// expandable chunks are mapped), and an allocation that would cross it
// takes the out-of-memory path (steps 8 and 9), cached memory released
// first. Only the allocator knows when it would grow: a segment is
// reserved before any block of it is handed out, and most allocations are
// served from segments already held, so a cap on the bytes handed out says
// nothing about what the device holds. A limit adaptor, which wraps any
// allocator, is the other kind of cap: on the bytes handed out, the same for
// every allocator and blind to what the allocator caches. The two compose:
// a limit adaptor over a capped caching allocator bounds both.
//
// # Sleep and wake
//
// Sleep hands a device's memory to another phase or process (RLHF's
// training and generation, a server giving way) and Wake takes it back:
//
//  1. Sleep waits for every pending free and the device, and releases the
//     cache as EmptyCache does: free memory is not coming back.
//  2. It saves the KeepOnSleep allocations (AllocateTagged, SetSleepTag) to
//     one pinned host buffer: one stream-ordered copy per run of adjacent
//     kept blocks, then one synchronization. DiscardOnSleep blocks (Allocate's)
//     are not copied: their contents are undefined after Wake.
//  3. It unmaps every mapped chunk (one call per run of consecutive chunks)
//     and releases its physical memory. The chunks stay counted as reserved
//     and mapped, marked sleeping; the virtual ranges stay reserved, so every
//     pointer keeps its address. MemoryStats.AsleepBytes says how much.
//
// Sleep and Wake hold the device's lock throughout (allocations and frees
// on that device wait for them); their context is checked between phases,
// and copies under way are not interrupted.
//
// While asleep, Allocate fails with ErrAsleep; Deallocate and RecordStream
// work (a block freed while asleep is free after Wake); EmptyCache skips the
// device; Close releases everything. Touching the memory is undefined: the
// simulator reports it (an enqueue fails naming the unmapped reservation, a
// kernel is stopped with an illegal address, a Violation).
//
// Wake creates and maps a chunk of physical memory behind every sleeping
// chunk, grants access once per run, copies the saved runs back and waits
// for them. A Wake that cannot finish (out of memory because another
// process holds what Sleep released, above all) unmaps what it mapped and
// leaves the device asleep as it was, with an error that matches
// ErrOutOfMemory; calling Wake again later is the way on. A Sleep that
// fails before unmapping leaves the device awake (its cache released); one
// that fails while unmapping is undone by a Wake, or, if that fails too,
// leaves the device asleep for Wake to finish.
//
// Sleep needs expandable segments (expandable_segments:True), and refuses
// otherwise with ErrNotSupported, naming the setting. Only memory of the
// virtual memory API can be released while its address stays reserved: a
// segment from cuMemAlloc or hipMalloc cannot be freed without losing its
// address, and a new allocation may land elsewhere. A mode backing every
// regular segment with the virtual memory API would be expandable segments
// again with the regular segments' fragmentation, and growable segments
// cover only the large pool; one setting that makes every segment of the
// default pools sleepable is the simpler rule, and the one that cannot
// work by luck (a Sleep that succeeds only while every small allocation
// happens to be free). Graph capture pools keep regular segments: Sleep
// releases their free ones and refuses while a pool in use holds any.
//
// # Invariants
//
//   - The blocks of a segment tile it exactly; every block is in exactly one
//     state: allocated (in the address table), pending (in the table and
//     awaiting events) or free (in its owner's tree).
//   - No two adjacent free blocks of one stream exist (they are merged).
//   - A block is reused on another stream only after that stream was ordered
//     after everything queued on the block's streams up to its free.
//   - Statistics equal a recount of the blocks and segments.
//   - Memory is returned to the device (free, unmap) only after the device
//     was synchronized.
package caching
