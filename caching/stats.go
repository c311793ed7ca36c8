// Statistics, the memory history, snapshots and out-of-memory reports.
//
// See doc.go for an overview.

package caching

import (
	"sort"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/history"
)

// inc and dec update a statistic of all pools and of pool st; they are
// gpumem.StatArray.Add unrolled for the hot path.
func inc(a *gpumem.StatArray, st int, n int64) {
	x, y := &a[gpumem.StatAll], &a[st]
	x.Current += n
	x.Allocated += n
	if x.Current > x.Peak {
		x.Peak = x.Current
	}
	y.Current += n
	y.Allocated += n
	if y.Current > y.Peak {
		y.Peak = y.Current
	}
}

func dec(a *gpumem.StatArray, st int, n int64) {
	x, y := &a[gpumem.StatAll], &a[st]
	x.Current -= n
	x.Freed += n
	y.Current -= n
	y.Freed += n
}

// Stats returns the statistics of device dev (zero for an unknown device,
// and for every device after Close: a closed allocator holds nothing).
func (a *Allocator) Stats(dev int) gpumem.MemoryStats {
	if a == nil {
		return gpumem.MemoryStats{}
	}
	if dev < 0 || dev >= len(a.devs) {
		return gpumem.MemoryStats{}
	}
	d := a.devs[dev]
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return gpumem.MemoryStats{}
	}
	return d.statsLocked()
}

// statsLocked returns the device's statistics with the largest free block
// and the fragmentation computed from its segments. d.mu must be held.
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
	if a == nil {
		return
	}
	if dev < 0 || dev >= len(a.devs) {
		return
	}
	d := a.devs[dev]
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats.ResetPeaks()
}

// recordLocked adds an event to the device's memory history.
// d.mu must be held.
func (d *device) recordLocked(action gpumem.HistoryAction, stream uintptr, addr gpumem.Ptr, size uint64) {
	d.history.Add(action, d.id, stream, addr, size)
}

// History returns the memory history of every device, oldest first: at
// most Options.HistorySize entries per device.
func (a *Allocator) History() []gpumem.HistoryEntry {
	if a == nil {
		return nil
	}
	hs := make([][]gpumem.HistoryEntry, len(a.devs))
	for i, d := range a.devs {
		d.mu.Lock()
		hs[i] = d.history.AppendTo(nil)
		d.mu.Unlock()
	}
	return history.Merge(hs...)
}

// Snapshot returns every segment with its blocks, the memory history and the
// statistics of every device. It marshals to JSON.
func (a *Allocator) Snapshot() gpumem.Snapshot {
	if a == nil {
		return gpumem.Snapshot{}
	}
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

// oomErrorLocked describes an out-of-memory failure (d.mu held).
// d.mu must be held.
func (d *device) oomErrorLocked(size uint64, cause error) *gpumem.OutOfMemoryError {
	free, total, err := d.a.b.MemInfo(d.id)
	if err != nil {
		free, total = 0, d.total
	}
	s := &d.stats
	reserved := uint64(s.ReservedBytes[gpumem.StatAll].Current)
	allocated := uint64(s.AllocatedBytes[gpumem.StatAll].Current)
	e := &gpumem.OutOfMemoryError{
		Allocator: "caching", Device: d.id, Requested: size, Capacity: total, Free: free,
		Allocated: allocated, Reserved: reserved, Largest: d.largestFreeLocked(), Limit: d.limit, Err: cause,
	}
	st := d.statsLocked()
	st.NumOOMs++ // this failure, counted by the caller after
	e.Stats = &st
	// Others is filled by the caller once d.mu is released: the hook may
	// open NVML or ROCm SMI, which must not stall the device's other calls.
	switch {
	case d.capped && reserved+segmentSize(size) > d.limit:
		e.Hint = "The memory fraction's cap is reached: raise per_process_memory_fraction in GPUMEM_ALLOC_CONF or free memory"
	case reserved > allocated && reserved-allocated >= reserved/5 && !d.expOn:
		e.Hint = "If reserved but unallocated memory is large try GPUMEM_ALLOC_CONF=expandable_segments:True (or max_split_size_mb) to avoid fragmentation"
	default:
		e.Hint = "Free memory held elsewhere on the device, or reduce the working set"
	}
	return e
}

// largestFreeLocked is the largest cached block of the default pools.
// d.mu must be held.
func (d *device) largestFreeLocked() uint64 {
	var m uint64
	for _, p := range []*pool{d.small, d.large} {
		for _, t := range p.trees {
			if b := t.max(); b != nil {
				sz := b.size
				if b.seg.exp != nil {
					sz = b.seg.exp.mappedWithin(b)
				}
				m = max(m, sz)
			}
		}
	}
	return m
}
