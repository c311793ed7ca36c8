// Wake: physical memory mapped back at the addresses Sleep released, the
// kept contents restored, and the undoing of a Wake that cannot finish.
//
// See doc.go for an overview.

package caching

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gpumem/gpumem"
)

// Wake maps physical memory back behind every allocation of every device
// that is asleep, at the same addresses, and restores the contents of the
// KeepOnSleep allocations; then the devices allocate again. A device that
// is awake is left as is.
//
// A device that cannot wake (most often out of memory: another process
// holds what Sleep released) stays asleep as it was, and its error, which
// matches gpumem.ErrOutOfMemory in that case, is returned; the other
// devices wake. Wake can be called again once memory is free.
func (a *Allocator) Wake(ctx context.Context) error {
	if a == nil {
		return errNil("Wake")
	}
	if a.closed.Load() {
		return errClosed()
	}
	if ctx == nil {
		return errNilContext("Wake")
	}
	var errs []error
	for _, d := range a.devs {
		d.mu.Lock()
		errs = append(errs, d.wakeLocked(ctx))
		d.mu.Unlock()
	}
	return errors.Join(errs...)
}

// WakeDevice is Wake for device dev alone.
func (a *Allocator) WakeDevice(ctx context.Context, dev int) error {
	if a == nil {
		return errNil("WakeDevice")
	}
	if ctx == nil {
		return errNilContext("WakeDevice")
	}
	return a.onDevice(dev, func(d *device) error { return d.wakeLocked(ctx) })
}

// chunkRef is chunk i of an expandable segment.
type chunkRef struct {
	seg *segment
	i   uint64
}

// wakeLocked wakes the device, or leaves it asleep as it was. d.mu must
// be held.
func (d *device) wakeLocked(ctx context.Context) error {
	if d.closed {
		return errClosed()
	}
	if !d.asleep {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("caching: waking device %d: %w", d.id, err)
	}
	start := time.Now()
	var segs []*segment
	for seg := range d.segments {
		if seg.exp != nil && seg.exp.sleeping != nil {
			segs = append(segs, seg)
		}
	}
	slices.SortFunc(segs, func(x, y *segment) int { return cmpPtr(x.addr, y.addr) })
	want := uint64(d.stats.AsleepBytes)
	var done []chunkRef
	if err := d.mapSleepingLocked(segs, &done); err != nil {
		var mapped uint64
		for _, c := range done {
			mapped += c.seg.exp.chunk
		}
		d.unmapWokenLocked(done)
		if errors.Is(err, gpumem.ErrOutOfMemory) {
			free, _, _ := d.a.b.MemInfo(d.id)
			return fmt.Errorf("caching: waking device %d: out of memory after mapping %s of %s back (%s free on the device: "+
				"another process may hold it); the device stays asleep: free memory and call Wake again: %w",
				d.id, gpumem.FormatBytes(mapped), gpumem.FormatBytes(want), gpumem.FormatBytes(free), err)
		}
		return fmt.Errorf("caching: waking device %d (it stays asleep): %w", d.id, err)
	}
	var restoreTime time.Duration
	var restored uint64
	if len(d.sleep.runs) > 0 {
		if err := ctx.Err(); err != nil {
			d.unmapWokenLocked(done)
			return fmt.Errorf("caching: waking device %d (it stays asleep): %w", d.id, err)
		}
		t, n, err := d.restoreLocked()
		if err != nil {
			d.unmapWokenLocked(done)
			return fmt.Errorf("caching: waking device %d (it stays asleep): %w", d.id, err)
		}
		restoreTime, restored = t, n
	}
	d.asleep = false
	d.sleep.runs = nil
	d.dropHostLocked()
	d.stats.AsleepSavedBytes, d.stats.AsleepDiscardedBytes = 0, 0
	d.stats.NumWakes++
	r := &d.sleep.report
	r.Restored, r.RestoreTime, r.WakeTime = restored, restoreTime, time.Since(start)
	return nil
}

// mapSleepingLocked creates and maps physical memory behind every sleeping
// chunk of segs, granting access once per run of consecutive chunks, and
// appends each chunk mapped to done. It stops at the first failure.
// d.mu must be held.
func (d *device) mapSleepingLocked(segs []*segment, done *[]chunkRef) error {
	for _, seg := range segs {
		e := seg.exp
		n := uint64(len(e.sleeping))
		for i := uint64(0); i < n; {
			if !e.sleeping[i] {
				i++
				continue
			}
			j := i
			for ; j < n && e.sleeping[j]; j++ {
				addr := seg.addr.Add(j * e.chunk)
				h, err := d.mapNewLocked(addr, e.chunk)
				if err != nil {
					return err
				}
				e.handles[j], e.sleeping[j], e.span[j] = h, false, 1
				d.stats.AsleepBytes -= int64(e.chunk)
				*done = append(*done, chunkRef{seg, j})
			}
			addr, size := seg.addr.Add(i*e.chunk), (j-i)*e.chunk
			if err := d.a.b.MemSetAccess(addr, size, d.id, gpumem.AccessReadWrite); err != nil {
				return fmt.Errorf("granting access to %#x: %w", uintptr(addr), err)
			}
			d.recordLocked(gpumem.ActionSegmentMap, seg.stream.Handle, addr, size)
			i = j
		}
	}
	return nil
}

// unmapWokenLocked puts the chunks of done back to sleep, latest first: a
// Wake that cannot finish leaves the device as it found it. A chunk that
// will not unmap stays mapped (and awake). d.mu must be held.
func (d *device) unmapWokenLocked(done []chunkRef) {
	for _, c := range slices.Backward(done) {
		e := c.seg.exp
		addr := c.seg.addr.Add(c.i * e.chunk)
		if err := d.a.b.MemUnmap(addr, e.chunk); err != nil {
			d.a.logf("caching: unmapping %#x while undoing a wake: %v", uintptr(addr), err)
			continue
		}
		d.sleepGroupLocked(c.seg, c.i) // a chunk of its own
	}
}

// restoreLocked copies the saved runs back, one copy per run on the sleep
// stream, and waits for them. It returns the time from the first copy to
// their completion and the bytes copied. d.mu must be held.
func (d *device) restoreLocked() (time.Duration, uint64, error) {
	s, err := d.streamLocked()
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	var n uint64
	for _, r := range d.sleep.runs {
		if err = d.a.b.MemcpyAsync(r.addr, d.sleep.host.Add(r.off), r.size, s); err != nil {
			err = fmt.Errorf("restoring %s at %#x: %w", gpumem.FormatBytes(r.size), uintptr(r.addr), err)
			break
		}
		n += r.size
	}
	if serr := d.a.b.StreamSynchronize(s); serr != nil && err == nil {
		err = fmt.Errorf("waiting for the restoring copies: %w", serr)
	}
	if err != nil {
		return 0, 0, err
	}
	return time.Since(start), n, nil
}

// closeSleepLocked frees what sleeping holds beyond the segments: the
// pinned host buffer and the copies' stream. d.mu must be held.
func (d *device) closeSleepLocked() error {
	err := d.freeHostLocked()
	d.sleep.runs, d.asleep = nil, false
	if d.sleep.hasStream {
		if serr := d.a.b.StreamDestroy(d.sleep.stream); serr != nil {
			err = errors.Join(err, fmt.Errorf("caching: destroying the stream of sleep copies (kept and tried again): %w", serr))
		} else {
			d.sleep.hasStream = false
		}
	}
	return err
}
