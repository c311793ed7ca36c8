package caching

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gpumem/gpumem"
)

// expandable is the mapping state of an expandable segment: a virtual range
// reserved once, with physical chunks mapped where blocks are allocated.
// See doc.go for the policy.
type expandable struct {
	chunk uint64
	// n is the number of chunks of the range. handles, mapped and
	// sleeping cover only its first len(mapped) chunks, grown as chunks
	// are mapped (ensure): the range is twice the device (143,771 chunks
	// of 2 MiB on an H200), and tables for all of it cost 2.4 MB and
	// 0.2 ms to allocate per segment; a chunk past them is unmapped.
	n       uint64
	handles []gpumem.MemHandle
	mapped  []bool
	nmapped int
	// span is, for the first chunk of each physical allocation mapped
	// (Options.ExpandableHandleChunks), the number of chunks it covers; 0
	// for the other chunks. handles holds the allocation at each of its
	// chunks. An allocation is unmapped whole (expandable_unmap.go).
	span []uint32
	// top is one past the highest mapped or ghost chunk: scans for mapped chunks
	// stop there instead of running to the end of the range (twice the
	// device: 140,000 chunks of 2 MiB on an H200).
	top uint64
	// sleeping marks the mapped chunks whose physical memory Sleep
	// released (nil until the first Sleep): they stay counted as mapped,
	// with no handle, until Wake maps them back.
	sleeping []bool
	// ghost marks the chunks where a handle that moved within the segment
	// is still mapped, unused (handles[i] names it; ghost.go). They are
	// not mapped for the allocator, and count in top. moved holds, for
	// each handle with ghosts, its active chunk and its ghosts.
	ghost  []bool
	moved  map[gpumem.MemHandle]*ghostSet
	nghost int
	// made counts the ghosts made; fenced is made when ev, recorded on
	// the segment's stream after them, was last recorded (hasEv): the work
	// that may still use a ghost's addresses is ahead of ev (ghost.go).
	made, fenced int64
	ev           gpumem.Event
	hasEv        bool
}

// mappedWithin returns the mapped bytes within free block b.
func (e *expandable) mappedWithin(b *block) uint64 {
	base := b.seg.addr
	first := uint64(b.addr-base) / e.chunk
	last := (uint64(b.addr-base) + b.size - 1) / e.chunk
	var n uint64
	for i := first; i <= last && int(i) < len(e.mapped); i++ {
		if e.mapped[i] {
			n++
		}
	}
	return min(n*e.chunk, b.size)
}

// initExpandable turns expandable segments on, or off with a message where
// the virtual memory API is unavailable. It runs in New, before the device
// is shared: no lock is needed, and the …Locked functions it calls run with
// the same exclusive access.
func (d *device) initExpandable() {
	if err := d.initGranularity(); err != nil {
		d.disableExpandableLocked(err)
		return
	}
	d.expOn = true
	d.handleChunks = uint64(max(1, d.a.opts.ExpandableHandleChunks))
	if m, ok := d.a.b.(gpumem.MappingAliaser); ok {
		if twice, _ := m.MapsHandleTwice(); !twice {
			d.noGhosts = true
		}
	}
}

// initGranularity reads the device's mapping granularity once, for
// expandable and growable segments; an error says the virtual memory API
// is unavailable.
func (d *device) initGranularity() error {
	if d.gran != 0 {
		return nil
	}
	g, err := d.a.b.MemGranularity(d.id, false)
	if err == nil && g == 0 {
		err = fmt.Errorf("zero granularity: %w", gpumem.ErrNotSupported)
	}
	if err != nil {
		return err
	}
	d.gran = g
	return nil
}

// disableExpandableLocked turns expandable segments off on the device,
// saying why through Options.Logf. d.mu must be held.
func (d *device) disableExpandableLocked(err error) {
	d.expOn = false
	d.expReason = fmt.Sprintf("expandable segments are off on device %d: the backend's virtual memory API is unavailable (%v); using regular segments", d.id, err)
	d.a.logf("caching: %s", d.expReason)
}

// chunkForLocked is the mapping unit of pool p's expandable segments,
// rounded up to the device's granularity. d.mu must be held.
func (d *device) chunkForLocked(p *pool) uint64 {
	c := d.a.opts.ExpandableLargeChunk
	if c == 0 {
		c = LargeBuffer
	}
	if p.small {
		c = d.a.opts.ExpandableSmallChunk
		if c == 0 {
			c = SmallBuffer
		}
	}
	return (c + d.gran - 1) / d.gran * d.gran
}

// allocExpandableLocked serves a miss of an expandable pool: it reserves the
// stream's virtual range on first use, or reports that the range is full.
// d.mu must be held.
func (d *device) allocExpandableLocked(p *pool, size, rounded uint64, s gpumem.Stream) (gpumem.Ptr, *gpumem.OutOfMemoryError, error) {
	if p.exp[s.Handle] != nil {
		return 0, d.oomErrorLocked(size, fmt.Errorf("caching: expandable segment's virtual range is full: %w", gpumem.ErrOutOfMemory)), nil
	}
	chunk := d.chunkForLocked(p)
	va := (2*d.total + chunk - 1) / chunk * chunk
	base, err := d.a.b.MemAddressReserve(va, d.gran)
	if err != nil {
		if errors.Is(err, gpumem.ErrNotSupported) {
			d.disableExpandableLocked(err)
			return d.allocSlowLocked(p, size, rounded, s)
		}
		if errors.Is(err, gpumem.ErrOutOfMemory) {
			return 0, d.oomErrorLocked(size, err), nil
		}
		return 0, nil, fmt.Errorf("caching: reserving an expandable segment on device %d: %w", d.id, err)
	}
	n := va / chunk
	seg := &segment{addr: base, size: va, pool: p, stream: s,
		exp: &expandable{chunk: chunk, n: n}}
	b := d.newBlockLocked()
	b.addr, b.size, b.stream, b.pool, b.seg = base, va, s, p, seg
	b.tree = p.treeFor(s.Handle, true)
	seg.head = b
	p.exp[s.Handle] = seg
	d.segments[seg] = struct{}{}
	d.stats.Segment.Add(p.statType(), 1)
	d.cacheLocked(b)
	if b := d.getFreeBlockLocked(p, rounded, s.Handle); b != nil {
		return d.serveExpandableLocked(p, b, size, rounded, s)
	}
	return 0, d.oomErrorLocked(size, nil), nil
}

// serveExpandableLocked serves a request of rounded bytes on s from b, the
// best-fitting free block (out of its tree) of s's expandable segment of
// pool p: at the block of the segment that needs no chunk mapped, if one
// holds it (preferMappedLocked), else from another stream's mapped memory
// if the segment would have to take memory from other segments
// (borrowMappedLocked), else mapping what the block lacks.
// d.mu must be held.
func (d *device) serveExpandableLocked(p *pool, b *block, size, rounded uint64, s gpumem.Stream) (gpumem.Ptr, *gpumem.OutOfMemoryError, error) {
	b = d.preferMappedLocked(b, rounded)
	if c := d.borrowMappedLocked(p, b, rounded, s); c != nil {
		return d.finishAllocLocked(c, size, rounded), nil, nil
	}
	return d.allocInExpandableLocked(b, size, rounded, s)
}

// allocInExpandableLocked splits b, maps the chunks it covers, and hands it out.
// d.mu must be held.
func (d *device) allocInExpandableLocked(b *block, size, rounded uint64, s gpumem.Stream) (gpumem.Ptr, *gpumem.OutOfMemoryError, error) {
	d.splitLocked(b, rounded)
	err := d.mapRangeLocked(b)
	if errors.Is(err, gpumem.ErrOutOfMemory) && len(d.captures) == 0 {
		d.stats.NumAllocRetries++
		_ = d.releaseCachedLocked(true) // released or not, the mapping is tried again
		err = d.mapRangeLocked(b)
	}
	if err != nil {
		d.mergeAndCacheLocked(b)
		if errors.Is(err, gpumem.ErrOutOfMemory) {
			return 0, d.oomErrorLocked(size, err), nil
		}
		return 0, nil, err
	}
	return d.markAllocatedLocked(b, size), nil, nil
}

// mapRangeLocked maps every unmapped chunk under block b (out of any tree).
// d.mu must be held.
func (d *device) mapRangeLocked(b *block) error {
	seg := b.seg
	e := seg.exp
	first := uint64(b.addr-seg.addr) / e.chunk
	last := (uint64(b.addr-seg.addr) + b.size - 1) / e.chunk
	e.ensure(last + 1)
	ghosts := d.ghostsAllowed(seg)
	// The ghosts this mapping makes lie outside b: only those made before
	// it are unmapped here, and only those need to be waited for.
	before := e.made
	var free []bool // the segment's free mapped chunks, once needed
	freeTable := func() []bool {
		if free == nil {
			free = d.freeChunks(seg)
		}
		return free
	}
	var need uint64
	for i := first; i <= last; i++ {
		if e.mapped[i] {
			continue
		}
		if ghosts && e.ghost[i] {
			if d.reviveLocked(seg, i, freeTable()) {
				continue
			}
		}
		need += e.chunk
	}
	if need == 0 {
		return nil
	}
	reserved := uint64(d.stats.ReservedBytes[gpumem.StatAll].Current)
	if d.capped && reserved+need > d.limit {
		d.unmapForGrowthLocked(reserved + need - d.limit)
		reserved = uint64(d.stats.ReservedBytes[gpumem.StatAll].Current)
		if reserved+need > d.limit {
			return fmt.Errorf("caching: mapping %s more would exceed the memory fraction's cap of %s: %w",
				gpumem.FormatBytes(need), gpumem.FormatBytes(d.limit), gpumem.ErrOutOfMemory)
		}
		free = nil // the unmap may have taken free chunks
	}
	// Chunks unmapped to make room keep their physical memory for this
	// mapping: one unmap and one map move a chunk, instead of also a
	// release and a create. What is not reused is released at the end.
	d.keepChunk, d.kept = e.chunk, d.kept[:0]
	defer d.releaseKeptLocked()
	// Free chunks of this segment move first, leaving ghosts: no unmap and
	// no synchronization. What growth past the high-water mark needs
	// beyond them is released or unmapped elsewhere, and kept for here.
	var fresh []uint64 // chunks mapped here, granted access at the end
	waited := false
	// place readies unmapped chunk i for a handle: a ghost of another
	// handle is unmapped, after the work that may still use it.
	place := func(i uint64) error {
		if !e.isGhost(i) {
			return nil
		}
		if !waited {
			d.awaitGhostsLocked(seg, before)
			waited = true
		}
		return d.unmapGhostLocked(seg, i)
	}
	defer d.fenceGhostsLocked(seg)
	// fail grants what was mapped before err (the block goes back to the
	// cache with it) and returns err.
	fail := func(err error) error { return errors.Join(err, d.grantRunsLocked(seg, fresh)) }
	if peak := d.expandableBoundLocked(b.size); d.a.opts.ReleaseBeforeGrow && reserved+need > peak {
		over := reserved + need - peak
		if ghosts {
			free := freeTable()
			var donors []uint64
			for j := uint64(0); j < uint64(len(free)) && uint64(len(donors))*e.chunk < over; j++ {
				if free[j] {
					donors = append(donors, j)
				}
			}
			over -= min(over, uint64(len(donors))*e.chunk)
			var err error
			if fresh, err = d.moveDonorsLocked(seg, first, last, donors, place); err != nil {
				return fail(err)
			}
		}
		if over > 0 {
			d.releaseForGrowthLocked(over)
		}
	}
	// What is still unmapped takes memory kept above, a chunk at a time,
	// then new allocations of up to handleChunks chunks each.
	for i := first; i <= last; {
		if e.mapped[i] {
			i++
			continue
		}
		n := uint64(1)
		if len(d.kept) == 0 {
			for n < d.handleChunks && i+n <= last && !e.mapped[i+n] {
				n++
			}
		}
		for k := i; k < i+n; k++ {
			if err := place(k); err != nil {
				return fail(err)
			}
		}
		if err := d.mapHandleLocked(seg, i, n); err != nil {
			return fail(err)
		}
		for k := i; k < i+n; k++ {
			fresh = append(fresh, k)
		}
		i += n
	}
	return d.grantRunsLocked(seg, fresh)
}

// mapHandleLocked maps at the n unmapped chunks of seg from i one physical
// allocation: for one chunk, a handle kept for the mapping underway if
// there is one, else a new allocation of n chunks; and counts it. d.mu must
// be held.
func (d *device) mapHandleLocked(seg *segment, i, n uint64) error {
	e := seg.exp
	addr, size := seg.addr.Add(i*e.chunk), n*e.chunk
	var h gpumem.MemHandle
	var err error
	if k := len(d.kept); k > 0 && n == 1 {
		h, d.kept = d.kept[k-1], d.kept[:k-1]
		err = d.mapLocked(addr, size, h)
	} else {
		h, err = d.mapNewLocked(addr, size)
	}
	if err != nil {
		return fmt.Errorf("caching: device %d: %w", d.id, err)
	}
	for k := i; k < i+n; k++ {
		e.handles[k], e.mapped[k] = h, true
	}
	e.span[i] = uint32(n)
	e.nmapped += int(n)
	e.top = max(e.top, i+n)
	d.addReservedLocked(seg.pool.statType(), int64(size))
	d.stats.NumDeviceAlloc++
	d.recordLocked(gpumem.ActionSegmentMap, seg.stream.Handle, addr, size)
	return nil
}

// moveDonorsLocked moves the free chunks donors of seg to the unmapped
// chunks of [first, last], in order, leaving ghosts (moveLeavingGhostLocked),
// and returns the chunks mapped. Should the backend refuse to map a handle
// twice (an invalid value or not supported), ghosts are off from then on
// and the donors left are unmapped, their handles kept for the mapping
// underway; another error is returned. place readies a chunk.
// d.mu must be held.
func (d *device) moveDonorsLocked(seg *segment, first, last uint64, donors []uint64, place func(uint64) error) ([]uint64, error) {
	e := seg.exp
	var moved []uint64
	for i := first; i <= last && len(donors) > 0; i++ {
		if e.mapped[i] {
			continue
		}
		if err := place(i); err != nil {
			return moved, err
		}
		err := d.moveLeavingGhostLocked(seg, donors[0], i)
		if err == nil {
			moved = append(moved, i)
			donors = donors[1:]
			continue
		}
		if !errors.Is(err, gpumem.ErrInvalidValue) && !errors.Is(err, gpumem.ErrNotSupported) {
			return moved, fmt.Errorf("caching: mapping %#x: %w", uintptr(seg.addr.Add(i*e.chunk)), err)
		}
		// A refusal of the second mapping itself.
		d.noGhosts = true
		d.a.logf("caching: mapping memory at a second address failed (%v); moves unmap from now on", err)
		_ = d.syncAllLocked() // the donors' last users may still be queued (a failure here is a failure's handling)
		eachRun(donors, func(_ int, first, n uint64) bool {
			d.unmapRunLocked(seg, first, first+n)
			return true
		})
		break
	}
	return moved, nil
}

// grantRunsLocked grants access to the chunks of seg mapped by a mapping,
// one call per run of consecutive chunks. The chunks moved as ghosts and
// those mapped after them come as one list, sorted here so that a run
// split between the two is still one grant. On an error the chunks not
// granted are unmapped and their memory released. d.mu must be held.
func (d *device) grantRunsLocked(seg *segment, chunks []uint64) error {
	slices.Sort(chunks)
	e := seg.exp
	var err error
	eachRun(chunks, func(k int, first, n uint64) bool {
		addr := seg.addr.Add(first * e.chunk)
		if gerr := d.a.b.MemSetAccess(addr, n*e.chunk, d.id, gpumem.AccessReadWrite); gerr != nil {
			if e.nghost > 0 {
				_ = d.syncAllLocked() // the unmaps below may take ghosts of moved chunks (a grant already failed)
			}
			for _, j := range chunks[k:] {
				if e.span[j] > 0 { // an allocation's first chunk: its others follow
					d.unmapGroupLocked(seg, j, false)
				}
			}
			err = fmt.Errorf("caching: granting access to %#x: %w", uintptr(addr), gerr)
			return false
		}
		return true
	})
	return err
}

// eachRun calls fn for each run of consecutive chunks of the ascending
// list chunks, with the run's index in the list, its first chunk and its
// length, until fn returns false.
func eachRun(chunks []uint64, fn func(k int, first, n uint64) bool) {
	for k := 0; k < len(chunks); {
		n := 1
		for k+n < len(chunks) && chunks[k+n] == chunks[k]+uint64(n) {
			n++
		}
		if !fn(k, chunks[k], uint64(n)) {
			return
		}
		k += n
	}
}

// releaseEmptyExpandableLocked frees the virtual ranges of expandable segments
// with nothing mapped. d.mu must be held.
func (d *device) releaseEmptyExpandableLocked() {
	for seg := range d.segments {
		if seg.exp == nil || seg.exp.nmapped > 0 || !seg.head.inTree || seg.head.next != nil {
			continue
		}
		if d.a.b.MemAddressFree(seg.addr, seg.size) != nil {
			continue
		}
		d.takeFromTreeLocked(seg.head.tree, seg.head)
		d.dropGhostEventLocked(seg)
		delete(seg.pool.exp, seg.stream.Handle)
		delete(d.segments, seg)
		d.stats.Segment.Add(seg.pool.statType(), -1)
		d.recycleLocked(seg.head)
	}
}

// ExpandableActive reports whether expandable segments are in use on every
// device, and if not, why.
func (a *Allocator) ExpandableActive() (bool, string) {
	if a == nil {
		return false, ""
	}
	if !a.opts.ExpandableSegments {
		return false, "expandable segments are not enabled (expandable_segments:True)"
	}
	for _, d := range a.devs {
		d.mu.Lock()
		on, why := d.expOn, d.expReason
		d.mu.Unlock()
		if !on {
			return false, why
		}
	}
	return true, "expandable segments are active"
}

// mappedRun returns an offset within free block b at which n bytes lie
// wholly on mapped chunks, if there is one, in the first mapped run (within
// b) that is long enough: at the run's start if the run starts the block,
// else at its end. Either way what the request leaves of the run stays
// joined to the rest of the block, one free block, rather than a mapped
// sliver cut off on the far side of the request. (A run in the middle of the
// block leaves a piece on each side whichever end it takes; it takes the
// end.)
func (e *expandable) mappedRun(b *block, n uint64) (at uint64, ok bool) {
	e.eachMappedRun(b, func(off, size uint64) bool {
		if size >= n {
			at, ok = off+size-n, true
			if off == 0 {
				at = 0
			}
		}
		return !ok
	})
	return at, ok
}

// eachMappedRun calls fn with the offset in free block b and the length of
// each maximal run of b's bytes that lie on mapped chunks, in address
// order, until fn returns false.
func (e *expandable) eachMappedRun(b *block, fn func(off, n uint64) bool) {
	base := uint64(b.addr - b.seg.addr)
	end := min(base+b.size, e.top*e.chunk)
	for i := base / e.chunk; i*e.chunk < end; {
		if !e.mapped[i] {
			i++
			continue
		}
		start := max(base, i*e.chunk)
		for i*e.chunk < end && e.mapped[i] {
			i++
		}
		if !fn(start-base, min(end, i*e.chunk)-start) {
			return
		}
	}
}

// preferMappedLocked swaps b, the best-fitting free block of an expandable
// pool (taken out of its tree), for the smallest free block of its segment
// (b included) that holds rounded bytes on chunks already mapped, if b's
// first rounded bytes would need chunks mapped and such a block exists; the
// request goes in the block's first long enough mapped run, where mappedRun
// says, the block split in front of it. In an
// expandable segment what costs is physical memory and the calls that map
// it, not address space: mapped memory serves the request with no device
// call and no growth of reserved memory, where the best fit by size would
// map chunks (a create or a move, and an access grant of tens of
// microseconds each) and leave mapped memory idle elsewhere. The search
// runs only on this path, which would otherwise call the device; with
// ExpandableBestFit it does not run, and b stays.
// d.mu must be held.
func (d *device) preferMappedLocked(b *block, rounded uint64) *block {
	e := b.seg.exp
	if d.a.opts.ExpandableBestFit || e.mappedPrefix(b, rounded) {
		return b
	}
	// b is the smallest fit: if it holds a mapped run, it is the answer;
	// else the first block of the tree, in size order from rounded, that
	// does. The search visits only free blocks that fit, and the chunks
	// below the highest mapped one: cheap while memory grows (few free
	// blocks), and never more than the tree and the mapped range.
	best, bestOff := b, uint64(0)
	off, ok := e.mappedRun(b, rounded)
	if ok {
		bestOff = off
	} else {
		best = nil
		b.tree.ascendFrom(rounded, func(c *block) bool {
			if c.seg.exp == nil {
				return true
			}
			if off, ok := c.seg.exp.mappedRun(c, rounded); ok {
				best, bestOff = c, off
				return false
			}
			return true
		})
	}
	if best == nil {
		best, bestOff = d.cheapestWindowLocked(b, rounded)
		if best == nil {
			return b
		}
	}
	if best != b {
		d.cacheLocked(b)
		d.takeFromTreeLocked(best.tree, best)
	}
	if bestOff > 0 {
		d.splitFrontLocked(best, bestOff)
	}
	return best
}

// splitFrontLocked cuts the first off bytes of free block b (out of any tree)
// into a free block of their own, cached before it. d.mu must be held.
func (d *device) splitFrontLocked(b *block, off uint64) {
	f := d.newBlockLocked()
	f.addr, f.size = b.addr, off
	f.stream, f.pool, f.tree, f.seg = b.stream, b.pool, b.tree, b.seg
	f.prev, f.next = b.prev, b
	if b.prev != nil {
		b.prev.next = f
	} else {
		b.seg.head = f
	}
	b.prev = f
	b.addr = b.addr.Add(off)
	b.size -= off
	d.cacheLocked(f)
}

// mappedPrefix reports whether the chunks under the first n bytes of free
// block b are all mapped.
func (e *expandable) mappedPrefix(b *block, n uint64) bool {
	off := uint64(b.addr - b.seg.addr)
	last := (off + n - 1) / e.chunk
	if last >= uint64(len(e.mapped)) {
		return false
	}
	for i := off / e.chunk; i <= last; i++ {
		if !e.mapped[i] {
			return false
		}
	}
	return true
}

// ensure grows the chunk tables to cover at least the first k chunks
// (doubling, up to the range).
func (e *expandable) ensure(k uint64) {
	have := uint64(len(e.mapped))
	if k <= have {
		return
	}
	size := min(max(k, 2*have, 64), e.n)
	e.handles, e.mapped, e.ghost = grown(e.handles, size), grown(e.mapped, size), grown(e.ghost, size)
	e.span = grown(e.span, size)
	if e.sleeping != nil {
		e.sleeping = grown(e.sleeping, size)
	}
}

// grown returns s's elements followed by zero values, size in all.
func grown[T any](s []T, size uint64) []T {
	t := make([]T, size)
	copy(t, s)
	return t
}
