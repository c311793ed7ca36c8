// Returning memory to the device: release before growth, the out-of-memory
// releases, garbage collection, EmptyCache and Close.
//
// See doc.go for an overview.

package caching

import (
	"errors"
	"fmt"
	"sort"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/ptrmap"
)

// makeRoomLocked prepares reserved memory to grow by n bytes of regular segment
// (new or grown): an error matching ErrOutOfMemory past the memory
// fraction's cap; with release before growth, wholly free cached segments
// released so that the growth stays within growthBound. d.mu must be held.
func (d *device) makeRoomLocked(n uint64) error {
	reserved := uint64(d.stats.ReservedBytes[gpumem.StatAll].Current)
	if d.capped && reserved+n > d.limit {
		return fmt.Errorf("caching: %s more would exceed the memory fraction's cap of %s: %w",
			gpumem.FormatBytes(n), gpumem.FormatBytes(d.limit), gpumem.ErrOutOfMemory)
	}
	if bound := d.growthBoundLocked(n); d.a.opts.ReleaseBeforeGrow && reserved+n > bound {
		d.releaseForGrowthLocked(reserved + n - bound)
	}
	return nil
}

// growthBoundLocked is the reserved size up to which a new segment of segSize
// is taken without releasing cached memory first: slackBoundLocked with
// Options.GrowthSlack. d.mu must be held.
func (d *device) growthBoundLocked(segSize uint64) uint64 {
	return d.slackBoundLocked(d.a.opts.GrowthSlack, segSize)
}

// expandableBoundLocked is the reserved size up to which expandable
// segments map new memory for a block of size bytes instead of moving
// free chunks: slackBoundLocked with Options.ExpandableSlack. d.mu must be
// held.
func (d *device) expandableBoundLocked(size uint64) uint64 {
	return d.slackBoundLocked(d.a.opts.ExpandableSlack, size)
}

// slackBoundLocked is the reserved high-water mark, or the fraction slack
// over the larger of the allocated high-water mark and what is allocated
// with size more bytes, if that is more. d.mu must be held.
func (d *device) slackBoundLocked(slack float64, size uint64) uint64 {
	bound := d.highWater
	if slack > 0 {
		a := max(d.allocHigh, uint64(d.stats.AllocatedBytes[gpumem.StatAll].Current)+size)
		if b := uint64(float64(a) * (1 + slack)); b > bound {
			bound = b
		}
	}
	return bound
}

// addReservedLocked counts n more reserved bytes of pool kind st and raises the
// high-water mark that release before growth keeps reserved memory under.
// d.mu must be held.
func (d *device) addReservedLocked(st int, n int64) {
	d.stats.ReservedBytes.Add(st, n)
	if r := uint64(d.stats.ReservedBytes[gpumem.StatAll].Current); r > d.highWater {
		d.highWater = r
	}
}

// releaseSegmentLocked returns a wholly free regular segment (its one block in its
// tree) to Upstream. The caller has synchronized the work that used it.
// d.mu must be held.
func (d *device) releaseSegmentLocked(seg *segment) error {
	b := seg.head
	if b.inTree {
		d.takeFromTreeLocked(b.tree, b)
	}
	if gone, err := d.freeSegmentMemoryLocked(seg); !gone {
		d.cacheLocked(b) // keep it; the memory is still ours
		return fmt.Errorf("caching: freeing segment %#x: %w", uintptr(seg.addr), err)
	} else if err != nil {
		d.a.logf("caching: freeing segment %#x: %v", uintptr(seg.addr), err)
	}
	delete(d.segments, seg)
	st := seg.pool.statType()
	d.stats.Segment.Add(st, -1)
	d.stats.ReservedBytes.Add(st, -int64(seg.size))
	d.stats.NumDeviceFree++
	d.recordLocked(gpumem.ActionSegmentFree, seg.stream.Handle, seg.addr, seg.size)
	if pp := seg.pool.private; pp != nil {
		pp.segments--
		if pp.segments == 0 && pp.released {
			delete(d.private, pp.id)
		}
	}
	d.recycleLocked(b)
	return nil
}

// freeSegmentMemoryLocked returns a regular segment's memory: to Upstream, or
// unmapped and released for a growable one. gone says that the memory is
// no longer the allocator's, even when err reports a later failure.
// d.mu must be held.
func (d *device) freeSegmentMemoryLocked(seg *segment) (gone bool, err error) {
	if seg.grow != nil {
		return d.freeGrowableLocked(seg)
	}
	err = d.a.upstream.Free(d.id, seg.addr)
	return err == nil, err
}

// freeableLocked reports whether seg is a regular segment that is wholly free.
// The lock of the segment's device must be held.
func freeableLocked(seg *segment) bool {
	return seg.exp == nil && seg.head.inTree && seg.head.next == nil
}

// syncAllLocked waits for every stream of the device before memory is
// returned. An error means the device could not be waited for: the memory
// must not be unmapped or freed then (work queued before may still use
// it), and the callers that release memory give up. d.mu must be held.
func (d *device) syncAllLocked() error {
	d.stats.NumSyncAllStreams++
	if err := d.a.b.DeviceSynchronize(d.id); err != nil {
		return fmt.Errorf("caching: waiting for device %d before returning memory: %w", d.id, err)
	}
	return nil
}

// releaseForGrowthLocked frees wholly free cached segments so that growing by
// need bytes does not raise the high-water mark. It frees the best-fitting
// segment (the smallest that covers what is still needed) or, when none
// covers it, the largest, until enough is freed: fewer bytes and fewer
// device calls than freeing largest first, and the larger cached segments
// stay for the requests that need them. Freeing a segment costs a device
// synchronization and, for a large one, hundreds of microseconds.
// d.mu must be held.
func (d *device) releaseForGrowthLocked(need uint64) {
	var cands []*segment
	for seg := range d.segments {
		if freeableLocked(seg) && seg.pool.private == nil {
			cands = append(cands, seg)
		}
	}
	if len(cands) == 0 {
		d.unmapForGrowthLocked(need)
		return
	}
	// Largest first; equal sizes by address, so that runs are repeatable.
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].size != cands[j].size {
			return cands[i].size > cands[j].size
		}
		return cands[i].addr < cands[j].addr
	})
	if d.syncAllLocked() != nil {
		return // nothing is released: growth maps new memory instead
	}
	remaining := need
	for len(cands) > 0 && remaining > 0 {
		i := 0 // the largest, unless a smaller one covers the rest
		for j := len(cands) - 1; j >= 0; j-- {
			if cands[j].size >= remaining {
				i = j
				break
			}
		}
		seg := cands[i]
		cands = append(cands[:i], cands[i+1:]...)
		if d.releaseSegmentLocked(seg) == nil {
			remaining -= min(remaining, seg.size)
		}
	}
	if remaining > 0 {
		d.unmapForGrowthLocked(remaining)
	}
}

// releaseAvailableLocked is PyTorch's release_available_cached_blocks: with
// max_split_size set, free one oversize cached block of the stream large
// enough for the request, or else the largest ones until enough is freed.
// d.mu must be held.
func (d *device) releaseAvailableLocked(p *pool, rounded uint64, stream uintptr) bool {
	ms := d.maxSplit
	if ms == 0 {
		return false
	}
	t := p.treeFor(stream, false)
	if t == nil {
		return false
	}
	key := max(rounded, ms)
	if b := t.lowerBound(key); b != nil && b.seg.exp == nil && !b.isSplit() {
		if d.syncAllLocked() != nil {
			return false
		}
		return d.releaseSegmentLocked(b.seg) == nil
	}
	blocks := t.collect()
	var freed uint64
	synced := false
	for i := len(blocks) - 1; i >= 0 && freed < key; i-- {
		b := blocks[i]
		if b.size < ms {
			break
		}
		if b.seg.exp != nil || b.isSplit() {
			continue
		}
		if !synced {
			if d.syncAllLocked() != nil {
				return false
			}
			synced = true
		}
		sz := b.size
		if d.releaseSegmentLocked(b.seg) == nil {
			freed += sz
		}
	}
	return freed >= key
}

// releaseCachedLocked is PyTorch's release_cached_blocks: wait for every pending
// event, then free every wholly free segment (and unmap every free chunk of
// the expandable ones). With private set it also frees the cached memory
// of private pools no capture is using. d.mu must be held.
func (d *device) releaseCachedLocked(private bool) error {
	d.syncEventsLocked()
	if err := d.syncAllLocked(); err != nil {
		return err // nothing is released
	}
	for seg := range d.segments {
		if seg.exp != nil {
			d.unmapFreeLocked(seg, ^uint64(0))
			continue
		}
		if !freeableLocked(seg) {
			continue
		}
		if pp := seg.pool.private; pp != nil && (!private || pp.users > 0) {
			continue
		}
		_ = d.releaseSegmentLocked(seg)
	}
	d.releaseEmptyExpandableLocked()
	return d.retryOrphansLocked()
}

// garbageCollectLocked is PyTorch's garbage_collect_cached_blocks.
// d.mu must be held.
func (d *device) garbageCollectLocked() {
	allowed := d.total
	if d.capped {
		allowed = d.limit
	}
	threshold := uint64(d.a.opts.GarbageCollectionThreshold * float64(allowed))
	reserved := uint64(d.stats.ReservedBytes[gpumem.StatAll].Current)
	if reserved <= threshold {
		return
	}
	target := reserved - threshold
	type cand struct {
		seg *segment
		age uint64
	}
	var cands []cand
	var totalAge uint64
	for seg := range d.segments {
		if freeableLocked(seg) && !seg.pool.small && seg.pool.private == nil {
			age := seg.pool.calls - seg.head.gcBase
			cands = append(cands, cand{seg, age})
			totalAge += age
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].age > cands[j].age })
	var reclaimed uint64
	synced := false
	for len(cands) > 0 && reclaimed < target {
		avg := float64(totalAge) / float64(len(cands))
		freedAny := false
		rest := cands[:0]
		for _, c := range cands {
			if float64(c.age) >= avg {
				if !synced {
					if d.syncAllLocked() != nil {
						return
					}
					synced = true
				}
				sz := c.seg.size
				if d.releaseSegmentLocked(c.seg) == nil {
					reclaimed += sz
					totalAge -= c.age
					freedAny = true
					continue
				}
			}
			rest = append(rest, c)
		}
		cands = rest
		if !freedAny {
			break
		}
	}
}

// EmptyCache returns every wholly free cached segment to the device and
// unmaps every free chunk of the expandable segments, after waiting for
// the events of pending frees. Memory of private pools still in use by a
// graph is kept. A device that is asleep holds no memory and is skipped.
func (a *Allocator) EmptyCache() error {
	if a == nil {
		return errNil("EmptyCache")
	}
	if a.closed.Load() {
		return errClosed()
	}
	var errs []error
	for _, d := range a.devs {
		d.mu.Lock()
		if !d.closed && !d.asleep && len(d.captures) == 0 {
			if err := d.releaseCachedLocked(true); err != nil {
				errs = append(errs, err)
			}
		}
		d.mu.Unlock()
	}
	return errors.Join(errs...)
}

// Close waits for every device, returns all memory (including allocations
// not yet freed) and destroys the allocator's events. Later calls fail with
// ErrClosed. What the device refuses to take back (a segment's free, a
// release, an event's destroy, the pinned sleep buffer) is kept and
// reported, and a second Close tries it again; once everything is
// returned, a further Close returns nil.
func (a *Allocator) Close() error {
	if a == nil {
		return errNil("Close")
	}
	a.closed.Store(true)
	var errs []error
	for _, d := range a.devs {
		d.mu.Lock()
		errs = append(errs, d.closeLocked())
		d.mu.Unlock()
	}
	return errors.Join(errs...)
}

// closeLocked waits for the device, returns all its memory (allocated or
// not) and destroys its events; the device refuses every later call.
// d.mu must be held.
func (d *device) closeLocked() error {
	d.closed = true
	var errs []error
	if len(d.segments) > 0 || d.npending > 0 {
		if err := d.a.b.DeviceSynchronize(d.id); err != nil {
			errs = append(errs, fmt.Errorf("caching: synchronizing device %d: %w", d.id, err))
		}
	}
	for _, q := range d.pending {
		for _, pe := range q {
			d.events = append(d.events, pe.ev)
		}
	}
	d.pending = map[uintptr][]pendingEvent{}
	d.npending = 0
	kept := map[*segment]struct{}{}
	for seg := range d.segments {
		if seg.exp != nil {
			e := seg.exp
			if err := d.unmapAllGhostsLocked(seg); err != nil {
				errs = append(errs, err)
			}
			d.dropGhostEventLocked(seg) // destroyed with the cache below
			for i, m := range e.mapped {
				if !m || (e.sleeping != nil && e.sleeping[i]) || e.span[i] == 0 {
					continue // never mapped, released by Sleep, or not an allocation's first chunk
				}
				addr := seg.addr.Add(uint64(i) * e.chunk)
				if err := d.a.b.MemUnmap(addr, uint64(e.span[i])*e.chunk); err != nil {
					errs = append(errs, fmt.Errorf("caching: unmapping %#x: %w", uintptr(addr), err))
				}
				if err := d.releaseHandleLocked(e.handles[i], uint64(e.span[i])*e.chunk); err != nil {
					errs = append(errs, err)
				}
			}
			if err := d.freeRangeLocked(seg.addr, seg.size); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if _, err := d.freeSegmentMemoryLocked(seg); err != nil {
			errs = append(errs, fmt.Errorf("caching: freeing segment %#x: %w", uintptr(seg.addr), err))
			kept[seg] = struct{}{}
		}
	}
	d.segments = kept // refused: the next Close tries them again
	d.live = ptrmap.Map[*block]{}
	// Whatever the device refused to release before: once more, and what
	// it still refuses is reported (the device holds it).
	errs = append(errs, d.retryOrphansLocked())
	errs = append(errs, d.closeSleepLocked())
	d.events, errs = d.destroyEventsLocked(d.events, errs)
	for k, ev := range d.streamEvents {
		if err := d.a.b.EventDestroy(ev); err != nil {
			errs = append(errs, fmt.Errorf("caching: destroying an event: %w", err))
			continue // kept for the next Close
		}
		delete(d.streamEvents, k)
	}
	return errors.Join(errs...)
}

// destroyEventsLocked destroys evs and returns those the backend refused
// (kept for the next Close), with the refusals added to errs. d.mu must be
// held.
func (d *device) destroyEventsLocked(evs []gpumem.Event, errs []error) ([]gpumem.Event, []error) {
	var kept []gpumem.Event
	for _, ev := range evs {
		if err := d.a.b.EventDestroy(ev); err != nil {
			errs = append(errs, fmt.Errorf("caching: destroying an event: %w", err))
			kept = append(kept, ev)
		}
	}
	return kept, errs
}
