package caching

import (
	"fmt"
	"slices"

	"github.com/gpumem/gpumem"
)

// Ghosts: a chunk of physical memory that moves within its expandable
// segment stays mapped where it was. See doc.go ("Moves that leave a
// ghost") for the policy and the argument for it.

// ghostSet is where one handle with ghosts is mapped: its active chunk (the
// one blocks use, marked mapped) and the chunks it is still mapped at,
// unused (its ghosts).
type ghostSet struct {
	active uint64
	slots  []uint64
}

// isGhost reports whether chunk i of e is a ghost.
func (e *expandable) isGhost(i uint64) bool {
	return i < uint64(len(e.ghost)) && e.ghost[i]
}

// lower moves top down past the chunks that are neither mapped nor ghosts.
func (e *expandable) lower() {
	for e.top > 0 && !e.mapped[e.top-1] && !e.isGhost(e.top-1) {
		e.top--
	}
}

// ghostsAllowed reports whether moves within seg may leave ghosts: not once
// the backend refused to map a handle twice, and not in a private pool's
// segment (a graph capture may be mapping it, and an unmap of a ghost may
// have to wait for queued work).
func (d *device) ghostsAllowed(seg *segment) bool {
	return !d.noGhosts && seg.pool.private == nil
}

// freeChunks marks the chunks of seg that lie wholly inside its free blocks
// and are mapped (below top), each a physical allocation of its own: those
// a mapping may move. d.mu must be held.
func (d *device) freeChunks(seg *segment) []bool {
	e := seg.exp
	free := scratch(&d.scratch, e.top)
	for b := seg.head; b != nil; b = b.next {
		if !b.inTree {
			continue
		}
		first, end := e.chunksWithin(seg, b)
		for i := first; i < end; i++ {
			free[i] = e.mapped[i] && e.span[i] == 1
		}
	}
	return free
}

// scratch returns *buf resized to n zero values, reusing its array when it
// is large enough.
func scratch[T any](buf *[]T, n uint64) []T {
	if uint64(cap(*buf)) < n {
		*buf = make([]T, n)
	} else {
		*buf = (*buf)[:n]
		clear(*buf)
	}
	return *buf
}

// revivable returns the ghosts of the handle of ghost chunk i when chunk i
// can become its active chunk again: the handle's active chunk is free
// (marked in free). nil otherwise, or for a ghost whose unmap failed when
// its handle left.
func (e *expandable) revivable(i uint64, free []bool) *ghostSet {
	gs := e.moved[e.handles[i]]
	if gs == nil || gs.active >= uint64(len(free)) || !free[gs.active] || !slices.Contains(gs.slots, i) {
		return nil
	}
	return gs
}

// activateLocked makes chunk i of seg, mapped to the handle of active chunk
// j, the active one, and j a ghost: for the allocator, j is unmapped and i
// mapped, and the history says so. d.mu must be held.
func (d *device) activateLocked(seg *segment, j, i uint64) {
	e := seg.exp
	e.mapped[j], e.ghost[j], e.span[j] = false, true, 0
	e.mapped[i], e.ghost[i], e.span[i] = true, false, 1
	e.made++
	d.recordLocked(gpumem.ActionSegmentUnmap, seg.stream.Handle, seg.addr.Add(j*e.chunk), e.chunk)
	d.recordLocked(gpumem.ActionSegmentMap, seg.stream.Handle, seg.addr.Add(i*e.chunk), e.chunk)
}

// reviveLocked makes ghost chunk i of seg the active chunk of its handle
// again, with no device call, if the handle's active chunk is free (marked
// in free): that chunk becomes a ghost in its place. Both chunks are of the
// same segment, so of one stream, and the stream's order keeps the work
// that used the old chunk ahead of whatever uses the new one: nothing is
// unmapped, so nothing needs the device synchronized. d.mu must be held.
func (d *device) reviveLocked(seg *segment, i uint64, free []bool) bool {
	gs := seg.exp.revivable(i, free)
	if gs == nil {
		return false
	}
	j := gs.active
	free[j] = false
	gs.slots[slices.Index(gs.slots, i)], gs.active = j, i
	d.activateLocked(seg, j, i)
	return true
}

// moveLeavingGhostLocked maps the handle of free chunk j of seg at chunk i
// as well and makes i its active chunk, leaving j a ghost: a move that
// costs a map and an access grant (granted by the caller), not an unmap and
// a synchronization. An error is the map's. d.mu must be held.
func (d *device) moveLeavingGhostLocked(seg *segment, j, i uint64) error {
	e := seg.exp
	h := e.handles[j]
	if err := d.a.b.MemMap(seg.addr.Add(i*e.chunk), e.chunk, 0, h); err != nil {
		return err
	}
	gs := e.moved[h]
	if gs == nil {
		if e.moved == nil {
			e.moved = map[gpumem.MemHandle]*ghostSet{}
		}
		gs = &ghostSet{}
		e.moved[h] = gs
	}
	gs.active = i
	gs.slots = append(gs.slots, j)
	e.handles[i] = h
	e.nghost++
	e.top = max(e.top, i+1)
	d.stats.NumDeviceAlloc++
	d.activateLocked(seg, j, i)
	return nil
}

// fenceGhostsLocked records the segment's event on its stream if ghosts
// were made since it was last recorded: work queued on the stream before a
// ghost was made, which may still use the ghost's addresses, is then ahead
// of the event, and an unmap of the ghost need wait for that stream alone
// (awaitGhostsLocked) instead of the whole device. Should the event not be
// had, the next unmap of a ghost synchronizes the device. d.mu must be held.
func (d *device) fenceGhostsLocked(seg *segment) {
	e := seg.exp
	if e.made == e.fenced {
		return
	}
	if !e.hasEv {
		ev, err := d.getEventLocked()
		if err != nil {
			return
		}
		e.ev, e.hasEv = ev, true
	}
	if d.a.b.EventRecord(e.ev, seg.stream) == nil {
		e.fenced = e.made
	}
}

// awaitGhostsLocked waits until no queued work may use the addresses of
// the first made ghosts of seg: for the segment's event when it was
// recorded after them (no wait at all once it has completed, as it has
// long since on a busy workload), else for the whole device. d.mu must be
// held.
func (d *device) awaitGhostsLocked(seg *segment, made int64) {
	e := seg.exp
	if e.hasEv && e.fenced >= made {
		if done, err := d.a.b.EventQuery(e.ev); err == nil && done {
			return
		}
		if d.a.b.EventSynchronize(e.ev) == nil {
			return
		}
	}
	_ = d.syncAllLocked()
}

// dropGhostEventLocked returns seg's event to the device's cache, when seg
// goes. d.mu must be held.
func (d *device) dropGhostEventLocked(seg *segment) {
	if e := seg.exp; e.hasEv {
		d.events = append(d.events, e.ev)
		e.hasEv = false
	}
}

// unmapGhostLocked unmaps ghost chunk i of seg, so that the chunk can take
// another handle. The caller has waited for the work queued before the
// handle moved, which may use the ghost's addresses (awaitGhostsLocked, or
// a synchronization of the device). d.mu must be held.
func (d *device) unmapGhostLocked(seg *segment, i uint64) error {
	e := seg.exp
	addr := seg.addr.Add(i * e.chunk)
	if err := d.a.b.MemUnmap(addr, e.chunk); err != nil {
		return fmt.Errorf("caching: unmapping %#x, where memory that moved was still mapped: %w", uintptr(addr), err)
	}
	h := e.handles[i]
	if gs := e.moved[h]; gs != nil {
		if k := slices.Index(gs.slots, i); k >= 0 {
			gs.slots = slices.Delete(gs.slots, k, k+1)
		}
		if len(gs.slots) == 0 {
			delete(e.moved, h)
		}
	}
	e.handles[i], e.ghost[i] = gpumem.MemHandle{}, false
	e.nghost--
	e.lower()
	d.stats.NumDeviceFree++
	return nil
}

// unmapGhostsOfLocked unmaps every ghost of handle h of seg, before h is
// released or leaves the segment. The device has been synchronized. On an
// error the ghosts not unmapped stay marked, with no handle set: the
// chunks are unmapped again before anything is mapped there. d.mu must be
// held.
func (d *device) unmapGhostsOfLocked(seg *segment, h gpumem.MemHandle) error {
	gs := seg.exp.moved[h]
	if gs == nil {
		return nil
	}
	for len(gs.slots) > 0 {
		if err := d.unmapGhostLocked(seg, gs.slots[len(gs.slots)-1]); err != nil {
			delete(seg.exp.moved, h)
			return err
		}
	}
	return nil
}

// unmapAllGhostsLocked unmaps every ghost of seg (Sleep and Close, after
// synchronizing the device). d.mu must be held.
func (d *device) unmapAllGhostsLocked(seg *segment) error {
	e := seg.exp
	for i := uint64(0); e.nghost > 0 && i < uint64(len(e.ghost)); i++ {
		if e.ghost[i] {
			if err := d.unmapGhostLocked(seg, i); err != nil {
				return err
			}
		}
	}
	return nil
}

// cheapestWindowLocked returns the free block of b's segment (b, out of its
// tree, included) and the offset in it where rounded bytes need the fewest
// chunks mapped, a ghost that reviveLocked would make active counting as
// mapped; nil where the segment has no ghosts or no window needs fewer
// than b's start. preferMappedLocked asks it when no free block holds the
// request on mapped chunks alone, so that a block that must map some
// chunks goes where the fewest device calls serve it (a workload that
// alternates phases finds its previous places as ghosts); the smallest
// block wins a tie, as best fit would have it. d.mu must be held.
func (d *device) cheapestWindowLocked(b *block, rounded uint64) (*block, uint64) {
	seg := b.seg
	e := seg.exp
	if e.nghost == 0 || !d.ghostsAllowed(seg) || d.a.opts.bestFitOnly {
		return nil, 0
	}
	free := d.freeChunks(seg)
	first, end := e.chunksWithin(seg, b)
	for i := first; i < end; i++ {
		free[i] = e.mapped[i]
	}
	// need[i] counts the chunks below i that a mapping would have to map:
	// neither mapped nor a ghost whose handle is free where it is active.
	need := scratch(&d.scratchN, e.top+1)
	for i := range e.top {
		ok := e.mapped[i] || (e.ghost[i] && e.revivable(i, free) != nil)
		need[i+1] = need[i]
		if !ok {
			need[i+1]++
		}
	}
	cost := func(start uint64) uint64 { // of [start, start+rounded), chunks past top unmapped
		lo, hi := start/e.chunk, (start+rounded-1)/e.chunk+1
		n := hi - lo
		if lo < e.top {
			n -= min(hi, e.top) - lo - (need[min(hi, e.top)] - need[lo])
		}
		return n
	}
	best, bestOff := (*block)(nil), uint64(0)
	bestCost := cost(uint64(b.addr - seg.addr))
	try := func(c *block) {
		base := uint64(c.addr - seg.addr)
		for off := uint64(0); off+rounded <= c.size && base+off < e.top*e.chunk; {
			if k := cost(base + off); k < bestCost {
				best, bestOff, bestCost = c, off, k
			}
			off = (base+off)/e.chunk*e.chunk + e.chunk - base // the next chunk boundary
		}
	}
	try(b)
	b.tree.ascendFrom(rounded, func(c *block) bool {
		if c.seg == seg {
			try(c)
		}
		return true
	})
	return best, bestOff
}
