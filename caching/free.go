// The free path: finding a block, ordering its free after its uses, merging.
//
// See doc.go for an overview.

package caching

import (
	"fmt"

	"github.com/gpumem/gpumem"
)

// Deallocate returns p to the allocator. When p was used on streams other
// than the one it was allocated on (RecordStream, or s differing from the
// allocation stream), its memory is reused only after those streams reach
// the point of this call.
//
// s must be a live stream (of any device): anything else is refused with
// ErrInvalidValue and p stays allocated. A stream p was used on that has
// since been destroyed has no work left to wait for: it does not delay
// the reuse.
func (a *Allocator) Deallocate(p gpumem.Ptr, s gpumem.Stream) error {
	if a == nil {
		return errNil("Deallocate")
	}
	if dev := s.Device; dev >= 0 && dev < len(a.devs) && !a.closed.Load() {
		// Fast path: a stream checked since no stream was destroyed, and
		// the block on the stream's device.
		d := a.devs[dev]
		d.mu.Lock()
		if !d.closed && d.streamKnownLocked(s) {
			if b, _ := d.live.Get(uint64(p)); b != nil && b.allocated {
				if s != b.stream {
					addUseLocked(b, s)
				}
				err := d.freeLocked(b, s)
				d.mu.Unlock()
				return err
			}
		}
		d.mu.Unlock()
	}
	if err := a.checkStream(s); err != nil {
		if a.closed.Load() {
			return errClosed()
		}
		return err
	}
	if dev := s.Device; dev >= 0 && dev < len(a.devs) && !a.closed.Load() {
		// The block on the stream's device.
		d := a.devs[dev]
		d.mu.Lock()
		if b, _ := d.live.Get(uint64(p)); b != nil && b.allocated && !d.closed {
			if s != b.stream {
				addUseLocked(b, s)
			}
			err := d.freeLocked(b, s)
			d.mu.Unlock()
			return err
		}
		d.mu.Unlock()
	}
	d, b, err := a.find(p, s.Device)
	if err != nil {
		return err
	}
	defer d.mu.Unlock()
	if s != b.stream {
		addUseLocked(b, s)
	}
	return d.freeLocked(b, s)
}

// find locates the live block at p, trying device hint first, and returns
// it with its device locked.
func (a *Allocator) find(p gpumem.Ptr, hint int) (*device, *block, error) {
	if a.closed.Load() {
		return nil, nil, errClosed()
	}
	try := func(d *device) (*block, error) {
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return nil, errClosed()
		}
		if b, _ := d.live.Get(uint64(p)); b != nil && b.allocated {
			return b, nil
		}
		d.mu.Unlock()
		return nil, nil
	}
	if hint >= 0 && hint < len(a.devs) {
		d := a.devs[hint]
		d.mu.Lock()
		if b, _ := d.live.Get(uint64(p)); b != nil && b.allocated && !d.closed {
			return d, b, nil
		}
		d.mu.Unlock()
		b, err := try(d)
		if err != nil || b != nil {
			return a.devs[hint], b, err
		}
	}
	for i, d := range a.devs {
		if i == hint {
			continue
		}
		b, err := try(d)
		if err != nil || b != nil {
			return d, b, err
		}
	}
	return nil, nil, fmt.Errorf("caching: pointer %#x was not allocated by this allocator or was already freed: %w", uintptr(p), gpumem.ErrInvalidValue)
}

// addUseLocked records s as a use of b, once.
// The lock of the block's device must be held.
func addUseLocked(b *block, s gpumem.Stream) {
	for _, u := range b.uses {
		if u == s {
			return
		}
	}
	b.uses = append(b.uses, s)
}

// freeLocked frees the allocated block b on s (its uses already recorded):
// back to its pool at once when no other stream used it, else pending
// until events on its use streams complete. d.mu must be held.
func (d *device) freeLocked(b *block, s gpumem.Stream) error {
	b.allocated = false
	st := b.pool.statType()
	dec(&d.stats.Allocation, st, 1)
	dec(&d.stats.AllocatedBytes, st, int64(b.size))
	dec(&d.stats.RequestedBytes, st, int64(b.requested))
	if d.history.On() {
		d.recordLocked(gpumem.ActionFreeRequest, s.Handle, b.addr, b.size)
	}
	if len(b.uses) == 0 {
		d.live.Delete(uint64(b.addr))
		d.freeBlockLocked(b)
		return nil
	}
	// Pending: the block stays in the address table, still ours and not
	// reusable.
	d.stats.PendingReleaseBytes += int64(b.size)
	if len(d.captures) > 0 {
		d.deferred = append(d.deferred, b)
		return nil
	}
	return d.insertEventsLocked(b)
}

// freeBlockLocked is PyTorch's free_block: merge with free neighbours of the same
// stream and pool, and cache the result. d.mu must be held.
func (d *device) freeBlockLocked(b *block) {
	st := b.pool.statType()
	dec(&d.stats.Active, st, 1)
	dec(&d.stats.ActiveBytes, st, int64(b.size))
	if d.history.On() {
		d.recordLocked(gpumem.ActionFreeComplete, b.stream.Handle, b.addr, b.size)
	}
	b = d.mergeAndCacheLocked(b)
	if pp := b.pool.private; pp != nil && pp.released && freeableLocked(b.seg) {
		_ = d.releaseSegmentLocked(b.seg)
	}
}

// mergeAndCacheLocked merges b (free, out of any tree) with its free neighbours
// of the same stream and caches the result, which it returns.
// d.mu must be held.
func (d *device) mergeAndCacheLocked(b *block) *block {
	b.uses = b.uses[:0]
	pr, nx := b.prev, b.next
	prevFree := pr != nil && pr.inTree && pr.stream == b.stream
	nextFree := nx != nil && nx.inTree && nx.stream == b.stream
	// The merged block grows a free neighbour that is in the tree (the
	// previous one, else the next); when its larger key still orders
	// before that neighbour's successor it takes the neighbour's place,
	// which spares a removal and an insertion.
	var keep *block
	switch {
	case prevFree:
		keep = pr
		if nextFree {
			d.takeFromTreeLocked(nx.tree, nx)
		}
	case nextFree:
		keep = nx
	}
	if keep == nil {
		if b.prev == nil {
			b.seg.head = b
		}
		d.cacheLocked(b)
		return b
	}
	t := keep.tree
	link, succ := t.findAt(keep)
	if keep.counted {
		keep.counted = false
		st := keep.pool.statType()
		dec(&d.stats.InactiveSplit, st, 1)
		dec(&d.stats.InactiveSplitBytes, st, int64(keep.size))
	}
	// Link the merged block: the previous block absorbs b (and the next
	// one, when free), or b absorbs the next one.
	merged := b
	if prevFree {
		merged = pr
		pr.size += b.size
		pr.next = b.next
		if b.next != nil {
			b.next.prev = pr
		}
		if nextFree {
			pr.size += nx.size
			pr.next = nx.next
			if nx.next != nil {
				nx.next.prev = pr
			}
		}
	} else {
		b.size += nx.size
		b.next = nx.next
		if nx.next != nil {
			nx.next.prev = b
		}
	}
	inPlace := succ == nil || keyLess(merged, succ.size, uintptr(succ.addr))
	if inPlace {
		if merged != keep {
			t.replace(link, keep, merged)
		}
	} else {
		t.removeAt(link, keep)
	}
	if prevFree {
		d.recycleLocked(b)
		if nextFree {
			d.recycleLocked(nx)
		}
	} else {
		d.recycleLocked(nx)
	}
	if merged.prev == nil {
		merged.seg.head = merged
	}
	if inPlace {
		merged.gcBase = merged.pool.calls
		if merged.isSplit() && merged.seg.exp == nil {
			merged.counted = true
			st := merged.pool.statType()
			inc(&d.stats.InactiveSplit, st, 1)
			inc(&d.stats.InactiveSplitBytes, st, int64(merged.size))
		}
	} else {
		d.cacheLocked(merged)
	}
	return merged
}

// RecordStream marks p as used on s: when p is freed, its memory returns to
// the pool only after the work queued on s up to the free has completed.
// s may be a stream of another device than p's (its work is then waited
// for when p is freed); a stream that is not live is refused with
// ErrInvalidValue.
func (a *Allocator) RecordStream(p gpumem.Ptr, s gpumem.Stream) error {
	if a == nil {
		return errNil("RecordStream")
	}
	d, b, err := a.find(p, s.Device)
	if err != nil {
		return err
	}
	defer d.mu.Unlock()
	if err := a.checkStream(s); err != nil {
		return err
	}
	if s != b.stream {
		addUseLocked(b, s)
	}
	return nil
}

// Size returns the size asked for when p was allocated.
func (a *Allocator) Size(p gpumem.Ptr) (uint64, error) {
	if a == nil {
		return 0, errNil("Size")
	}
	d, b, err := a.find(p, 0)
	if err != nil {
		return 0, err
	}
	defer d.mu.Unlock()
	return b.requested, nil
}
