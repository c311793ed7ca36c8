package caching

import (
	"fmt"

	"github.com/gpumem/gpumem"
)

// NewPoolID returns a fresh private pool id, for captures that should share
// a pool (PyTorch's graph_pool_handle).
func (a *Allocator) NewPoolID() PoolID {
	if a == nil {
		return 0
	}
	return PoolID(a.nextPool.Add(1))
}

// BeginCapture routes the allocations of the capture on s (and of every
// stream joined into it) to the private pool id, creating it if needed; id 0
// asks for a fresh pool. Call it just before or after the backend's
// StreamBeginCapture. The pool lives until ReleasePool has been called once
// for each BeginCapture that named it (typically when the graph is
// destroyed). While any capture is underway on the device, no event is
// queried and frees with stream uses are deferred until the last capture
// ends.
func (a *Allocator) BeginCapture(s gpumem.Stream, id PoolID) (PoolID, error) {
	if a == nil {
		return 0, errNil("BeginCapture")
	}
	d, err := a.device(s.Device)
	if err != nil {
		return 0, err
	}
	if id == 0 {
		id = a.NewPoolID()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return 0, errClosed()
	}
	for _, c := range d.captures {
		if c.stream == s {
			return 0, fmt.Errorf("caching: %v is already capturing into pool %d: %w", s, c.pool.id, gpumem.ErrInvalidValue)
		}
	}
	pp := d.private[id]
	if pp == nil {
		pp = &privatePool{id: id}
		pp.small, pp.large = newPool(true, pp), newPool(false, pp)
		d.private[id] = pp
	}
	pp.users++
	pp.released = false
	c := capture{stream: s, pool: pp}
	if info, err := a.b.StreamCaptureInfo(s); err == nil && info.Status == gpumem.CaptureActive {
		c.id = info.ID
	}
	d.captures = append(d.captures, c)
	return id, nil
}

// EndCapture stops routing the allocations of the capture on s to its
// private pool. When no capture remains on the device, the frees deferred
// during capture record their events.
func (a *Allocator) EndCapture(s gpumem.Stream) error {
	if a == nil {
		return errNil("EndCapture")
	}
	d, err := a.device(s.Device)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errClosed()
	}
	for i, c := range d.captures {
		if c.stream == s {
			d.captures = append(d.captures[:i], d.captures[i+1:]...)
			if len(d.captures) == 0 {
				return d.flushDeferredLocked()
			}
			return nil
		}
	}
	return fmt.Errorf("caching: %v has no capture begun with BeginCapture: %w", s, gpumem.ErrInvalidValue)
}

// flushDeferredLocked records the events of the frees deferred while
// captures were underway, once the last capture has ended. d.mu must be held.
func (d *device) flushDeferredLocked() error {
	var first error
	for _, b := range d.deferred {
		if err := d.insertEventsLocked(b); err != nil && first == nil {
			first = err
		}
	}
	d.deferred = d.deferred[:0]
	return first
}

// ReleasePool drops one user of private pool id (on every device). When no
// user remains, its cached segments are freed at once and the others as
// their last block is freed.
func (a *Allocator) ReleasePool(id PoolID) error {
	if a == nil {
		return errNil("ReleasePool")
	}
	if a.closed.Load() {
		return errClosed()
	}
	found := false
	for _, d := range a.devs {
		d.mu.Lock()
		if pp := d.private[id]; pp != nil && !d.closed {
			found = true
			pp.users--
			if pp.users <= 0 {
				pp.users = 0
				pp.released = true
				var segs []*segment
				for seg := range d.segments {
					if seg.pool.private == pp && freeableLocked(seg) {
						segs = append(segs, seg)
					}
				}
				if len(segs) > 0 && d.syncAllLocked() != nil {
					segs = nil // not waited for: kept cached, released later
				}
				for _, seg := range segs {
					_ = d.releaseSegmentLocked(seg)
				}
				if pp.segments == 0 {
					delete(d.private, id)
				}
			}
		}
		d.mu.Unlock()
	}
	if !found {
		return fmt.Errorf("caching: no private pool %d: %w", id, gpumem.ErrInvalidValue)
	}
	return nil
}

// capturePoolLocked returns the private pool that an allocation on s goes to while
// captures are underway, or nil when s takes no part in one. It asks the
// backend for s's capture only when s is not itself a capturing stream.
// d.mu must be held.
func (d *device) capturePoolLocked(s gpumem.Stream) *privatePool {
	for _, c := range d.captures {
		if c.stream == s {
			return c.pool
		}
	}
	info, err := d.a.b.StreamCaptureInfo(s)
	if err != nil || info.Status != gpumem.CaptureActive {
		return nil
	}
	for i := range d.captures {
		c := &d.captures[i]
		if c.id == 0 {
			if ci, err := d.a.b.StreamCaptureInfo(c.stream); err == nil && ci.Status == gpumem.CaptureActive {
				c.id = ci.ID
			}
		}
		if c.id != 0 && c.id == info.ID {
			return c.pool
		}
	}
	return nil
}

// capturingLocked reports whether s is being captured (events must not be queried
// then). It is asked only when events are pending and no capture was begun
// through BeginCapture: a capture the allocator was not told of is detected
// here. d.mu must be held.
func (d *device) capturingLocked(s gpumem.Stream) bool {
	info, err := d.a.b.StreamCaptureInfo(s)
	return err == nil && info.Status == gpumem.CaptureActive
}
