package caching

import (
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
)

// expandable is the mapping state of an expandable segment: a virtual range
// reserved once, with physical chunks mapped where blocks are allocated.
// See doc.go for the policy.
type expandable struct {
	chunk   uint64
	handles []gpumem.MemHandle
	mapped  []bool
	nmapped int
	// sleeping marks the mapped chunks whose physical memory Sleep
	// released (nil until the first Sleep): they stay counted as mapped,
	// with no handle, until Wake maps them back.
	sleeping []bool
}

// mappedWithin returns the mapped bytes within free block b.
func (e *expandable) mappedWithin(b *block) uint64 {
	base := b.seg.addr
	first := uint64(b.addr-base) / e.chunk
	last := (uint64(b.addr-base) + b.size - 1) / e.chunk
	var n uint64
	for i := first; i <= last && int(i) < len(e.mapped); i++ {
		if e.mapped[i] {
			n++
		}
	}
	return min(n*e.chunk, b.size)
}

// initExpandable turns expandable segments on, or off with a message where
// the virtual memory API is unavailable. It runs in New, before the device
// is shared: no lock is needed, and the …Locked functions it calls run with
// the same exclusive access.
func (d *device) initExpandable() {
	if err := d.initGranularity(); err != nil {
		d.disableExpandableLocked(err)
		return
	}
	d.expOn = true
}

// initGranularity reads the device's mapping granularity once, for
// expandable and growable segments; an error says the virtual memory API
// is unavailable.
func (d *device) initGranularity() error {
	if d.gran != 0 {
		return nil
	}
	g, err := d.a.b.MemGranularity(d.id, false)
	if err == nil && g == 0 {
		err = fmt.Errorf("zero granularity: %w", gpumem.ErrNotSupported)
	}
	if err != nil {
		return err
	}
	d.gran = g
	return nil
}

// disableExpandableLocked turns expandable segments off on the device,
// saying why through Options.Logf. d.mu must be held.
func (d *device) disableExpandableLocked(err error) {
	d.expOn = false
	d.expReason = fmt.Sprintf("expandable segments are off on device %d: the backend's virtual memory API is unavailable (%v); using regular segments", d.id, err)
	d.a.logf("caching: %s", d.expReason)
}

// chunkForLocked is the mapping unit of pool p's expandable segments,
// rounded up to the device's granularity. d.mu must be held.
func (d *device) chunkForLocked(p *pool) uint64 {
	c := d.a.opts.ExpandableLargeChunk
	if c == 0 {
		c = LargeBuffer
	}
	if p.small {
		c = d.a.opts.ExpandableSmallChunk
		if c == 0 {
			c = SmallBuffer
		}
	}
	return (c + d.gran - 1) / d.gran * d.gran
}

// allocExpandableLocked serves a miss of an expandable pool: it reserves the
// stream's virtual range on first use, or reports that the range is full.
// d.mu must be held.
func (d *device) allocExpandableLocked(p *pool, size, rounded uint64, s gpumem.Stream) (gpumem.Ptr, *gpumem.OutOfMemoryError, error) {
	if p.exp[s.Handle] != nil {
		return 0, d.oomErrorLocked(size, fmt.Errorf("caching: expandable segment's virtual range is full: %w", gpumem.ErrOutOfMemory)), nil
	}
	chunk := d.chunkForLocked(p)
	va := (2*d.total + chunk - 1) / chunk * chunk
	base, err := d.a.b.MemAddressReserve(va, d.gran)
	if err != nil {
		if errors.Is(err, gpumem.ErrNotSupported) {
			d.disableExpandableLocked(err)
			return d.allocSlowLocked(p, size, rounded, s)
		}
		if errors.Is(err, gpumem.ErrOutOfMemory) {
			return 0, d.oomErrorLocked(size, err), nil
		}
		return 0, nil, fmt.Errorf("caching: reserving an expandable segment on device %d: %w", d.id, err)
	}
	n := va / chunk
	seg := &segment{addr: base, size: va, pool: p, stream: s,
		exp: &expandable{chunk: chunk, handles: make([]gpumem.MemHandle, n), mapped: make([]bool, n)}}
	b := d.newBlockLocked()
	b.addr, b.size, b.stream, b.pool, b.seg = base, va, s, p, seg
	b.tree = p.treeFor(s.Handle, true)
	seg.head = b
	p.exp[s.Handle] = seg
	d.segments[seg] = struct{}{}
	d.stats.Segment.Add(p.statType(), 1)
	d.cacheLocked(b)
	if b := d.getFreeBlockLocked(p, rounded, s.Handle); b != nil {
		return d.allocInExpandableLocked(b, size, rounded, s)
	}
	return 0, d.oomErrorLocked(size, nil), nil
}

// allocInExpandableLocked splits b, maps the chunks it covers, and hands it out.
// d.mu must be held.
func (d *device) allocInExpandableLocked(b *block, size, rounded uint64, s gpumem.Stream) (gpumem.Ptr, *gpumem.OutOfMemoryError, error) {
	d.splitLocked(b, rounded)
	err := d.mapRangeLocked(b)
	if errors.Is(err, gpumem.ErrOutOfMemory) && len(d.captures) == 0 {
		d.stats.NumAllocRetries++
		d.releaseCachedLocked(true)
		err = d.mapRangeLocked(b)
	}
	if err != nil {
		d.mergeAndCacheLocked(b)
		if errors.Is(err, gpumem.ErrOutOfMemory) {
			return 0, d.oomErrorLocked(size, err), nil
		}
		return 0, nil, err
	}
	return d.markAllocatedLocked(b, size), nil, nil
}

// mapRangeLocked maps every unmapped chunk under block b (out of any tree).
// d.mu must be held.
func (d *device) mapRangeLocked(b *block) error {
	seg := b.seg
	e := seg.exp
	first := uint64(b.addr-seg.addr) / e.chunk
	last := (uint64(b.addr-seg.addr) + b.size - 1) / e.chunk
	var need uint64
	for i := first; i <= last; i++ {
		if !e.mapped[i] {
			need += e.chunk
		}
	}
	if need == 0 {
		return nil
	}
	reserved := uint64(d.stats.ReservedBytes[gpumem.StatAll].Current)
	if d.capped && reserved+need > d.limit {
		d.unmapForGrowthLocked(reserved + need - d.limit)
		reserved = uint64(d.stats.ReservedBytes[gpumem.StatAll].Current)
		if reserved+need > d.limit {
			return fmt.Errorf("caching: mapping %s more would exceed the memory fraction's cap of %s: %w",
				gpumem.FormatBytes(need), gpumem.FormatBytes(d.limit), gpumem.ErrOutOfMemory)
		}
	}
	// Chunks unmapped to make room keep their physical memory for this
	// mapping: one unmap and one map move a chunk, instead of also a
	// release and a create. What is not reused is released at the end.
	d.keepChunk, d.kept = e.chunk, d.kept[:0]
	defer d.releaseKeptLocked()
	if peak := d.highWater; d.a.opts.ReleaseBeforeGrow && reserved+need > peak {
		d.releaseForGrowthLocked(reserved + need - peak)
	}
	st := seg.pool.statType()
	// Access is granted once per run of consecutive newly mapped chunks.
	runStart := uint64(0)
	inRun := false
	grant := func(end uint64) error {
		if !inRun {
			return nil
		}
		inRun = false
		addr := seg.addr.Add(runStart * e.chunk)
		size := (end - runStart) * e.chunk
		if err := d.a.b.MemSetAccess(addr, size, d.id, gpumem.AccessReadWrite); err != nil {
			for j := runStart; j < end; j++ {
				d.unmapChunkLocked(seg, j, false)
			}
			return fmt.Errorf("caching: granting access to %#x: %w", uintptr(addr), err)
		}
		return nil
	}
	for i := first; i <= last; i++ {
		if e.mapped[i] {
			if err := grant(i); err != nil {
				return err
			}
			continue
		}
		addr := seg.addr.Add(i * e.chunk)
		var h gpumem.MemHandle
		if n := len(d.kept); n > 0 {
			h, d.kept = d.kept[n-1], d.kept[:n-1]
		} else {
			var err error
			h, err = d.a.b.MemCreate(d.id, e.chunk)
			if err != nil {
				_ = grant(i)
				return fmt.Errorf("caching: creating %s of physical memory on device %d: %w", gpumem.FormatBytes(e.chunk), d.id, err)
			}
		}
		if err := d.a.b.MemMap(addr, e.chunk, 0, h); err != nil {
			_ = d.a.b.MemRelease(h)
			_ = grant(i)
			return fmt.Errorf("caching: mapping %#x: %w", uintptr(addr), err)
		}
		e.handles[i], e.mapped[i] = h, true
		e.nmapped++
		d.addReservedLocked(st, int64(e.chunk))
		d.stats.NumDeviceAlloc++
		d.recordLocked(gpumem.ActionSegmentMap, seg.stream.Handle, addr, e.chunk)
		if !inRun {
			runStart, inRun = i, true
		}
	}
	return grant(last + 1)
}

// unmapChunkLocked unmaps chunk i of seg and releases its physical memory, or,
// with keep set and a mapping of the same chunk size underway, keeps it in
// d.kept for that mapping. It reports whether the chunk was unmapped.
// d.mu must be held.
func (d *device) unmapChunkLocked(seg *segment, i uint64, keep bool) bool {
	e := seg.exp
	addr := seg.addr.Add(i * e.chunk)
	if d.a.b.MemUnmap(addr, e.chunk) != nil {
		return false
	}
	if keep && d.keepChunk == e.chunk {
		d.kept = append(d.kept, e.handles[i])
	} else if d.a.b.MemRelease(e.handles[i]) != nil {
		// The handle leaks on the device's side; the range stays usable.
		d.a.logf("caching: releasing physical memory at %#x failed", uintptr(addr))
	}
	e.handles[i], e.mapped[i] = gpumem.MemHandle{}, false
	e.nmapped--
	d.stats.ReservedBytes.Add(seg.pool.statType(), -int64(e.chunk))
	d.stats.NumDeviceFree++
	d.recordLocked(gpumem.ActionSegmentUnmap, seg.stream.Handle, addr, e.chunk)
	return true
}

// releaseKeptLocked releases the physical memory that a mapping kept but did not
// reuse, and ends the mapping's keeping. d.mu must be held.
func (d *device) releaseKeptLocked() {
	for _, h := range d.kept {
		if d.a.b.MemRelease(h) != nil {
			d.a.logf("caching: releasing physical memory failed")
		}
	}
	d.kept, d.keepChunk = d.kept[:0], 0
}

// unmapFreeLocked unmaps up to limit bytes of chunks lying wholly inside free
// blocks of seg. The caller has synchronized the device. d.mu must be held.
func (d *device) unmapFreeLocked(seg *segment, limit uint64) uint64 {
	e := seg.exp
	var freed uint64
	for b := seg.head; b != nil && freed < limit; b = b.next {
		if !b.inTree {
			continue
		}
		off := uint64(b.addr - seg.addr)
		first := (off + e.chunk - 1) / e.chunk
		end := (off + b.size) / e.chunk // exclusive
		for i := first; i < end && freed < limit; i++ {
			if e.mapped[i] && d.unmapChunkLocked(seg, i, true) {
				freed += e.chunk
			}
		}
	}
	return freed
}

// unmapForGrowthLocked unmaps free chunks of the device's expandable segments
// until need bytes are unmapped. d.mu must be held.
func (d *device) unmapForGrowthLocked(need uint64) {
	var cands []*segment
	for seg := range d.segments {
		if seg.exp != nil && seg.exp.nmapped > 0 {
			cands = append(cands, seg)
		}
	}
	if len(cands) == 0 {
		return
	}
	synced := false
	var freed uint64
	for _, seg := range cands {
		if freed >= need {
			break
		}
		if !synced {
			// Unmapping is not stream-ordered: the work that used the
			// memory must be complete.
			d.syncAllLocked()
			synced = true
		}
		freed += d.unmapFreeLocked(seg, need-freed)
	}
}

// releaseEmptyExpandableLocked frees the virtual ranges of expandable segments
// with nothing mapped. d.mu must be held.
func (d *device) releaseEmptyExpandableLocked() {
	for seg := range d.segments {
		if seg.exp == nil || seg.exp.nmapped > 0 || !seg.head.inTree || seg.head.next != nil {
			continue
		}
		if d.a.b.MemAddressFree(seg.addr, seg.size) != nil {
			continue
		}
		d.takeFromTreeLocked(seg.head.tree, seg.head)
		delete(seg.pool.exp, seg.stream.Handle)
		delete(d.segments, seg)
		d.stats.Segment.Add(seg.pool.statType(), -1)
		d.recycleLocked(seg.head)
	}
}

// ExpandableActive reports whether expandable segments are in use on every
// device, and if not, why.
func (a *Allocator) ExpandableActive() (bool, string) {
	if !a.opts.ExpandableSegments {
		return false, "expandable segments are not enabled (expandable_segments:True)"
	}
	for _, d := range a.devs {
		d.mu.Lock()
		on, why := d.expOn, d.expReason
		d.mu.Unlock()
		if !on {
			return false, why
		}
	}
	return true, "expandable segments are active"
}
