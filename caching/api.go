package caching

import (
	"errors"
	"fmt"
	"sort"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/history"
	"github.com/gpumem/gpumem/internal/ptrmap"
)

// Stats returns the statistics of device dev (zero for an unknown device).
func (a *Allocator) Stats(dev int) gpumem.MemoryStats {
	if dev < 0 || dev >= len(a.devs) {
		return gpumem.MemoryStats{}
	}
	d := a.devs[dev]
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.statsLocked()
}

func (d *device) statsLocked() gpumem.MemoryStats {
	s := d.stats
	var free, largest uint64
	for seg := range d.segments {
		for b := seg.head; b != nil; b = b.next {
			if !b.inTree {
				continue
			}
			sz := b.size
			if seg.exp != nil {
				sz = seg.exp.mappedWithin(b)
			}
			free += sz
			if seg.pool.private == nil {
				largest = max(largest, sz)
			}
		}
	}
	s.LargestFreeBlock = largest
	if free > 0 {
		s.Fragmentation = 1 - float64(largest)/float64(free)
	}
	return s
}

// ResetPeakStats sets every peak of device dev to its current value.
func (a *Allocator) ResetPeakStats(dev int) {
	if dev < 0 || dev >= len(a.devs) {
		return
	}
	d := a.devs[dev]
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats.ResetPeaks()
}

// Snapshot returns every segment with its blocks, the memory history and the
// statistics of every device. It marshals to JSON.
func (a *Allocator) Snapshot() gpumem.Snapshot {
	snap := gpumem.Snapshot{Segments: []gpumem.SegmentInfo{}, Stats: map[int]gpumem.MemoryStats{}}
	for _, d := range a.devs {
		d.mu.Lock()
		for seg := range d.segments {
			si := gpumem.SegmentInfo{Device: d.id, Stream: seg.stream.Handle, Addr: seg.addr, TotalSize: seg.size,
				SegmentType: "large", Expandable: seg.exp != nil, Blocks: []gpumem.BlockInfo{}}
			if seg.pool.small {
				si.SegmentType = "small"
			}
			if seg.pool.private != nil {
				si.PrivatePool = uint64(seg.pool.private.id)
			}
			for b := seg.head; b != nil; b = b.next {
				bi := gpumem.BlockInfo{Addr: b.addr, Size: b.size, State: "inactive"}
				switch {
				case b.allocated:
					bi.State, bi.RequestedSize = "active_allocated", b.requested
					si.AllocatedSize += b.size
					si.ActiveSize += b.size
					si.RequestedSize += b.requested
				case !b.inTree:
					bi.State = "active_pending_free"
					si.ActiveSize += b.size
				}
				si.Blocks = append(si.Blocks, bi)
			}
			snap.Segments = append(snap.Segments, si)
		}
		snap.Stats[d.id] = d.statsLocked()
		d.mu.Unlock()
	}
	sort.Slice(snap.Segments, func(i, j int) bool {
		x, y := snap.Segments[i], snap.Segments[j]
		if x.Device != y.Device {
			return x.Device < y.Device
		}
		return x.Addr < y.Addr
	})
	snap.History = a.History()
	return snap
}

// History returns the memory history of every device, oldest first: at
// most Options.HistorySize entries per device.
func (a *Allocator) History() []gpumem.HistoryEntry {
	hs := make([][]gpumem.HistoryEntry, len(a.devs))
	for i, d := range a.devs {
		d.mu.Lock()
		hs[i] = d.history.AppendTo(nil)
		d.mu.Unlock()
	}
	return history.Merge(hs...)
}

// EmptyCache returns every wholly free cached segment to the device and
// unmaps every free chunk of the expandable segments, after waiting for
// the events of pending frees. Memory of private pools still in use by a
// graph is kept.
func (a *Allocator) EmptyCache() error {
	if a.closed.Load() {
		return errClosed()
	}
	for _, d := range a.devs {
		d.mu.Lock()
		if !d.closed && len(d.captures) == 0 {
			d.releaseCached(true)
		}
		d.mu.Unlock()
	}
	return nil
}

// SetOOMHandler installs h, called without any lock held before an
// allocation fails for lack of memory; nil removes it.
func (a *Allocator) SetOOMHandler(h gpumem.OOMHandler) {
	a.hooks.SetHandler(h)
}

// AddOOMObserver adds o, told of every out-of-memory failure after the
// device's lock is released.
func (a *Allocator) AddOOMObserver(o gpumem.OOMObserver) { a.hooks.AddObserver(o) }

// Close waits for every device, returns all memory (including allocations
// not yet freed) and destroys the allocator's events. Later calls fail with
// ErrClosed; a second Close returns nil.
func (a *Allocator) Close() error {
	if a.closed.Swap(true) {
		return nil
	}
	var errs []error
	for _, d := range a.devs {
		d.mu.Lock()
		errs = append(errs, d.closeLocked())
		d.mu.Unlock()
	}
	return errors.Join(errs...)
}

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
	for seg := range d.segments {
		if seg.exp != nil {
			e := seg.exp
			for i, m := range e.mapped {
				if !m {
					continue
				}
				addr := seg.addr.Add(uint64(i) * e.chunk)
				if err := d.a.b.MemUnmap(addr, e.chunk); err != nil {
					errs = append(errs, fmt.Errorf("caching: unmapping %#x: %w", uintptr(addr), err))
				}
				if err := d.a.b.MemRelease(e.handles[i]); err != nil {
					errs = append(errs, fmt.Errorf("caching: releasing physical memory: %w", err))
				}
			}
			if err := d.a.b.MemAddressFree(seg.addr, seg.size); err != nil {
				errs = append(errs, fmt.Errorf("caching: freeing a virtual range: %w", err))
			}
			continue
		}
		if _, err := d.freeSegmentMemory(seg); err != nil {
			errs = append(errs, fmt.Errorf("caching: freeing segment %#x: %w", uintptr(seg.addr), err))
		}
	}
	d.segments = map[*segment]struct{}{}
	d.live = ptrmap.Map[*block]{}
	for _, ev := range d.events {
		if err := d.a.b.EventDestroy(ev); err != nil {
			errs = append(errs, fmt.Errorf("caching: destroying an event: %w", err))
		}
	}
	d.events = nil
	for _, ev := range d.streamEvents {
		if err := d.a.b.EventDestroy(ev); err != nil {
			errs = append(errs, fmt.Errorf("caching: destroying an event: %w", err))
		}
	}
	d.streamEvents = nil
	return errors.Join(errs...)
}
