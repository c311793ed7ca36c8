// Package adaptor holds allocators that wrap another allocator, after
// RMM's *_resource_adaptor: each takes any gpumem.Allocator (its upstream)
// and is one itself, so that they stack in any order over caching,
// asyncpool, managed or each other.
//
// # Roles
//
//	Limit       caps the bytes asked for through it per device (in bytes,
//	            or a fraction of each device's memory); past the cap an
//	            allocation fails with an *gpumem.OutOfMemoryError before the
//	            upstream is asked.
//	Statistics  keeps its own gpumem.MemoryStats per device of the traffic
//	            through it: one component's use of a shared allocator.
//	Recorder    writes every allocation and free as the trace text that
//	            package trace reads and `gpumem replay` replays through every
//	            allocator.
//	OnOOM       calls a handler when the upstream runs out of memory and
//	            retries while it asks, at most oomhooks.MaxAttempts times.
//
// Every adaptor is a gpumem.Adaptor: Upstream returns the allocator it
// wraps, and gpumem.HistoryOf, SnapshotOf and SetupOf walk through it to
// the abilities of the allocators beneath.
//
// # The allocation path
//
//  1. A closed adaptor fails with ErrClosed; a zero size fails with
//     ErrInvalidValue, the upstream not asked.
//  2. Limit reserves the bytes against the device's cap under its lock
//     (asking the OOM handler, without the lock, when they do not fit).
//  3. The upstream's Allocate runs with no lock of the adaptor held, so
//     allocations through one adaptor proceed in parallel, and the
//     upstream may call its OOM handler, which may free through the
//     adaptor.
//  4. OnOOM retries on exhaustion while its handler asks.
//  5. Under the adaptor's lock, the pointer is entered in the adaptor's
//     table of live allocations (Limit, Statistics, Recorder), counted
//     (Statistics), and written (Recorder). A failed upstream call undoes
//     step 2.
//
// # The free path
//
//  1. Limit, Statistics and Recorder look the pointer up in their table: a
//     pointer they did not hand out, or one already freed, fails with
//     ErrInvalidValue and the upstream is not called, so a wrong free has
//     no side effect beneath. OnOOM keeps no table and passes the pointer
//     on, and the upstream judges it.
//  2. The upstream's Deallocate runs with the stream given: the stream on
//     which the last use is ordered, the allocation's or another.
//  3. Only then are the bytes released from the cap or the statistics;
//     the Recorder holds its lock across the upstream's Deallocate so that
//     the free is written before the memory can be handed out again.
//
// # Invariants
//
//   - An adaptor never reorders stream work: stream ordering, cross-stream
//     use (RecordStream) and the device of an allocation (the stream's) are
//     the upstream's.
//   - Closing an adaptor closes its upstream, which releases everything
//     allocated through any adaptor over it: the outermost adaptor owns
//     the chain. A second Close returns nil; after Close every call fails
//     with ErrClosed but Close and Stats (zero).
//   - The OOM handler is asked at most oomhooks.MaxAttempts times per
//     allocation by each component that runs it; OnOOM runs its own, and
//     the upstream's should be left unset beneath it.
//   - Every adaptor is safe for concurrent use.
package adaptor
