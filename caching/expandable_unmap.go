package caching

import (
	"sort"

	"github.com/gpumem/gpumem"
)

// Unmapping the physical memory of expandable segments: an allocation
// (Options.ExpandableHandleChunks) at a time or a run of them in one call,
// for release before growth, the memory fraction's cap and EmptyCache.
// See doc.go for the policy.

// unmapGroupLocked unmaps the physical allocation whose first chunk is i
// and releases it, or, with keep set, a single chunk and a mapping of the
// same chunk size underway, keeps it in d.kept for that mapping. It returns
// the chunks unmapped (none if the unmap failed). d.mu must be held.
func (d *device) unmapGroupLocked(seg *segment, i uint64, keep bool) uint64 {
	e := seg.exp
	n := uint64(e.span[i])
	if d.a.b.MemUnmap(seg.addr.Add(i*e.chunk), n*e.chunk) != nil {
		return 0
	}
	d.forgetGroupLocked(seg, i, keep)
	return n
}

// forgetGroupLocked is the bookkeeping of unmapping the physical allocation
// whose first chunk is i, after the unmap: its memory is kept for the
// mapping underway (keep, a single chunk) or released, and it is counted
// and recorded. d.mu must be held.
func (d *device) forgetGroupLocked(seg *segment, i uint64, keep bool) {
	e := seg.exp
	n := uint64(e.span[i])
	addr, size := seg.addr.Add(i*e.chunk), n*e.chunk
	h := e.handles[i]
	if err := d.unmapGhostsOfLocked(seg, h); err != nil {
		d.a.logf("%v", err)
	}
	if keep && n == 1 && d.keepChunk == e.chunk {
		d.kept = append(d.kept, h)
	} else if err := d.releaseHandleLocked(h, size); err != nil {
		// Kept for EmptyCache and Close to try again; the range stays usable.
		d.a.logf("caching: at %#x: %v", uintptr(addr), err)
	}
	for k := i; k < i+n; k++ {
		e.handles[k], e.mapped[k] = gpumem.MemHandle{}, false
	}
	e.span[i] = 0
	e.nmapped -= int(n)
	e.lower()
	d.stats.ReservedBytes.Add(seg.pool.statType(), -int64(size))
	d.stats.NumDeviceFree++
	d.recordLocked(gpumem.ActionSegmentUnmap, seg.stream.Handle, addr, size)
}

// unmapRunLocked unmaps the mapped chunks [i, j) of seg, whole physical
// allocations from i, in one call (an unmap costs tens of microseconds on a
// GPU whatever its size), keeping single chunks for a mapping underway as
// unmapGroupLocked does; if the call fails, allocation by allocation. It
// returns the chunks unmapped. d.mu must be held.
func (d *device) unmapRunLocked(seg *segment, i, j uint64) uint64 {
	e := seg.exp
	whole := i+e.spanAt(i) != j && d.a.b.MemUnmap(seg.addr.Add(i*e.chunk), (j-i)*e.chunk) == nil
	var n uint64
	for k := i; k < j; {
		next := k + e.spanAt(k)
		if whole {
			d.forgetGroupLocked(seg, k, true)
			n += next - k
		} else {
			n += d.unmapGroupLocked(seg, k, true)
		}
		k = next
	}
	return n
}

// releaseKeptLocked releases the physical memory that a mapping kept but did not
// reuse, and ends the mapping's keeping. d.mu must be held.
func (d *device) releaseKeptLocked() {
	for _, h := range d.kept {
		if err := d.releaseHandleLocked(h, d.keepChunk); err != nil {
			d.a.logf("%v", err)
		}
	}
	d.kept, d.keepChunk = d.kept[:0], 0
}

// unmapFreeLocked unmaps up to limit bytes of physical allocations lying
// wholly inside free blocks of seg (a little more where an allocation of
// several chunks passes the limit). The caller has synchronized the device.
// d.mu must be held.
func (d *device) unmapFreeLocked(seg *segment, limit uint64) uint64 {
	e := seg.exp
	var freed uint64
	for b := seg.head; b != nil && freed < limit; b = b.next {
		if !b.inTree {
			continue
		}
		first, end := e.chunksWithin(seg, b)
		for i := first; i < end && freed < limit; {
			n := e.wholeAt(i, end)
			if n == 0 {
				i++
				continue
			}
			j := i + n // a run of whole allocations, no longer than the limit needs
			for j < end && freed+(j-i)*e.chunk < limit {
				k := e.wholeAt(j, end)
				if k == 0 {
					break
				}
				j += k
			}
			freed += d.unmapRunLocked(seg, i, j) * e.chunk
			i = j
		}
	}
	return freed
}

// wholeAt returns the length of the physical allocation that starts at
// chunk i and ends at or before chunk end; 0 where none does (i unmapped,
// or within an allocation, or its allocation passes end).
func (e *expandable) wholeAt(i, end uint64) uint64 {
	if !e.mapped[i] {
		return 0
	}
	if n := uint64(e.span[i]); n > 0 && i+n <= end {
		return n
	}
	return 0
}

// unmapForGrowthLocked unmaps free chunks of the device's expandable segments
// until need bytes are unmapped. d.mu must be held.
func (d *device) unmapForGrowthLocked(need uint64) {
	var cands []*segment
	for seg := range d.segments {
		if seg.exp != nil && seg.exp.nmapped > 0 {
			cands = append(cands, seg)
		}
	}
	if len(cands) == 0 {
		return
	}
	// Segments of the chunk size being mapped first, so that the memory
	// they give up is moved rather than released and created again for
	// another pool's chunk size; then in address order, so that a run is
	// repeatable (the segments are a map's keys).
	sort.Slice(cands, func(i, j int) bool {
		si, sj := cands[i].exp.chunk == d.keepChunk, cands[j].exp.chunk == d.keepChunk
		if si != sj {
			return si
		}
		return cands[i].addr < cands[j].addr
	})
	synced := false
	var freed uint64
	for _, seg := range cands {
		if freed >= need {
			break
		}
		if !synced {
			if !seg.exp.hasFreeChunk(seg) {
				// Nothing to unmap here: no reason to stall the device.
				continue
			}
			// Unmapping is not stream-ordered: the work that used the
			// memory must be complete.
			if d.syncAllLocked() != nil {
				return // nothing is unmapped: growth maps new memory instead
			}
			synced = true
		}
		freed += d.unmapFreeLocked(seg, need-freed)
	}
}

// hasFreeChunk reports whether a physical allocation of seg lies wholly
// inside one of its free blocks: whether unmapFreeLocked would find anything. It
// walks what unmapFreeLocked walks, without touching the device, so that
// growth does not synchronize the device (a stall of every stream on a
// busy GPU) when all of the mapped memory is in use, as it is on every
// growth while a workload first reaches its peak.
func (e *expandable) hasFreeChunk(seg *segment) bool {
	for b := seg.head; b != nil; b = b.next {
		if !b.inTree {
			continue
		}
		first, end := e.chunksWithin(seg, b)
		for i := first; i < end; i++ {
			if e.wholeAt(i, end) > 0 {
				return true
			}
		}
	}
	return false
}

// chunksWithin returns the chunks [first, end) of seg that lie wholly inside
// block b, below the highest mapped one: those a free b may give up.
func (e *expandable) chunksWithin(seg *segment, b *block) (first, end uint64) {
	off := uint64(b.addr - seg.addr)
	return (off + e.chunk - 1) / e.chunk, min((off+b.size)/e.chunk, e.top)
}

// spanAt is the length of the allocation that starts at chunk k, at least
// one: a loop over a run of allocations advances by it and cannot stall.
func (e *expandable) spanAt(k uint64) uint64 {
	return max(uint64(e.span[k]), 1)
}
