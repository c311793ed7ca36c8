// Stream-ordered reuse: the events of pending frees, and cross-stream reuse.
//
// See doc.go for an overview.

package caching

import (
	"fmt"

	"github.com/gpumem/gpumem"
)

// insertEvents records an event on every stream that used b; b returns to
// its pool when all have completed.
func (d *device) insertEvents(b *block) error {
	uses := b.uses
	var firstErr error
	for _, u := range uses {
		ev, err := d.getEvent()
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
		d.pendingDone(b)
	}
	return firstErr
}

func (d *device) getEvent() (gpumem.Event, error) {
	if n := len(d.events); n > 0 {
		ev := d.events[n-1]
		d.events = d.events[:n-1]
		return ev, nil
	}
	return d.a.b.EventCreate(d.id, gpumem.EventDisableTiming)
}

func (d *device) pendingDone(b *block) {
	d.live.Delete(uint64(b.addr))
	d.stats.PendingReleaseBytes -= int64(b.size)
	d.freeBlock(b)
}

// processEvents returns to their pools the blocks whose events completed.
func (d *device) processEvents() {
	for h, q := range d.pending {
		i := 0
		for ; i < len(q); i++ {
			done, err := d.a.b.EventQuery(q[i].ev)
			if err != nil || !done {
				break
			}
			d.eventDone(q[i])
		}
		d.trimPending(h, q, i)
	}
}

// syncEvents waits for every pending event (PyTorch's
// synchronize_and_free_events).
func (d *device) syncEvents() {
	for h, q := range d.pending {
		i := 0
		for ; i < len(q); i++ {
			if d.a.b.EventSynchronize(q[i].ev) != nil {
				break
			}
			d.eventDone(q[i])
		}
		d.trimPending(h, q, i)
	}
}

func (d *device) trimPending(h uintptr, q []pendingEvent, i int) {
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

func (d *device) eventDone(pe pendingEvent) {
	d.events = append(d.events, pe.ev)
	pe.b.events--
	if pe.b.events == 0 {
		d.pendingDone(pe.b)
	}
}

// crossStreamBlock finds the best-fitting free block cached on another
// stream and orders s after that stream, so that the block can be handed
// out on s without a new segment.
func (d *device) crossStreamBlock(p *pool, rounded uint64, s gpumem.Stream) (*block, error) {
	var best *block
	var bestTree *tree
	for h, t := range p.trees {
		if h == s.Handle {
			continue
		}
		b := t.lowerBound(rounded)
		for b != nil && !d.usable(b, rounded) {
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
	owner := best.stream
	ev, ok := d.streamEvents[owner.Handle]
	if !ok {
		var err error
		ev, err = d.a.b.EventCreate(d.id, gpumem.EventDisableTiming)
		if err != nil {
			return nil, nil // no reuse this time; fall back to a new segment
		}
		d.streamEvents[owner.Handle] = ev
	}
	if d.a.b.EventRecord(ev, owner) != nil || d.a.b.StreamWaitEvent(s, ev) != nil {
		return nil, nil
	}
	d.takeFromTree(bestTree, best)
	// The block stays owned by its stream: its use on s is recorded, so its
	// free orders the owner after s before the memory returns to the pool.
	best.uses = append(best.uses[:0], s)
	d.stats.CrossStreamReuses++
	return best, nil
}
