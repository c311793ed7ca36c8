package asyncpool

import (
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/streamcheck"
)

// ErrCaptureActive is matched (with gpumem.ErrInvalidValue) by operations
// refused while a graph capture is open on the device.
var ErrCaptureActive = errors.New("asyncpool: a graph capture is open on the device")

// ErrGraphOwned is matched by Close when allocations owned by graphs that
// still exist had to be left to them.
var ErrGraphOwned = errors.New("asyncpool: memory is owned by a graph that still exists")

func errFreed(p gpumem.Ptr) error {
	return fmt.Errorf("asyncpool: Deallocate of %#x: not allocated by this allocator or already freed: %w", uintptr(p), gpumem.ErrInvalidValue)
}

// deallocate frees p, held by d, whose last use is ordered on s.
// search says whether to look on the other devices when d does not hold p
// (memory freed from a peer device's stream).
func (d *device) deallocate(p gpumem.Ptr, s gpumem.Stream, search bool) error {
	if d.guarded != nil && !s.IsDefault() && d.idle() {
		if done, err := d.freeUncaptured(p, s); done || err != nil {
			return err
		}
	}
	d.life.RLock()
	other, err := d.deallocateLive(p, s, search)
	d.life.RUnlock()
	if other != nil {
		return other.deallocate(p, s, false)
	}
	return err
}

// deallocateLive is deallocate under life's read lock. It returns the device
// that holds p when that is not d.
func (d *device) deallocateLive(p gpumem.Ptr, s gpumem.Stream, search bool) (*device, error) {
	if d.closed {
		return nil, errClosed
	}
	ci, err := d.captureInfo(s)
	if err != nil {
		return nil, err
	}
	capturing := ci.Status == gpumem.CaptureActive
	if !capturing {
		d.housekeep()
	}
	d.mu.Lock()
	rec, ok := d.recs.get(p)
	if !ok && search {
		d.mu.Unlock()
		if o := d.a.elsewhere(d, p); o != nil {
			return o, nil
		}
		return nil, errFreed(p)
	}
	if !ok || rec.state() != stateLive {
		d.mu.Unlock()
		return nil, errFreed(p)
	}
	g := rec.graph()
	switch {
	case g != nil && capturing && ci.ID == g.id:
		// Case 1: allocated and freed in the same capture: a free node
		// of the graph.
		d.recs.del(p)
		delete(g.allocs, p)
		d.noteFreeLocked(p, rec.size, s, false)
		d.ctr.GraphFreedInCapture++
		d.mu.Unlock()
		if err := d.freeInCapture(p, rec, s, ci); err != nil {
			d.mu.Lock()
			d.recs.set(p, rec)
			if !g.destroyed {
				g.allocs[p] = struct{}{}
			}
			d.unnoteFreeLocked(rec.size, false)
			d.ctr.GraphFreedInCapture--
			d.mu.Unlock()
			return nil, err
		}
		return nil, nil

	case capturing:
		// Case 3: allocated outside this capture, freed inside it. The
		// graph may use the memory whenever it is launched, so the free
		// waits until the graph is destroyed.
		d.mu.Unlock()
		gs, err := d.graphFor(ci, s)
		if err != nil {
			return nil, err
		}
		d.mu.Lock()
		rec, ok = d.recs.get(p)
		if !ok || rec.state() != stateLive {
			d.mu.Unlock()
			return nil, errFreed(p)
		}
		if gs.destroyed {
			d.mu.Unlock()
			return nil, fmt.Errorf("asyncpool: capture %d on %v ended while freeing %#x: %w", ci.ID, s, uintptr(p), gpumem.ErrInvalidValue)
		}
		x := rec.edit()
		x.state, x.freeOn = stateDeferred, s
		d.recs.set(p, rec)
		gs.deferred = append(gs.deferred, p)
		d.toPendingLocked(p, rec.size, s)
		d.ctr.DeferredFrees++
		d.mu.Unlock()
		return nil, nil

	case g != nil && !g.destroyed:
		// Case 2: allocated in a capture, freed outside it: the graph owns
		// the memory; it is freed once the graph is destroyed (if it was
		// ever launched; otherwise the allocation never existed).
		x := rec.edit()
		x.state, x.freeOn = stateGraphOwned, s
		d.recs.set(p, rec)
		d.toPendingLocked(p, rec.size, s)
		d.ctr.GraphOwned++
		d.mu.Unlock()
		return nil, nil

	case g != nil && !g.launched.Load():
		// The allocating graph is gone and never ran: nothing to free.
		d.recs.del(p)
		d.noteFreeLocked(p, rec.size, s, true)
		d.noteReleasedLocked(rec.size)
		d.ctr.GraphDropped++
		d.mu.Unlock()
		return nil, nil
	}

	// Case 4 (or a graph allocation whose graph ran and is gone: live
	// memory, freed like any other).
	d.recs.del(p)
	if len(rec.recorded()) == 0 && s.Device == d.id {
		d.noteFreeLocked(p, rec.size, s, false)
		d.mu.Unlock()
		if err := d.b.FreeAsync(p, s); err != nil {
			d.mu.Lock()
			d.recs.set(p, rec)
			d.unnoteFreeLocked(rec.size, false)
			d.mu.Unlock()
			return nil, fmt.Errorf("asyncpool: freeing %#x on %v: %w", uintptr(p), s, err)
		}
		return nil, nil
	}
	d.pending.Add(int64(rec.size))
	d.noteFreeLocked(p, rec.size, s, true)
	d.mu.Unlock()
	if err := d.freeCross(p, rec.size, s, using(&rec, d.id, s)); err != nil {
		d.mu.Lock()
		d.recs.set(p, rec)
		d.pending.Add(-int64(rec.size))
		d.unnoteFreeLocked(rec.size, true)
		d.mu.Unlock()
		return nil, err
	}
	return nil, nil
}

// freeUncaptured is Deallocate's fast path for a live allocation of no
// capture, with no recorded streams, freed on a stream of its device: the
// capture check and the free in one backend call (guarded), made under mu
// with the record and the statistics (the address leaves the table before
// the driver may hand it out again, and Close cannot overtake the call).
// done false with no error: p is not such an allocation (or not known) or
// the stream is being captured; the record is as it was and the caller
// takes the full path.
func (d *device) freeUncaptured(p gpumem.Ptr, s gpumem.Stream) (done bool, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false, errClosed
	}
	rec, ok := d.recs.take(p)
	if !ok {
		return false, nil
	}
	if rec.x != nil || s.Device != d.id {
		d.recs.add(p, rec)
		return false, nil
	}
	var st gpumem.CaptureStatus
	if d.untracked() {
		err = d.b.FreeAsync(p, s)
	} else {
		st, err = d.guarded.FreeAsyncUncaptured(p, s)
	}
	if err != nil || st != gpumem.CaptureNone {
		// Nothing was freed: the address cannot have been handed out.
		d.recs.add(p, rec)
		if err != nil {
			return false, fmt.Errorf("asyncpool: freeing %#x on %v: %w", uintptr(p), s, err)
		}
		return false, nil
	}
	d.noteFreeLocked(p, rec.size, s, false)
	return true, nil
}

// toPendingLocked moves a record's bytes from allocated to pending release.
// mu must be held.
func (d *device) toPendingLocked(p gpumem.Ptr, size uint64, s gpumem.Stream) {
	d.pending.Add(int64(size))
	d.noteFreeLocked(p, size, s, true)
}

// using lists the streams a free must wait for: the allocation stream, the
// freeing stream and every recorded stream, without duplicates. dev is the
// record's device.
func using(rec *record, dev int, s gpumem.Stream) []gpumem.Stream {
	out := make([]gpumem.Stream, 0, 2+len(rec.recorded()))
	add := func(u gpumem.Stream) {
		for _, v := range out {
			if v == u {
				return
			}
		}
		out = append(out, u)
	}
	if rec.graph() == nil {
		add(rec.allocStream(dev))
	}
	add(s)
	for _, u := range rec.recorded() {
		add(u)
	}
	return out
}

// freeCross frees p on the free stream after joining every using stream
// into it, and queues the free as pending release. The caller has counted
// size as pending. On error nothing was freed.
// A recorded stream that was destroyed has no work left: it is skipped.
func (d *device) freeCross(p gpumem.Ptr, size uint64, s gpumem.Stream, streams []gpumem.Stream) error {
	d.freeMu.Lock()
	defer d.freeMu.Unlock()
	if err := d.ensureFreeStreamLocked(); err != nil {
		return err
	}
	for _, u := range streams {
		if u == d.freeStream || (u != s && streamcheck.Gone(d.b, u)) {
			continue // the free stream itself, or destroyed: no work left to wait for
		}
		if err := d.join(u, d.freeStream); err != nil {
			return fmt.Errorf("asyncpool: joining %v into device %d's free stream: %w", u, d.id, err)
		}
	}
	if err := d.b.FreeAsync(p, d.freeStream); err != nil {
		return fmt.Errorf("asyncpool: freeing %#x on device %d's free stream: %w", uintptr(p), d.id, err)
	}
	d.freeSeq++
	// The memory is freed; from here on nothing fails the call. Without an
	// event the entry completes with a later one or at the next sync.
	ev, err := d.getEvent()
	if err == nil {
		if d.b.EventRecord(ev, d.freeStream) != nil {
			d.putEvent(ev)
			ev = gpumem.Event{}
		}
	}
	d.fifo = append(d.fifo, pendingFree{ev: ev, p: p, size: size})
	d.queued.Store(int32(len(d.fifo)))
	d.mu.Lock()
	d.tally.devFrees++
	d.ctr.CrossStreamFrees++
	d.mu.Unlock()
	return nil
}

// freeInCapture frees p inside the capture ci of s, after joining the
// recorded streams that take part in the same capture.
func (d *device) freeInCapture(p gpumem.Ptr, rec record, s gpumem.Stream, ci gpumem.CaptureInfo) error {
	for _, u := range rec.recorded() {
		if u == s {
			continue
		}
		uc, err := d.streamCapture(u)
		if err != nil {
			return fmt.Errorf("asyncpool: capture status of %v: %w", u, err)
		}
		if uc.Status != gpumem.CaptureActive || uc.ID != ci.ID {
			continue // not part of this graph: it cannot be ordered inside it
		}
		if err := d.join(u, s); err != nil {
			return fmt.Errorf("asyncpool: joining %v into %v in capture: %w", u, s, err)
		}
	}
	if err := d.b.FreeAsync(p, s); err != nil {
		return fmt.Errorf("asyncpool: freeing %#x in the capture on %v: %w", uintptr(p), s, err)
	}
	return nil
}

// settleGraphs does the graph work left for later before the device is
// waited for: it hands their user objects to graphs whose capture has ended,
// processes destroyed graphs and frees what they released.
func (d *device) settleGraphs() error {
	if d.unheld.Load() > 0 {
		d.retainLater()
	}
	d.processReleased()
	return d.flushGraphFrees()
}

// syncFree waits for the frees queued on the free stream.
func (d *device) syncFree() error {
	d.freeMu.Lock()
	defer d.freeMu.Unlock()
	return d.syncFreeLocked()
}

// trim waits for the device, frees what destroyed graphs released, and
// returns the pool's unused memory to the device.
func (d *device) trim() error {
	d.life.RLock()
	defer d.life.RUnlock()
	if d.closed {
		return errClosed
	}
	open, err := d.captureOpen()
	if err != nil {
		return err
	}
	if open {
		return fmt.Errorf("asyncpool: trimming device %d: %w: %w", d.id, ErrCaptureActive, gpumem.ErrInvalidValue)
	}
	var errs []error
	if err := d.settleGraphs(); err != nil {
		errs = append(errs, err)
	}
	if err := d.b.DeviceSynchronize(d.id); err != nil {
		return errors.Join(append(errs, fmt.Errorf("asyncpool: synchronizing device %d: %w", d.id, err))...)
	}
	if err := d.syncFree(); err != nil {
		errs = append(errs, err)
	}
	if err := d.b.MemPoolTrimTo(d.pool, 0); err != nil {
		errs = append(errs, fmt.Errorf("asyncpool: trimming device %d's pool: %w", d.id, err))
	}
	return errors.Join(errs...)
}

// close frees everything the allocator still holds on d and releases its
// resources. It holds life's write lock: no other operation runs.
func (d *device) close() error {
	d.life.Lock()
	defer d.life.Unlock()
	// Set under mu too: the fast paths (allocUncaptured, freeUncaptured)
	// take only mu, and hold it across their backend call.
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	var errs []error
	if err := d.settleGraphs(); err != nil {
		errs = append(errs, err)
	}
	if err := d.b.DeviceSynchronize(d.id); err != nil {
		errs = append(errs, fmt.Errorf("asyncpool: synchronizing device %d: %w", d.id, err))
	}
	// Free what users still hold, and anything else no live graph needs.
	var held, heldBytes uint64
	var free []gpumem.Ptr
	d.mu.Lock()
	var never []gpumem.Ptr
	d.recs.each(func(p gpumem.Ptr, rec record) bool {
		g := rec.graph()
		switch {
		case rec.state() == stateDeferred, rec.state() == stateGraphOwned,
			rec.state() == stateLive && g != nil && !g.destroyed:
			// A graph that still exists may use it.
			held++
			heldBytes += rec.size
		case rec.state() == stateLive && g != nil && !g.launched.Load():
			never = append(never, p) // a graph allocation that never existed
		default:
			free = append(free, p)
		}
		return true
	})
	for _, p := range never {
		d.recs.del(p)
	}
	d.mu.Unlock()
	d.freeMu.Lock()
	if len(free) > 0 {
		if err := d.ensureFreeStreamLocked(); err != nil {
			errs = append(errs, err)
		} else {
			for _, p := range free {
				if err := d.b.FreeAsync(p, d.freeStream); err != nil {
					errs = append(errs, fmt.Errorf("asyncpool: freeing %#x at close: %w", uintptr(p), err))
					continue
				}
				d.mu.Lock()
				d.recs.del(p)
				d.tally.devFrees++
				d.mu.Unlock()
			}
		}
	}
	if err := d.syncFreeLocked(); err != nil {
		errs = append(errs, err)
	}
	if d.hasStream {
		// A failed destroy is tried once more before the handle is given
		// up, so a transient failure leaves nothing behind.
		if err := d.b.StreamDestroy(d.freeStream); err != nil {
			errs = append(errs, fmt.Errorf("asyncpool: destroying device %d's free stream: %w", d.id, err))
			if err := d.b.StreamDestroy(d.freeStream); err != nil {
				errs = append(errs, fmt.Errorf("asyncpool: destroying device %d's free stream, second try: %w", d.id, err))
			}
		}
		d.hasStream = false
	}
	d.freeMu.Unlock()
	d.evMu.Lock()
	for _, ev := range d.events {
		if err := d.b.EventDestroy(ev); err != nil {
			errs = append(errs, fmt.Errorf("asyncpool: destroying an event: %w", err))
			if err := d.b.EventDestroy(ev); err != nil {
				errs = append(errs, fmt.Errorf("asyncpool: destroying an event, second try: %w", err))
			}
		}
	}
	d.events = nil
	d.evMu.Unlock()
	if d.own {
		if held == 0 {
			if err := d.b.MemPoolDestroy(d.pool); err != nil {
				errs = append(errs, fmt.Errorf("asyncpool: destroying device %d's pool: %w", d.id, err))
			}
		}
	} else {
		if err := d.b.MemPoolTrimTo(d.pool, 0); err != nil {
			errs = append(errs, fmt.Errorf("asyncpool: trimming device %d's default pool: %w", d.id, err))
		}
		if err := d.restore(); err != nil {
			errs = append(errs, err)
		}
	}
	if held > 0 {
		errs = append(errs, fmt.Errorf("asyncpool: device %d: %d allocations (%s) belong to graphs that still exist and were left to them: %w",
			d.id, held, gpumem.FormatBytes(heldBytes), ErrGraphOwned))
	}
	return errors.Join(errs...)
}
