// Stream-ordered reuse: the events of pending frees, and cross-stream reuse.
//
// See doc.go for an overview.

package caching

import (
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/streamcheck"
)

// insertEventsLocked records an event on every stream that used b; b returns to
// its pool when all have completed. d.mu must be held.
func (d *device) insertEventsLocked(b *block) error {
	uses := b.uses
	var firstErr error
	for _, u := range uses {
		if streamcheck.Gone(d.a.b, u) {
			continue // destroyed: no work left to wait for, and no handle to give the driver
		}
		ev, err := d.getEventLocked()
		if err == nil {
			err = d.a.b.EventRecord(ev, u)
			if err != nil {
				d.events = append(d.events, ev)
			}
		}
		if err != nil {
			// Without an event, wait for the stream now.
			if serr := d.a.b.StreamSynchronize(u); serr != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("caching: ordering the free of %#x after %v: %w", uintptr(b.addr), u, err)
				}
				b.events++ // quarantined until Close: it may still be in use
			}
			continue
		}
		d.pending[u.Handle] = append(d.pending[u.Handle], pendingEvent{ev, b})
		d.npending++
		b.events++
	}
	b.uses = b.uses[:0]
	if b.events == 0 {
		d.pendingDoneLocked(b)
	}
	return firstErr
}

// getEventLocked returns a cached event, or a new one. d.mu must be held.
func (d *device) getEventLocked() (gpumem.Event, error) {
	if n := len(d.events); n > 0 {
		ev := d.events[n-1]
		d.events = d.events[:n-1]
		return ev, nil
	}
	return d.a.b.EventCreate(d.id, gpumem.EventDisableTiming)
}

// pendingDoneLocked returns the pending block b, whose events have all
// completed, to its pool. d.mu must be held.
func (d *device) pendingDoneLocked(b *block) {
	d.live.Delete(uint64(b.addr))
	d.stats.PendingReleaseBytes -= int64(b.size)
	d.freeBlockLocked(b)
}

// processEventsLocked returns to their pools the blocks whose events completed.
// d.mu must be held.
func (d *device) processEventsLocked() {
	for h, q := range d.pending {
		i := 0
		for ; i < len(q); i++ {
			done, err := d.a.b.EventQuery(q[i].ev)
			if err != nil || !done {
				break
			}
			d.eventDoneLocked(q[i])
		}
		d.trimPendingLocked(h, q, i)
	}
}

// syncEventsLocked waits for every pending event (PyTorch's
// synchronize_and_free_events). d.mu must be held.
func (d *device) syncEventsLocked() {
	for h, q := range d.pending {
		i := 0
		for ; i < len(q); i++ {
			if d.a.b.EventSynchronize(q[i].ev) != nil {
				break
			}
			d.eventDoneLocked(q[i])
		}
		d.trimPendingLocked(h, q, i)
	}
}

// trimPendingLocked drops the first i events of stream h's queue q, which
// have completed. d.mu must be held.
func (d *device) trimPendingLocked(h uintptr, q []pendingEvent, i int) {
	if i == 0 {
		return
	}
	d.npending -= i
	if i == len(q) {
		delete(d.pending, h)
		return
	}
	d.pending[h] = append(q[:0], q[i:]...)
}

// eventDoneLocked keeps the completed event of pe for reuse and returns
// its block to its pool when it was the block's last event.
// d.mu must be held.
func (d *device) eventDoneLocked(pe pendingEvent) {
	d.events = append(d.events, pe.ev)
	pe.b.events--
	if pe.b.events == 0 {
		d.pendingDoneLocked(pe.b)
	}
}

// crossStreamBlockLocked finds the best-fitting free block cached on another
// stream and orders s after that stream, so that the block can be handed
// out on s without a new segment. d.mu must be held.
func (d *device) crossStreamBlockLocked(p *pool, rounded uint64, s gpumem.Stream) (*block, error) {
	var best *block
	var bestTree *tree
	for h, t := range p.trees {
		if h == s.Handle || d.goneLocked(h) {
			continue
		}
		b := t.lowerBound(rounded)
		for b != nil && !d.usableLocked(b, rounded) {
			b = nil
		}
		if b == nil {
			continue
		}
		if best == nil || b.size < best.size || (b.size == best.size && b.addr < best.addr) {
			best, bestTree = b, t
		}
	}
	if best == nil {
		return nil, nil
	}
	if !d.orderAfterOwnerLocked(best.stream, s) {
		return nil, nil // no reuse this time; fall back to a new segment
	}
	d.takeFromTreeLocked(bestTree, best)
	d.lendLocked(best, s)
	return best, nil
}

// orderAfterOwnerLocked makes s wait (stream-ordered, no host wait) for the
// work queued so far on owner, whose free block s is about to use: an
// event of owner's, recorded there and waited for on s. false if the event
// could not be had or recorded, or s not made to wait: nothing is lent
// then. The callers pass no destroyed owner (goneLocked). d.mu must be held.
func (d *device) orderAfterOwnerLocked(owner, s gpumem.Stream) bool {
	ev, ok := d.streamEvents[owner.Handle]
	if !ok {
		var err error
		ev, err = d.a.b.EventCreate(d.id, gpumem.EventDisableTiming)
		if err != nil {
			return false
		}
		d.streamEvents[owner.Handle] = ev
	}
	return d.a.b.EventRecord(ev, owner) == nil && d.a.b.StreamWaitEvent(s, ev) == nil
}

// goneLocked reports whether the stream of handle h of the device was
// destroyed: its free blocks stay cached until EmptyCache, but no event can
// be recorded on it, so it lends nothing. d.mu must be held.
func (d *device) goneLocked(h uintptr) bool {
	return streamcheck.Gone(d.a.b, gpumem.Stream{Device: d.id, Handle: h})
}

// lendLocked marks free block b (out of its tree), of another stream's
// pool, as used on s. The block stays owned by its stream: its use on s is
// recorded, so its free orders the owner after s before the memory returns
// to the owner's pool. d.mu must be held.
func (d *device) lendLocked(b *block, s gpumem.Stream) {
	b.uses = append(b.uses[:0], s)
	d.stats.CrossStreamReuses++
}
