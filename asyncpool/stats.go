package asyncpool

import (
	"sort"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/history"
)

// Counters are figures of this allocator that MemoryStats has no field for.
type Counters struct {
	ThrottleJoins       int64 `json:"throttle_joins"`         // free stream joined into an allocating stream
	CrossStreamFrees    int64 `json:"cross_stream_frees"`     // frees made on the free stream
	GraphFreedInCapture int64 `json:"graph_freed_in_capture"` // case 1: allocated and freed in one capture
	GraphOwned          int64 `json:"graph_owned"`            // case 2: allocated in a capture, freed outside: the graph owns it
	DeferredFrees       int64 `json:"deferred_frees"`         // case 3: freed inside a capture, held until the graph goes
	GraphReleased       int64 `json:"graph_released"`         // graph-held memory freed after its graph was destroyed
	GraphDropped        int64 `json:"graph_dropped"`          // graph allocations of graphs never launched: nothing to free
	PendingFrees        int   `json:"pending_frees"`          // frees on the free stream not yet known complete
	LiveAllocations     int   `json:"live_allocations"`       // records held (by users or graphs)
}

// Counters returns device dev's counters (zero for a device not used yet).
func (a *Allocator) Counters(dev int) Counters {
	if a == nil {
		return Counters{}
	}
	d := a.existingDevice(dev)
	if d == nil {
		return Counters{}
	}
	d.mu.Lock()
	c := d.ctr
	c.LiveAllocations = d.recs.len()
	d.mu.Unlock()
	c.PendingFrees = int(d.queued.Load())
	return c
}

func (a *Allocator) existingDevice(dev int) *device {
	if dev < 0 || dev >= len(a.devs) {
		return nil
	}
	return a.devs[dev].Load()
}

// Stats returns device dev's statistics in PyTorch's shape. Allocation,
// allocated, requested and active figures count what users hold (requested
// and allocated bytes are equal: the pool's own rounding is not visible);
// a segment is one pool allocation; reserved bytes are the pool's
// PoolReservedMemCurrent and PoolReservedMemHigh, read now; NumDeviceAlloc
// counts MallocFromPoolAsync calls and NumDeviceFree FreeAsync calls;
// LargestFreeBlock is the pool's reserved-but-unused bytes (an upper bound).
// While a capture the allocator knows of is open, the pool's figures are
// those read last (CUDA counts pool queries among the calls that invalidate
// a global-mode capture).
// A device not used yet, and every device after Close, has zero statistics
// (a closed allocator holds nothing).
func (a *Allocator) Stats(dev int) gpumem.MemoryStats {
	if a == nil {
		return gpumem.MemoryStats{}
	}
	d := a.existingDevice(dev)
	if d == nil || a.closed.Load() {
		return gpumem.MemoryStats{}
	}
	d.life.RLock()
	defer d.life.RUnlock()
	d.mu.Lock()
	var st gpumem.MemoryStats
	d.tally.expand(&st)
	d.mu.Unlock()
	if d.closed {
		return st
	}
	var cur, high, used uint64
	var err1, err2, err3 error
	if open, err := d.captureOpen(); err != nil || open {
		// The CUDA driver counts pool queries among the calls that
		// invalidate a capture in global mode: report the figures last
		// read instead.
		d.mu.Lock()
		cur, high, used = d.poolSeen[0], d.poolSeen[1], d.poolSeen[2]
		d.mu.Unlock()
	} else {
		cur, err1 = d.b.MemPoolGetAttribute(d.pool, gpumem.PoolReservedMemCurrent)
		high, err2 = d.b.MemPoolGetAttribute(d.pool, gpumem.PoolReservedMemHigh)
		used, err3 = d.b.MemPoolGetAttribute(d.pool, gpumem.PoolUsedMemCurrent)
		if err1 == nil && err2 == nil && err3 == nil {
			d.mu.Lock()
			d.poolSeen = [3]uint64{cur, high, used}
			d.mu.Unlock()
		}
	}
	if err1 == nil {
		st.ReservedBytes[gpumem.StatAll].Current = int64(cur)
		st.ReservedBytes[gpumem.StatAll].Peak = int64(max(cur, high))
		if err2 != nil {
			st.ReservedBytes[gpumem.StatAll].Peak = int64(cur)
		}
		if err3 == nil && cur > used {
			st.LargestFreeBlock = cur - used
		}
	}
	return st
}

// ResetPeakStats sets every peak of device dev to its current value,
// including the pool's reserved high-water mark.
func (a *Allocator) ResetPeakStats(dev int) {
	if a == nil {
		return
	}
	d := a.existingDevice(dev)
	if d == nil {
		return
	}
	d.life.RLock()
	defer d.life.RUnlock()
	d.mu.Lock()
	d.tally.resetPeaks()
	d.mu.Unlock()
	if !d.closed {
		_ = d.b.MemPoolSetAttribute(d.pool, gpumem.PoolReservedMemHigh, 0)
		_ = d.b.MemPoolSetAttribute(d.pool, gpumem.PoolUsedMemHigh, 0)
	}
}

// Snapshot returns one segment per allocation the allocator knows of: live
// ones ("active_allocated") and those freed but pending release on the free
// stream or held by a graph ("active_pending_free"), each a segment of one
// block, ordered by device and address; with the history and every used
// device's statistics. The pool's reserved-but-unused memory is not listed
// block by block (the driver does not say how it is laid out); Stats gives
// its size.
func (a *Allocator) Snapshot() gpumem.Snapshot {
	if a == nil {
		return gpumem.Snapshot{}
	}
	var snap gpumem.Snapshot
	for _, d := range a.existing() {
		var segs []gpumem.SegmentInfo
		add := func(p gpumem.Ptr, size uint64, stream uintptr, state string) {
			typ := "large"
			if kind(size) == gpumem.StatSmall {
				typ = "small"
			}
			active := size
			alloc := size
			if state != "active_allocated" {
				alloc = 0
			}
			segs = append(segs, gpumem.SegmentInfo{
				Device: d.id, Stream: stream, Addr: p, TotalSize: size,
				AllocatedSize: alloc, ActiveSize: active, RequestedSize: size, SegmentType: typ,
				Blocks: []gpumem.BlockInfo{{Addr: p, Size: size, RequestedSize: size, State: state}},
			})
		}
		d.freeMu.Lock()
		for _, e := range d.fifo {
			add(e.p, e.size, d.freeStream.Handle, "active_pending_free")
		}
		d.freeMu.Unlock()
		d.mu.Lock()
		d.recs.each(func(p gpumem.Ptr, rec record) bool {
			state := "active_allocated"
			if rec.state() != stateLive {
				state = "active_pending_free"
			}
			add(p, rec.size, rec.stream, state)
			return true
		})
		d.mu.Unlock()
		sort.Slice(segs, func(i, j int) bool { return segs[i].Addr < segs[j].Addr })
		snap.Segments = append(snap.Segments, segs...)
		if snap.Stats == nil {
			snap.Stats = map[int]gpumem.MemoryStats{}
		}
		snap.Stats[d.id] = a.Stats(d.id)
	}
	snap.History = a.History()
	return snap
}

// History returns the memory history of every device, oldest first.
func (a *Allocator) History() []gpumem.HistoryEntry {
	if a == nil {
		return nil
	}
	devs := a.existing()
	hs := make([][]gpumem.HistoryEntry, len(devs))
	for i, d := range devs {
		d.mu.Lock()
		hs[i] = d.hist.AppendTo(nil)
		d.mu.Unlock()
	}
	return history.Merge(hs...)
}
