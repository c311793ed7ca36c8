// The allocation path: best fit, splitting, new segments, and the OOM handler.
//
// See doc.go for an overview.

package caching

import (
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
)

// Allocate returns size bytes usable in stream order on s. See the package
// documentation for the allocation path.
func (a *Allocator) Allocate(size uint64, s gpumem.Stream) (gpumem.Ptr, error) {
	if a == nil {
		return 0, errNil("Allocate")
	}
	return a.allocate(size, s, false)
}

// allocate is Allocate; keep tags the block KeepOnSleep.
func (a *Allocator) allocate(size uint64, s gpumem.Stream, keep bool) (gpumem.Ptr, error) {
	d, err := a.device(s.Device)
	if err != nil {
		return 0, err
	}
	if size == 0 {
		return 0, fmt.Errorf("caching: zero-byte allocation: %w", gpumem.ErrInvalidValue)
	}
	if size > maxRequest {
		return 0, fmt.Errorf("caching: allocation of %d bytes is impossibly large: %w", size, gpumem.ErrInvalidValue)
	}
	rounded := roundSize(&a.table, size)
	for attempt := 0; ; attempt++ {
		d.mu.Lock()
		if !d.closed && !d.streamKnownLocked(s) {
			if err := d.checkStreamUnlocked(s); err != nil {
				d.mu.Unlock()
				return 0, err
			}
		}
		if d.closed || d.asleep {
			closed := d.closed
			d.mu.Unlock()
			if closed {
				return 0, errClosed()
			}
			return 0, errAsleep(d.id)
		}
		p, oom, err := d.allocLocked(size, rounded, s)
		if oom == nil {
			if keep && err == nil {
				if b, _ := d.live.Get(uint64(p)); b != nil {
					b.keep = true
				}
			}
			d.mu.Unlock()
			return p, err
		}
		if a.hooks.Handler() != nil {
			d.mu.Unlock()
			if a.hooks.Retry(d.id, size, attempt) {
				continue
			}
			d.mu.Lock()
		}
		d.stats.NumOOMs++
		d.recordLocked(gpumem.ActionOOM, s.Handle, 0, size)
		d.mu.Unlock()
		oom.NoteOtherProcesses(a.b) // outside d.mu: it may open a telemetry library
		a.hooks.Notify(func() *gpumem.OutOfMemoryError { return oom })
		return 0, oom
	}
}

// allocLocked runs the allocation path with d.mu held. It returns an
// *OutOfMemoryError (and no other error) when memory ran out, so that the
// caller can run the OOM handler without the lock. d.mu must be held.
func (d *device) allocLocked(size, rounded uint64, s gpumem.Stream) (gpumem.Ptr, *gpumem.OutOfMemoryError, error) {
	if size > d.total {
		return 0, d.oomErrorLocked(size, nil), nil
	}
	var pp *privatePool
	if len(d.captures) > 0 {
		pp = d.capturePoolLocked(s)
	} else if d.npending > 0 && !d.capturingLocked(s) {
		d.processEventsLocked()
	}
	p := d.poolFor(rounded, pp)
	if ptr, ok := d.takeAndSplitLocked(p, size, rounded, s.Handle); ok {
		return ptr, nil, nil
	}
	if b := d.getFreeBlockLocked(p, rounded, s.Handle); b != nil {
		if b.seg.exp != nil {
			return d.serveExpandableLocked(p, b, size, rounded, s)
		}
		return d.finishAllocLocked(b, size, rounded), nil, nil
	}
	return d.allocSlowLocked(p, size, rounded, s)
}

func (d *device) poolFor(rounded uint64, pp *privatePool) *pool {
	small := rounded <= SmallSize
	if pp != nil {
		if small {
			return pp.small
		}
		return pp.large
	}
	if small {
		return d.small
	}
	return d.large
}

// getFreeBlockLocked is PyTorch's get_free_block: the smallest cached block of the
// stream that fits, subject to the max_split_size rules; removed from its tree.
// d.mu must be held.
func (d *device) getFreeBlockLocked(p *pool, rounded uint64, stream uintptr) *block {
	if d.gc {
		p.calls++
	}
	t := p.treeFor(stream, false)
	if t == nil {
		return nil
	}
	b := t.lowerBound(rounded)
	if b == nil || !d.usableLocked(b, rounded) {
		return nil
	}
	d.takeFromTreeLocked(t, b)
	return b
}

// takeAndSplitLocked is the common cache hit in one descent: the best-fitting
// block (of a regular segment, or of an expandable one whose chunks under
// the request are mapped) that is split, when the remainder orders where
// the block did (after the block's predecessor), takes the block's place in
// the tree instead of a removal and an insertion. ok is false when the hit
// is not of that kind (or there is none); nothing has changed then.
// d.mu must be held.
func (d *device) takeAndSplitLocked(p *pool, size, rounded uint64, stream uintptr) (gpumem.Ptr, bool) {
	t := p.treeFor(stream, false)
	if t == nil {
		return 0, false
	}
	b, link, pred := t.lowerBoundAt(rounded)
	if b == nil || !d.usableLocked(b, rounded) || !d.shouldSplitLocked(b, rounded) {
		return 0, false
	}
	if b.seg.exp != nil && !b.seg.exp.mappedPrefix(b, rounded) {
		return 0, false // chunks to map first: the expandable path
	}
	restSize, restAddr := b.size-rounded, b.addr.Add(rounded)
	if pred != nil && !keyLess(pred, restSize, uintptr(restAddr)) {
		return 0, false
	}
	if d.gc {
		p.calls++
	}
	if b.counted {
		b.counted = false
		st := b.pool.statType()
		dec(&d.stats.InactiveSplit, st, 1)
		dec(&d.stats.InactiveSplitBytes, st, int64(b.size))
	}
	rest := d.newBlockLocked()
	rest.addr, rest.size = restAddr, restSize
	rest.stream, rest.pool, rest.tree, rest.seg = b.stream, b.pool, b.tree, b.seg
	rest.prev, rest.next = b, b.next
	if b.next != nil {
		b.next.prev = rest
	}
	b.next = rest
	b.size = rounded
	t.replace(link, b, rest)
	rest.gcBase = p.calls
	if b.seg.exp == nil { // as cacheLocked counts
		rest.counted = true
		st := p.statType()
		inc(&d.stats.InactiveSplit, st, 1)
		inc(&d.stats.InactiveSplitBytes, st, int64(rest.size))
	}
	return d.markAllocatedLocked(b, size), true
}

// usableLocked applies the oversize rules to a candidate that fits.
// d.mu must be held.
func (d *device) usableLocked(b *block, rounded uint64) bool {
	if b.seg.exp != nil {
		return true
	}
	ms := d.maxSplit
	if ms == 0 {
		return true
	}
	if rounded < ms && b.size >= ms {
		return false // no oversized block for a small request
	}
	if rounded >= ms && b.size >= rounded+LargeBuffer {
		return false // nor a much larger one for an oversize request
	}
	return true
}

// takeFromTreeLocked removes the free block b from its tree t and uncounts
// it from inactive_split. d.mu must be held.
func (d *device) takeFromTreeLocked(t *tree, b *block) {
	t.remove(b)
	if b.counted {
		b.counted = false
		st := b.pool.statType()
		dec(&d.stats.InactiveSplit, st, 1)
		dec(&d.stats.InactiveSplitBytes, st, int64(b.size))
	}
}

// cacheLocked puts a free block into its pool's tree. d.mu must be held.
func (d *device) cacheLocked(b *block) {
	t := b.tree
	b.gcBase = b.pool.calls
	t.insert(b)
	if b.isSplit() && b.seg.exp == nil {
		b.counted = true
		st := b.pool.statType()
		inc(&d.stats.InactiveSplit, st, 1)
		inc(&d.stats.InactiveSplitBytes, st, int64(b.size))
	}
}

// newBlockLocked returns a block from the device's spares, or a new one.
// d.mu must be held.
func (d *device) newBlockLocked() *block {
	if n := len(d.spare); n > 0 {
		b := d.spare[n-1]
		d.spare = d.spare[:n-1]
		return b
	}
	return &block{}
}

// recycleLocked clears b and keeps it as a spare for newBlockLocked.
// d.mu must be held.
func (d *device) recycleLocked(b *block) {
	b.prev, b.next, b.seg, b.pool, b.tree = nil, nil, nil, nil, nil
	b.allocated, b.inTree, b.counted = false, false, false
	b.events, b.requested = 0, 0
	b.uses = b.uses[:0]
	d.spare = append(d.spare, b)
}

// shouldSplitLocked is PyTorch's should_split. d.mu must be held.
func (d *device) shouldSplitLocked(b *block, rounded uint64) bool {
	remaining := b.size - rounded
	if b.pool.small || b.seg.exp != nil {
		return remaining >= MinBlockSize
	}
	ms := d.maxSplit
	return (ms == 0 || rounded < ms) && remaining > SmallSize
}

// finishAllocLocked splits b if worthwhile, marks it allocated and counts it.
// d.mu must be held.
func (d *device) finishAllocLocked(b *block, size, rounded uint64) gpumem.Ptr {
	d.splitLocked(b, rounded)
	return d.markAllocatedLocked(b, size)
}

// splitLocked cuts b (out of any tree) to rounded bytes when worthwhile, caching
// the remainder. d.mu must be held.
func (d *device) splitLocked(b *block, rounded uint64) {
	if d.shouldSplitLocked(b, rounded) {
		rest := d.newBlockLocked()
		rest.addr = b.addr.Add(rounded)
		rest.size = b.size - rounded
		rest.stream = b.stream
		rest.pool = b.pool
		rest.tree = b.tree
		rest.seg = b.seg
		rest.prev = b
		rest.next = b.next
		if b.next != nil {
			b.next.prev = rest
		}
		b.next = rest
		b.size = rounded
		d.cacheLocked(rest)
	}
}

// markAllocatedLocked hands b out for a request of size bytes: records it
// in the address table, counts it and records it in the history. It
// returns b's address. d.mu must be held.
func (d *device) markAllocatedLocked(b *block, size uint64) gpumem.Ptr {
	b.allocated = true
	b.keep = false
	b.requested = size
	d.live.Insert(uint64(b.addr), b)
	st := b.pool.statType()
	s := &d.stats
	inc(&s.Allocation, st, 1)
	inc(&s.AllocatedBytes, st, int64(b.size))
	if a := uint64(s.AllocatedBytes[gpumem.StatAll].Current); a > d.allocHigh {
		d.allocHigh = a
	}
	inc(&s.Active, st, 1)
	inc(&s.ActiveBytes, st, int64(b.size))
	inc(&s.RequestedBytes, st, int64(size))
	if d.history.On() {
		d.recordLocked(gpumem.ActionAlloc, b.stream.Handle, b.addr, b.size)
	}
	return b.addr
}

// allocSlowLocked handles a cache miss: cross-stream reuse, garbage collection, a
// new segment, and the out-of-memory retries. d.mu must be held.
func (d *device) allocSlowLocked(p *pool, size, rounded uint64, s gpumem.Stream) (gpumem.Ptr, *gpumem.OutOfMemoryError, error) {
	opts := &d.a.opts
	if d.expOn && p.private == nil {
		return d.allocExpandableLocked(p, size, rounded, s)
	}
	if opts.CrossStreamReuse && len(d.captures) == 0 {
		if b, err := d.crossStreamBlockLocked(p, rounded, s); err != nil {
			return 0, nil, err
		} else if b != nil {
			return d.finishAllocLocked(b, size, rounded), nil, nil
		}
	}
	if opts.GarbageCollectionThreshold > 0 {
		d.garbageCollectLocked()
	}
	segSize := d.segmentSizeLocked(p, rounded)
	if seg := d.growCandidateLocked(p, segSize, s.Handle); seg != nil {
		// Growing a wholly free segment in place adds fewer bytes than a
		// new segment and spares releasing the old one. On failure (out
		// of memory) a new segment is tried, with its retries.
		if b, err := d.growSegmentLocked(seg, segSize); err == nil {
			return d.finishAllocLocked(b, size, rounded), nil, nil
		}
	}
	b, err := d.newSegmentLocked(p, segSize, s)
	if natural := pytorchSegmentSize(p, rounded); errors.Is(err, gpumem.ErrOutOfMemory) && segSize > natural {
		// The enlarged segment does not fit: PyTorch's size may.
		segSize = natural
		b, err = d.newSegmentLocked(p, segSize, s)
	}
	if errors.Is(err, gpumem.ErrOutOfMemory) {
		// Free oversize cached blocks, then every unsplit cached block, and retry.
		if d.releaseAvailableLocked(p, rounded, s.Handle) {
			b, err = d.newSegmentLocked(p, segSize, s)
		}
		if errors.Is(err, gpumem.ErrOutOfMemory) && len(d.captures) == 0 {
			d.stats.NumAllocRetries++
			_ = d.releaseCachedLocked(true) // released or not, the segment is tried again
			b, err = d.newSegmentLocked(p, segSize, s)
		}
	}
	if err != nil {
		if errors.Is(err, gpumem.ErrOutOfMemory) {
			return 0, d.oomErrorLocked(size, err), nil
		}
		return 0, nil, err
	}
	return d.finishAllocLocked(b, size, rounded), nil, nil
}

// newSegmentLocked takes a regular segment of segSize from Upstream for pool p and
// returns its single block, out of any tree. Out-of-memory errors (from the
// device or the memory fraction) match gpumem.ErrOutOfMemory.
// d.mu must be held.
func (d *device) newSegmentLocked(p *pool, segSize uint64, s gpumem.Stream) (*block, error) {
	if err := d.makeRoomLocked(segSize); err != nil {
		return nil, err
	}
	var (
		ptr gpumem.Ptr
		g   *growable
		err error
	)
	if d.growableForLocked(p, segSize) {
		ptr, g, err = d.allocGrowableLocked(segSize)
		if errors.Is(err, gpumem.ErrNotSupported) {
			d.disableGrowableLocked(err)
		}
	}
	if g == nil && !errors.Is(err, gpumem.ErrOutOfMemory) {
		ptr, err = d.a.upstream.Alloc(d.id, segSize)
	}
	if err != nil {
		return nil, fmt.Errorf("caching: new segment of %s on device %d: %w", gpumem.FormatBytes(segSize), d.id, err)
	}
	if ptr == 0 {
		return nil, fmt.Errorf("caching: upstream returned a null segment: %w", gpumem.ErrInvalidValue)
	}
	seg := &segment{addr: ptr, size: segSize, pool: p, stream: s, grow: g}
	if h := d.a.opts.OnNewSegment; h != nil {
		if err := h(d.id, ptr, segSize); err != nil {
			_, _ = d.freeSegmentMemoryLocked(seg)
			return nil, fmt.Errorf("caching: new segment hook: %w", err)
		}
	}
	b := d.newBlockLocked()
	b.addr, b.size, b.stream, b.pool, b.seg = ptr, segSize, s, p, seg
	b.tree = p.treeFor(s.Handle, true)
	seg.head = b
	d.segments[seg] = struct{}{}
	if p.private != nil {
		p.private.segments++
	}
	st := p.statType()
	d.stats.Segment.Add(st, 1)
	d.addReservedLocked(st, int64(segSize))
	d.stats.NumDeviceAlloc++
	d.recordLocked(gpumem.ActionSegmentAlloc, s.Handle, ptr, segSize)
	return b, nil
}

// segmentSizeLocked is the size of a new regular segment for a request of
// rounded bytes from pool p: PyTorch's sizes, with small segments of
// Options.SmallSegment and large ones of at least Options.MinLargeSegment.
// d.mu must be held.
func (d *device) segmentSizeLocked(p *pool, rounded uint64) uint64 {
	o := &d.a.opts
	if p.small {
		if o.SmallSegment > 0 {
			return o.SmallSegment
		}
		return SmallBuffer
	}
	s := segmentSize(rounded)
	m := o.MinLargeSegment
	if k := o.SegmentDivisor; k > 0 {
		// No more than a k-th of what the device already holds: a small
		// workload is not rounded up to segments sized for a large one.
		r := uint64(d.stats.ReservedBytes[gpumem.StatAll].Current) / uint64(k)
		r = (r + RoundLarge - 1) &^ (RoundLarge - 1)
		m = min(m, max(r, LargeBuffer))
	}
	if m > s {
		s = m
	}
	return s
}

// pytorchSegmentSize is PyTorch's segment size for a request of rounded
// bytes from pool p.
func pytorchSegmentSize(p *pool, rounded uint64) uint64 {
	if p.small {
		return SmallBuffer
	}
	return segmentSize(rounded)
}

// SetOOMHandler installs h, called without any lock held before an
// allocation fails for lack of memory; nil removes it.
func (a *Allocator) SetOOMHandler(h gpumem.OOMHandler) {
	if a == nil {
		return
	}
	a.hooks.SetHandler(h)
}

// AddOOMObserver adds o, told of every out-of-memory failure after the
// device's lock is released.
func (a *Allocator) AddOOMObserver(o gpumem.OOMObserver) {
	if a == nil {
		return
	}
	a.hooks.AddObserver(o)
}
