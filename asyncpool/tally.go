package asyncpool

import "github.com/gpumem/gpumem"

// tally is a device's statistics in the compact form that the
// hot path updates: two adjacent rows of counters per call (the aggregate
// and the allocation's size class) instead of six gpumem.StatArrays. In
// this allocator one allocation is one block and one pool segment, so the
// allocation, allocated-bytes and requested-bytes figures are one set of
// counters, and the active and segment figures are those plus what is
// pending release. expand writes them in MemoryStats' shape.
type tally struct {
	devAllocs int64       // MallocFromPoolAsync calls that succeeded
	devFrees  int64       // frees made on the device
	rows      [3]tallyRow // indexed by gpumem.StatAll, StatSmall, StatLarge
	retries   int64       // allocations retried after a trim
	ooms      int64       // allocations that failed for lack of memory
}

type tallyRow struct {
	live, liveBytes         int64 // held by users
	frees, freeBytes        int64 // users' frees
	gone, goneBytes         int64 // released to the pool (or never existed)
	peakLive, peakLiveBytes int64
	peakAct, peakActBytes   int64 // peaks of live + pending
}

// What the hot path need not count, since it follows from the rest: every
// allocation is live or freed (allocations = live + frees), and every free
// is pending release or released (pending = frees - gone).

func (r *tallyRow) allocs() (n, bytes int64) { return r.live + r.frees, r.liveBytes + r.freeBytes }
func (r *tallyRow) pend() (n, bytes int64)   { return r.frees - r.gone, r.freeBytes - r.goneBytes }

func kind(size uint64) int {
	if size <= 1<<20 {
		return gpumem.StatSmall
	}
	return gpumem.StatLarge
}

// alloc counts a new allocation of size bytes.
func (t *tally) alloc(size uint64) {
	t.devAllocs++
	n := int64(size)
	for _, r := range [2]*tallyRow{&t.rows[gpumem.StatAll], &t.rows[kind(size)]} {
		r.live++
		r.liveBytes += n
		r.peakLive = max(r.peakLive, r.live)
		r.peakLiveBytes = max(r.peakLiveBytes, r.liveBytes)
		pend, pendBytes := r.pend()
		r.peakAct = max(r.peakAct, r.live+pend)
		r.peakActBytes = max(r.peakActBytes, r.liveBytes+pendBytes)
	}
}

// free counts a user's free of size bytes: pending release (freed on the
// free stream, or held for a graph), or released now (freed on its own
// stream: the pool may reuse it in stream order at once).
func (t *tally) free(size uint64, pending bool) { t.freeN(size, pending, 1) }

// unfree undoes free after the free failed.
func (t *tally) unfree(size uint64, pending bool) { t.freeN(size, pending, -1) }

func (t *tally) freeN(size uint64, pending bool, c int64) {
	n := int64(size) * c
	if !pending {
		t.devFrees += c
	}
	for _, r := range [2]*tallyRow{&t.rows[gpumem.StatAll], &t.rows[kind(size)]} {
		r.live -= c
		r.liveBytes -= n
		r.frees += c
		r.freeBytes += n
		if !pending {
			r.gone += c
			r.goneBytes += n
		}
	}
}

// released counts bytes pending release as released.
func (t *tally) released(size uint64) {
	n := int64(size)
	for _, r := range [2]*tallyRow{&t.rows[gpumem.StatAll], &t.rows[kind(size)]} {
		r.gone++
		r.goneBytes += n
	}
}

// resetPeaks sets every peak to its current value.
func (t *tally) resetPeaks() {
	for i := range t.rows {
		r := &t.rows[i]
		r.peakLive, r.peakLiveBytes = r.live, r.liveBytes
		pend, pendBytes := r.pend()
		r.peakAct, r.peakActBytes = r.live+pend, r.liveBytes+pendBytes
	}
}

// expand writes the tally into st.
func (t *tally) expand(st *gpumem.MemoryStats) {
	for i := range t.rows {
		r := &t.rows[i]
		allocs, allocBytes := r.allocs()
		pend, pendBytes := r.pend()
		st.Allocation[i] = gpumem.Stat{Current: r.live, Peak: r.peakLive, Allocated: allocs, Freed: r.frees}
		st.AllocatedBytes[i] = gpumem.Stat{Current: r.liveBytes, Peak: r.peakLiveBytes, Allocated: allocBytes, Freed: r.freeBytes}
		st.RequestedBytes[i] = st.AllocatedBytes[i]
		st.Active[i] = gpumem.Stat{Current: r.live + pend, Peak: r.peakAct, Allocated: allocs, Freed: r.gone}
		st.Segment[i] = st.Active[i]
		st.ActiveBytes[i] = gpumem.Stat{Current: r.liveBytes + pendBytes, Peak: r.peakActBytes, Allocated: allocBytes, Freed: r.goneBytes}
	}
	_, st.PendingReleaseBytes = t.rows[gpumem.StatAll].pend()
	st.NumDeviceAlloc = t.devAllocs
	st.NumDeviceFree = t.devFrees
	st.NumAllocRetries = t.retries
	st.NumOOMs = t.ooms
}
