package caching

import "github.com/gpumem/gpumem"

// Borrowing mapped memory across streams' expandable segments. See doc.go
// ("Borrowing across streams") for the policy and the argument for it.

// borrowMappedLocked serves a request of rounded bytes on s, for which b
// (out of its tree), the free block of s's own expandable segment chosen by
// preferMappedLocked, would need chunks mapped, from a free block of
// another stream's segment of the same pool that holds the request on
// mapped chunks alone: s is made to wait for the owner's queued work (an
// event, no host wait) and the block is lent to s as cross-stream reuse
// lends a regular one. The block returned is out of its tree, split in front
// where the mapped run starts; b is back in its tree. Only a request that
// mapRangeLocked would serve by moving memory from other segments (with a
// synchronization, unmaps and access grants) borrows: one that its own
// segment's memory serves keeps each stream's memory in its own segment. nil, with b untouched,
// when the request needs no such move, when cross-stream reuse or release
// before growth is off or a capture is underway, or when no other stream
// has such a block. d.mu must be held.
func (d *device) borrowMappedLocked(p *pool, b *block, rounded uint64, s gpumem.Stream) *block {
	if !d.a.opts.CrossStreamReuse || len(d.captures) > 0 || p.private != nil || p.small || len(p.trees) < 2 {
		return nil
	}
	if !d.a.opts.ReleaseBeforeGrow || !d.wouldMoveAcrossLocked(b, rounded) {
		return nil
	}
	// The tightest mapped run wins (then the lower address): the owner
	// keeps its long runs, which its own large blocks need whole.
	var best *block
	var bestOff, bestRun uint64
	for h, t := range p.trees {
		if h == s.Handle || d.goneLocked(h) {
			continue
		}
		t.ascendFrom(rounded, func(c *block) bool {
			if c.seg.exp == nil {
				return true
			}
			c.seg.exp.eachMappedRun(c, func(off, n uint64) bool {
				if n < rounded {
					return true
				}
				at := c.addr.Add(off + n - rounded)
				if best == nil || n < bestRun || (n == bestRun && at < best.addr.Add(bestOff)) {
					best, bestOff, bestRun = c, off+n-rounded, n
				}
				return true
			})
			return true
		})
	}
	if best == nil || !d.orderAfterOwnerLocked(best.stream, s) {
		return nil
	}
	d.mergeAndCacheLocked(b) // preferMappedLocked may have split it in front
	d.takeFromTreeLocked(best.tree, best)
	if bestOff > 0 {
		d.splitFrontLocked(best, bestOff)
	}
	d.lendLocked(best, s)
	return best
}

// wouldMoveAcrossLocked reports whether mapRangeLocked, serving the first
// rounded bytes of free block b (out of its tree), would take memory from
// outside b's segment: what it must map takes reserved memory past its
// high-water mark by more than the segment's own free mapped chunks, which
// it moves first, cover. d.mu must be held.
func (d *device) wouldMoveAcrossLocked(b *block, rounded uint64) bool {
	seg := b.seg
	e := seg.exp
	if e.mappedPrefix(b, rounded) {
		return false
	}
	// One table of the segment's free mapped chunks serves both counts:
	// the chunks that would move here, and the ghosts that would revive.
	var free []bool
	var own uint64
	if d.ghostsAllowed(seg) {
		free = d.freeChunks(seg)
		for _, f := range free {
			if f {
				own += e.chunk
			}
		}
	}
	need := e.mapNeed(b, rounded, free)
	reserved := uint64(d.stats.ReservedBytes[gpumem.StatAll].Current)
	if need == 0 || reserved+need <= d.highWater {
		return false
	}
	return free == nil || reserved+need-d.highWater > own
}

// mapNeed is how many bytes of chunks mapRangeLocked would map for the
// first rounded bytes of free block b: those neither mapped nor ghosts that
// it revives with no device call, given free, the segment's free mapped
// chunks (nil where ghosts are not allowed). It marks the chunks it counts
// as revived in free, as reviveLocked does: one revival per handle.
func (e *expandable) mapNeed(b *block, rounded uint64, free []bool) uint64 {
	off := uint64(b.addr - b.seg.addr)
	first, last := off/e.chunk, (off+rounded-1)/e.chunk
	var n uint64
	for i := first; i <= last; i++ {
		if i < e.top && e.mapped[i] {
			continue
		}
		if i < e.top && free != nil && e.isGhost(i) {
			if gs := e.revivable(i, free); gs != nil {
				free[gs.active] = false
				continue
			}
		}
		n += e.chunk
	}
	return n
}
