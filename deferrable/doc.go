// Package deferrable implements deferrable (spillable) device memory, after
// RAPIDS RMMEP-1: buffers that the manager may move off the device while
// nobody uses them, whose device address is reachable only while they are
// held.
//
// # Glossary
//
//	Manager   owns the buffers of one device, their bookkeeping and the
//	          machinery that moves them. One lock (Manager.mu) guards all
//	          bookkeeping; it is never held across a copy, a device allocation
//	          or a callback.
//	Buffer    one deferrable allocation. It lives in exactly one tier:
//	          device, host (a block of the pinned arena) or disk (an extent
//	          of one private file).
//	hold      a reason not to move a buffer: an Acquire not yet Released, an
//	          AcquireAsync not yet released, or an asynchronous release whose
//	          event has not yet been seen complete.
//	fence     an event per (buffer, stream), recorded on the stream when a
//	          hold ends; every later move or free of the buffer is ordered
//	          after it on the copy stream, so the host never waits for the
//	          user's work to release memory.
//	copy stream  one non-blocking stream per manager. All of the manager's
//	          device memory is allocated and freed in stream order on it, and
//	          every transfer runs on it.
//	arena     the host tier: page-locked slabs from MallocHost
//	          (Options.HostSlabBytes each, or one buffer's size when larger),
//	          carved best fit into page-aligned blocks (each slab's free
//	          extents are an internal/extent list). Pinning is slow
//	          (milliseconds per tens of MiB), so slabs are kept across spills,
//	          grown on demand up to Options.HostLimit, and given back only by
//	          Manager.TrimHost (empty slabs) or Close. A move between the device
//	          and the host tier is one DMA on the copy stream, device memory to
//	          pinned memory, with no host copy.
//	staging   a ring of pinned host buffers (Options.StagingBytes each,
//	          Options.StagingBuffers of them), made on first use by the disk
//	          tier. Transfers between the device and disk go chunk by chunk
//	          through the ring so that the DMA of one chunk overlaps the file
//	          I/O of the previous.
//	upstream  the gpumem.Resource the device memory comes from (any allocator;
//	          by default a DeviceResource over Backend.Malloc/Free).
//
// # Holding a buffer
//
// Acquire(s) makes the buffer resident and holds it; the address it returns
// is valid for work ordered on s until Release. If the buffer was not on the
// device, Acquire:
//
//  1. marks it moving (other goroutines that want it wait on Manager.cond);
//  2. allocates device memory from the upstream on the copy stream. Before
//     passing Options.DeviceLimit it spills other buffers (below); on
//     ErrOutOfMemory it spills and retries, at most eight times
//     (internal/oomhooks.MaxAttempts, the one bound on OOM retries that every
//     allocator of gpumem and the DeviceResource's handler loop share), and
//     fails when a spill frees nothing and has nothing in flight to wait for;
//  3. copies the bytes in on the copy stream (from the host tier, one DMA
//     out of the pinned arena; from disk, through the staging ring) and waits
//     for the copy to complete, so that its time in Stats is the whole copy;
//  4. under the lock, switches the buffer to the device and counts the hold.
//
// Release ends a hold; the last one records a fence on each stream its
// holders named. AcquireAsync/ReleaseAsync(s) are the stream-ordered form
// (RMMEP-1's lockAndLaunchAsync, improved): holds are counted per stream, so
// several streams may hold one buffer; ReleaseAsync records the fence and the
// hold turns into a pending release, which counts as locked until an
// EventQuery (made lazily, whenever the manager looks for victims) sees it
// complete. Manager.ReleaseStream(s) releases every hold of a stream at once,
// and SyncAndUnlock(s) is RMMEP-1's synchronous form. LockAndLaunch and
// LockAndLaunchAsync wrap acquiring several buffers around a function.
//
// # Spilling
//
// A spill (Manager.Spill, the soft device limit, an out-of-memory retry of the
// manager's own allocation, or the handler from OOMHandler given to another
// allocator) frees device bytes:
//
//  1. under the lock, gather the candidates: buffers on the device that are
//     neither moving nor locked (pending releases are queried here); the
//     Policy (default LRU: lowest priority, then least recently released)
//     picks victims, which are marked moving;
//  2. for each victim, reserve room in the host tier and a block of the
//     pinned arena (growing it by a slab if none fits). If Options.HostLimit
//     would be passed and a disk tier exists, older host buffers are demoted
//     to disk first (chosen by the same policy, written straight from their
//     pinned blocks); a buffer that still does not fit goes straight to disk;
//  3. the copy stream waits for the victim's fences, and the bytes come out
//     in one DMA into the pinned block (or through the staging ring into the
//     disk file); the host waits for an event recorded after the copy;
//  4. only when every byte has arrived is the device memory given back
//     (Deallocate on the copy stream) and the buffer switched to its new tier.
//
// A failure at any step (a copy, an allocation, a write) leaves the buffer
// where it was, whole; the partial copy is dropped and counted as a failure.
//
// # Invariants
//
//   - A held buffer is never moved. A moving buffer is neither held nor
//     chosen again until its move ends.
//   - Device memory is given back only after every fence of the buffer, in
//     stream order on the copy stream.
//   - Lock order: a transfer holds the mover's lock, then may take
//     Manager.mu briefly; nothing holding Manager.mu takes the mover's lock,
//     allocates device memory or calls out (policies excepted: they must not
//     call the manager). The arena's lock is a leaf: it is taken under
//     Manager.mu at most, and never held across MallocHost or FreeHost.
//   - The handler from OOMHandler runs with no lock of the manager held, as
//     gpumem.OOMHandler requires of its callers too.
//
// # The disk tier
//
// With Options.DiskDir, the manager opens one file there. On Linux it is an
// unnamed file (O_TMPFILE): it never has a directory entry, so a crash leaves
// nothing behind. Where the OS or the file system lacks O_TMPFILE, the manager
// makes a directory there with os.MkdirTemp (mode 0700) and one file in it
// (mode 0600), then unlinks both at once where the OS allows: the open
// descriptor keeps the data. Buffers are extents of that file (an
// internal/extent list, first fit, coalesced; the file is shortened when its
// tail frees). When the file grows, its space is reserved at once (fallocate
// on Linux, where the file system supports it): a full disk fails the spill
// before any byte is copied, with an error matching ErrDiskFull and
// gpumem.ErrOutOfMemory (and the system's own, such as syscall.ENOSPC), and the
// buffer stays where it was; it never fails a write halfway through a copy.
// Close removes anything left.
//
// # Measuring
//
// Stats reports, per tier, the buffers and bytes resident and their peak, and
// per direction (device→host, device→disk, host→disk, host→device,
// disk→device, disk→host) the moves, bytes, host time of the copies through
// their completion, and failures, so that a program on a real GPU can compute
// spill and unspill bandwidth (Transfer.BytesPerSecond); and the pinned bytes
// and slabs of the arena and their peak. History keeps recent allocations,
// frees, spills and unspills as gpumem.HistoryEntry values in the ring every
// allocator keeps (internal/history).
//
// # Files
//
//	manager.go   Options, New, the Manager and its checks
//	buffer.go    the Buffer: identity, tier, priority, waiting on a move
//	alloc.go     Alloc and Free; device memory from the upstream, OOM retries
//	spill.go     the spilling policy: Spill(Context), OOMHandler, victims, demotion
//	move.go      tier moves: MoveTo(Context), spill and unspill between the tiers
//	hold.go      Acquire, Release and their asynchronous forms; locked
//	fence.go     the fences and the event pool
//	launch.go    LockAndLaunch(Async), ReleaseStream, SyncAndUnlock
//	stats.go     Stats, tier figures, transfer counters, History
//	metrics.go   the metrics collector (Collector) for package metrics
//	close.go     Close and TrimHost
//	tier.go      Tier, Info, Callbacks
//	policy.go    Policy and LRU
//	arena.go     the pinned host arena
//	disk.go      the disk file; disk_linux.go: O_TMPFILE and fallocate
//	transfer.go  the mover: copy stream, direct DMA, the staging ring
//	resource.go  DeviceResource
package deferrable
