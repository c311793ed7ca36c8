// Package managed is the caching unified-memory allocator: one allocator for
// host and device requests when unified (managed) memory is enabled, after
// the RFC "Unified Memory for PyTorch" (CachingManagedAllocator). Managed
// memory has one address valid on the host and on every device; the driver
// moves its pages where they are used, guided by advice (cuMemAdvise /
// hipMemAdvise) and prefetches (cuMemPrefetchAsync / hipMemPrefetchAsync).
//
// Other files say "See doc.go for an overview."
//
// # Enabling
//
// Unified memory is off by default. Enable(true) or
// GPUMEM_ENABLE_UNIFIED_MEMORY=1 turns it on; New fails with ErrNotEnabled
// otherwise, unless Options.Force is set (as `gpumem replay --allocator
// managed` does, the user having named the allocator).
//
// The package registers the allocator as "managed" (gpumem.RegisterAllocator):
// gpumem.NewAllocator builds it from a GPUMEM_ALLOC_CONF string (see
// OptionsFromConf). Naming it (backend:managed, or gpumem.NewNamedAllocator)
// is the opt-in and forces it on; a program that runs every registered
// allocator finds it off, with the reason, unless unified memory is enabled.
//
// # Glossary
//
//	pool        a caching.Allocator (the PyTorch caching rules: small and
//	            large pools per device and stream, best fit, splitting,
//	            stream-ordered reuse) whose Upstream is this package's. There
//	            are two: the device-preferred pool and the host-preferred pool.
//	segment     one block of managed memory a pool asked its Upstream for.
//	chunk       with Options.SegmentSize, one cuMemAllocManaged of that size
//	            from which segments are carved in 2 MiB units.
//	hints       the advice a segment gets when it is created (the seed's):
//	            device pool: PreferredLocation = the device, AccessedBy unset;
//	            host pool: PreferredLocation = host, AccessedBy = the device
//	            the request's stream belongs to (the current device).
//	buffer      a block handed out, with its Location (*Buffer).
//	move        To without Copy: new advice and a prefetch; same address.
//	guard       the cap on the managed bytes the allocator holds.
//
// # Locks
//
// Each pool has its per-device mutexes (see the caching package). Live
// buffers are kept in 64 shards by address, each with its own mutex, so that
// no lock is shared across devices on the hot path; a buffer has its own
// mutex for its placement. Residency counters and the guard's count are
// atomics. An Upstream's mutex guards its chunk tables and is taken only
// when a pool grows or shrinks. Order: buffer, then shard; the pools' locks
// are never held while this package takes its own.
//
// # Allocation path (Allocate, Alloc)
//
//  1. Choose the pool: a device location takes the device-preferred pool of
//     that device (the stream must belong to it); the host takes the
//     host-preferred pool of the stream's device.
//  2. The pool's cache-hit path: no backend call (see the caching package).
//  3. On a miss the pool asks Upstream.Alloc for a segment. The guard adds
//     the size to the allocator's managed bytes and refuses (an
//     *gpumem.OutOfMemoryError whose Hint names MaxDeviceFraction and
//     AllowOversubscription) beyond MaxDeviceFraction (default 0.5) of the
//     smallest device's memory. Then cuMemAllocManaged (or a carve from a
//     chunk), then the hints; a failed hint returns the memory.
//  4. The pool's out-of-memory path frees cached segments and retries, then
//     asks the allocator's OOM handler through oomhooks.Retry (at most 8
//     attempts, the bound every allocator shares); the error it finally
//     returns is rewritten as the managed allocator's.
//  5. Register the buffer in its shard and count its bytes at its location.
//
// Hints are set per segment, not per allocation: a cached block keeps the
// hints of its pool. A moved buffer gets its pool's hints back when it is
// freed, so that the invariant holds for whatever the pool hands out next.
//
// # Moves and copies (Buffer.To)
//
// A move of a managed buffer is the seed's special case of Tensor.to: the
// buffer keeps its address and memory; PreferredLocation becomes the new
// location, a prefetch is queued on the stream, and a move to the host
// synchronizes the stream unless NonBlocking. Device-to-device moves
// re-advise for the new device. Copy forces a copy (copy=True); CopyTo and
// Manage follow Options.MoveOnCopy (enabled_uvm_move_on_copy). Manage and
// Unmanage copy ordinary memory into managed memory and back.
//
// A move sets no AccessedBy, towards the host either: an accessed-by device
// the buffer has (its host pool's hint, or one left by an earlier
// placement) is unset, and readers added with AddReader stay. The seed's
// host hints (PreferredLocation host, AccessedBy the current device) are
// those of allocations made in the host pool, which keeps them; the seed
// does not prescribe them for moves. AccessedBy maps the pages into the
// device's page tables wherever they live; after a move to the host that
// means zero-copy remote access from the device, which a move to the host
// (to free device memory, or to hand the data to the CPU) does not ask for,
// and it costs about a quarter of the move's bandwidth. On an NVIDIA
// H100/H200 (driver 580) a bare device-to-host prefetch of 1 GiB ran at
// 10.5 GB/s; with PreferredLocation host advised first also 10.5; with
// AccessedBy the device advised first 7.7, and advised after the migration
// 7.1. A program that wants the device to read host-resident data in place
// says so with AddReader. A host-pool buffer moved to a device and back
// thus lacks its pool's AccessedBy; Free gives it back with the rest of the
// pool's hints.
//
// Order of a move: towards a device the prefetch is queued first and the
// advice follows while the copy engine migrates (cuMemAdvise is a host call,
// legal while a prefetch of the range is in flight, and cuMemPrefetchAsync
// migrates to its destination whatever the advice); towards the host the
// advice goes first (a preferred location given to pages still on the
// device does not slow their migration, and a failed advice leaves them
// where they were). Only advice that differs from the buffer's current
// advice is sent. On an NVIDIA H200 (driver 580.159.04) a 1 GiB
// host-to-device move took 21.8 ms, of which 10.3 ms in the prefetch call
// and 11.5 ms in the advice: 49.3 GB/s, the same as a bare prefetch
// (49.5 GB/s) and 0.89 of a pinned copy (55.5 GB/s); advice first gave
// 34.5 GB/s. Device to host, when moves to the host still advised
// AccessedBy: 12.8 GB/s (advice first 13.0, prefetch first 11.7, bare
// prefetch 17.7; pinned 55.4); the device-to-host prefetch varies that much
// between runs, so To(host) is compared with a bare prefetch of the same
// buffer in interleaved rounds (TestGPUManagedMoveBandwidth).
//
// Advice applies to whole pages: buffers that share a page (small blocks)
// share its advice, and the last move wins for the shared page.
//
// # Segment size
//
// Options.SegmentSize defaults to DefaultSegmentSize, 20 MiB: small
// segments (2 MiB) are carved from 20 MiB managed allocations. Measured by
// TestGPUManagedBlockSizes on an NVIDIA H200 (prefetch of a whole
// device-resident segment, GB/s):
//
//	segment   alloc+free µs   device->host   host->device
//	2 MiB     20.7            10.4           27.0
//	4 MiB     27.9            16.7           39.4
//	8 MiB     14.0            18.4           44.8
//	20 MiB    14.2            18.4           48.5
//	64 MiB    13.9            18.6           50.3
//	256 MiB   14.8            18.3           51.0
//	1 GiB     15.2            17.3           50.7
//
// 2 MiB ranges prefetch at about half the speed of large ones (an earlier
// run: 13-28 GB/s); from 20 MiB up they are within 5% of the 1 GiB rate,
// so 20 MiB is the smallest size at full speed. Allocation latency does not
// depend on the size.
//
// # Statistics
//
// Stats of a device is the sum of its two pools' (gpumem.MemoryStats.Add:
// peaks are summed, an upper bound of the combined peak); PoolStats gives
// each. History and Snapshot merge both pools' histories into one timeline
// (internal/history).
//
// # Residency
//
// Residency reports the bytes of live buffers per location as the allocator
// believes them from its own advice and prefetches; VerifyResidency checks
// them against the driver's range attributes (preferred location, last
// prefetch location) over each buffer's whole pages.
//
// # HIP
//
// The same API runs on HIP. Options.CoarseGrain applies hipMemAdvise's
// coarse-grain advice to every segment (HIP only). Where a device cannot
// migrate pages (HIP with XNACK off, which the backend reads from pageable
// memory access through gpumem.ManagedMigration; CUDA with concurrent
// managed access 0 on some platforms), managed memory stays in host memory and the
// device reaches it over the bus: To then only updates the advice (no
// prefetch is queued), a move to the host still synchronizes, and the
// residency figures say host for every buffer. CanMigrate tells which case
// holds.
//
// # Invariants
//
//   - Every cached block carries its pool's initial hints (unless restoring
//     them failed once; then every block handed out is advised again).
//   - The guard's count equals the managed bytes held from the backend.
//   - Residency's total equals the bytes of live buffers.
//   - A buffer's address never changes; only Free, Deallocate and Close end it.
package managed
