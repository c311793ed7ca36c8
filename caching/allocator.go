package caching

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/history"
	"github.com/gpumem/gpumem/internal/oomhooks"
	"github.com/gpumem/gpumem/internal/ptrmap"
)

// PoolID names a private memory pool used by graph captures. Captures that
// pass the same PoolID share one pool.
type PoolID uint64

// block is a range of a segment: allocated, pending (freed, awaiting
// events of other streams) or free (in its pool's tree for its stream).
type block struct {
	addr      gpumem.Ptr
	size      uint64
	requested uint64
	stream    gpumem.Stream // the stream whose pool the block returns to
	pool      *pool
	tree      *tree // the tree of pool and stream that the block is cached in when free
	seg       *segment
	prev      *block // neighbours in address order within the segment
	next      *block

	allocated bool
	inTree    bool
	counted   bool // counted in inactive_split while in the tree
	events    int  // outstanding stream-use events
	uses      []gpumem.Stream
	gcBase    uint64 // pool.calls when the block was cached

	left, right *block // treap links
	prio        uint32
}

func (b *block) isSplit() bool { return b.prev != nil || b.next != nil }

// segment is one regular device allocation, or one expandable virtual range.
type segment struct {
	addr   gpumem.Ptr
	size   uint64
	pool   *pool
	stream gpumem.Stream
	head   *block
	exp    *expandable // non-nil for an expandable segment
	grow   *growable   // non-nil for a growable segment
}

// pool is a set of free blocks of one kind (small or large), per stream.
type pool struct {
	small   bool
	st      int          // gpumem.StatSmall or gpumem.StatLarge
	private *privatePool // nil for the device's default pools
	trees   map[uintptr]*tree
	exp     map[uintptr]*segment // expandable segment per stream
	calls   uint64               // free-block searches, the clock of garbage collection

	lastStream uintptr
	lastTree   *tree
}

func newPool(small bool, pp *privatePool) *pool {
	st := gpumem.StatLarge
	if small {
		st = gpumem.StatSmall
	}
	return &pool{small: small, st: st, private: pp, trees: map[uintptr]*tree{}, exp: map[uintptr]*segment{}}
}

func (p *pool) statType() int { return p.st }

// treeFor returns the stream's tree, creating it when create is set.
func (p *pool) treeFor(stream uintptr, create bool) *tree {
	if p.lastTree != nil && p.lastStream == stream {
		return p.lastTree
	}
	t := p.trees[stream]
	if t == nil {
		if !create {
			return nil
		}
		t = &tree{}
		p.trees[stream] = t
	}
	p.lastStream, p.lastTree = stream, t
	return t
}

// privatePool holds the memory of graph captures (PyTorch's graph pools).
type privatePool struct {
	id       PoolID
	small    *pool
	large    *pool
	users    int  // captures and graphs holding the pool
	segments int  // live segments
	released bool // ReleasePool called for every user: free segments as they empty
}

type pendingEvent struct {
	ev gpumem.Event
	b  *block
}

type capture struct {
	stream gpumem.Stream
	id     uint64 // backend capture id; 0 until known
	pool   *privatePool
}

// device is the per-device state, guarded by mu.
type device struct {
	mu    sync.Mutex
	a     *Allocator
	id    int
	total uint64 // device capacity
	limit uint64 // memory fraction cap; 0 none

	small, large *pool
	private      map[PoolID]*privatePool
	live         ptrmap.Map[*block] // allocated and pending blocks, by address
	segments     map[*segment]struct{}
	stats        gpumem.MemoryStats
	spare        []*block

	pending      map[uintptr][]pendingEvent // per use stream, in record order
	npending     int
	deferred     []*block // freed during capture; events recorded once captures end
	events       []gpumem.Event
	streamEvents map[uintptr]gpumem.Event // for cross-stream reuse
	captures     []capture

	expOn     bool
	expReason string
	growOn    bool // growable segments on
	gran      uint64
	keepChunk uint64             // while a mapping runs: the chunk size whose unmapped handles it reuses
	kept      []gpumem.MemHandle // handles unmapped for that mapping, not yet reused

	history history.Ring // the most recent events (Options.HistorySize)

	highWater uint64 // reserved bytes' high-water mark for release before growth (ResetPeakStats leaves it)
	allocHigh uint64 // allocated bytes' high-water mark (ResetPeakStats leaves it)

	gc       bool   // garbage collection on: count free-block searches
	maxSplit uint64 // Options.MaxSplitSize
	closed   bool
}

// Allocator is a caching allocator with PyTorch's semantics over any
// gpumem.Backend. See the package documentation for the design.
type Allocator struct {
	b        gpumem.Backend
	opts     Options
	table    [numIntervals]int
	upstream Upstream
	devs     []*device
	closed   atomic.Bool

	hooks    oomhooks.Hooks
	nextPool atomic.Uint64
	logOnce  sync.Once
}

type backendUpstream struct{ b gpumem.Backend }

func (u backendUpstream) Alloc(dev int, size uint64) (gpumem.Ptr, error) {
	return u.b.Malloc(dev, size)
}
func (u backendUpstream) Free(dev int, p gpumem.Ptr) error { return u.b.Free(dev, p) }

// New returns an allocator over b configured by opts. It asks b for its
// devices and their capacities; it allocates nothing until asked.
func New(b gpumem.Backend, opts Options) (*Allocator, error) {
	if b == nil {
		return nil, fmt.Errorf("caching: nil backend: %w", gpumem.ErrInvalidValue)
	}
	table, err := opts.validate()
	if err != nil {
		return nil, err
	}
	n, err := b.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("caching: counting devices: %w", err)
	}
	a := &Allocator{b: b, opts: opts, table: table, upstream: opts.Upstream}
	if a.upstream == nil {
		a.upstream = backendUpstream{b}
	}
	for i := 0; i < n; i++ {
		_, total, err := b.MemInfo(i)
		if err != nil {
			return nil, fmt.Errorf("caching: device %d memory info: %w", i, err)
		}
		d := &device{
			a: a, id: i, total: total,
			small: newPool(true, nil), large: newPool(false, nil),
			private:  map[PoolID]*privatePool{},
			segments: map[*segment]struct{}{}, pending: map[uintptr][]pendingEvent{},
			streamEvents: map[uintptr]gpumem.Event{},
		}
		if opts.PerProcessMemoryFraction > 0 {
			d.limit = uint64(opts.PerProcessMemoryFraction * float64(total))
		}
		d.gc = opts.GarbageCollectionThreshold > 0
		d.maxSplit = opts.MaxSplitSize
		d.history = history.New(opts.HistorySize)
		if opts.ExpandableSegments {
			d.initExpandable()
		}
		if opts.GrowSegments && opts.Upstream == nil {
			d.initGrowable()
		}
		a.devs = append(a.devs, d)
	}
	return a, nil
}

func (a *Allocator) logf(format string, args ...any) {
	if a.opts.Logf != nil {
		a.opts.Logf(format, args...)
	}
}

func (a *Allocator) device(dev int) (*device, error) {
	if a.closed.Load() {
		return nil, fmt.Errorf("caching: allocator closed: %w", gpumem.ErrClosed)
	}
	if dev < 0 || dev >= len(a.devs) {
		return nil, fmt.Errorf("caching: device %d out of range (%d devices): %w", dev, len(a.devs), gpumem.ErrInvalidValue)
	}
	return a.devs[dev], nil
}

func errClosed() error { return fmt.Errorf("caching: allocator closed: %w", gpumem.ErrClosed) }

// Allocate returns size bytes usable in stream order on s. See the package
// documentation for the allocation path.
func (a *Allocator) Allocate(size uint64, s gpumem.Stream) (gpumem.Ptr, error) {
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
		if d.closed {
			d.mu.Unlock()
			return 0, errClosed()
		}
		p, oom, err := d.allocLocked(size, rounded, s)
		if oom == nil {
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
		d.record(gpumem.ActionOOM, s.Handle, 0, size)
		d.mu.Unlock()
		a.hooks.Notify(func() *gpumem.OutOfMemoryError { return oom })
		return 0, oom
	}
}

// allocLocked runs the allocation path with d.mu held. It returns an
// *OutOfMemoryError (and no other error) when memory ran out, so that the
// caller can run the OOM handler without the lock.
func (d *device) allocLocked(size, rounded uint64, s gpumem.Stream) (gpumem.Ptr, *gpumem.OutOfMemoryError, error) {
	if size > d.total {
		return 0, d.oomError(size, nil), nil
	}
	var pp *privatePool
	if len(d.captures) > 0 {
		pp = d.capturePool(s)
	} else if d.npending > 0 && !d.capturing(s) {
		d.processEvents()
	}
	p := d.poolFor(rounded, pp)
	if ptr, ok := d.takeAndSplit(p, size, rounded, s.Handle); ok {
		return ptr, nil, nil
	}
	if b := d.getFreeBlock(p, rounded, s.Handle); b != nil {
		if b.seg.exp != nil {
			return d.allocInExpandable(b, size, rounded, s)
		}
		return d.finishAlloc(b, size, rounded), nil, nil
	}
	return d.allocSlow(p, size, rounded, s)
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

// getFreeBlock is PyTorch's get_free_block: the smallest cached block of the
// stream that fits, subject to the max_split_size rules; removed from its tree.
func (d *device) getFreeBlock(p *pool, rounded uint64, stream uintptr) *block {
	if d.gc {
		p.calls++
	}
	t := p.treeFor(stream, false)
	if t == nil {
		return nil
	}
	b := t.lowerBound(rounded)
	if b == nil || !d.usable(b, rounded) {
		return nil
	}
	d.takeFromTree(t, b)
	return b
}

// takeAndSplit is the common cache hit in one descent: the best-fitting
// block of a regular segment that is split, when the remainder orders where
// the block did (after the block's predecessor), takes the block's place in
// the tree instead of a removal and an insertion. ok is false when the hit
// is not of that kind (or there is none); nothing has changed then.
func (d *device) takeAndSplit(p *pool, size, rounded uint64, stream uintptr) (gpumem.Ptr, bool) {
	t := p.treeFor(stream, false)
	if t == nil {
		return 0, false
	}
	b, link, pred := t.lowerBoundAt(rounded)
	if b == nil || b.seg.exp != nil || !d.usable(b, rounded) || !d.shouldSplit(b, rounded) {
		return 0, false
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
	rest := d.newBlock()
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
	rest.counted = true
	st := p.statType()
	inc(&d.stats.InactiveSplit, st, 1)
	inc(&d.stats.InactiveSplitBytes, st, int64(rest.size))
	return d.markAllocated(b, size), true
}

// usable applies the oversize rules to a candidate that fits.
func (d *device) usable(b *block, rounded uint64) bool {
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

func (d *device) takeFromTree(t *tree, b *block) {
	t.remove(b)
	if b.counted {
		b.counted = false
		st := b.pool.statType()
		dec(&d.stats.InactiveSplit, st, 1)
		dec(&d.stats.InactiveSplitBytes, st, int64(b.size))
	}
}

// cache puts a free block into its pool's tree.
func (d *device) cache(b *block) {
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

func (d *device) newBlock() *block {
	if n := len(d.spare); n > 0 {
		b := d.spare[n-1]
		d.spare = d.spare[:n-1]
		return b
	}
	return &block{}
}

func (d *device) recycle(b *block) {
	b.prev, b.next, b.seg, b.pool, b.tree = nil, nil, nil, nil, nil
	b.allocated, b.inTree, b.counted = false, false, false
	b.events, b.requested = 0, 0
	b.uses = b.uses[:0]
	d.spare = append(d.spare, b)
}

// shouldSplit is PyTorch's should_split.
func (d *device) shouldSplit(b *block, rounded uint64) bool {
	remaining := b.size - rounded
	if b.pool.small || b.seg.exp != nil {
		return remaining >= MinBlockSize
	}
	ms := d.maxSplit
	return (ms == 0 || rounded < ms) && remaining > SmallSize
}

// finishAlloc splits b if worthwhile, marks it allocated and counts it.
func (d *device) finishAlloc(b *block, size, rounded uint64) gpumem.Ptr {
	d.split(b, rounded)
	return d.markAllocated(b, size)
}

// split cuts b (out of any tree) to rounded bytes when worthwhile, caching
// the remainder.
func (d *device) split(b *block, rounded uint64) {
	if d.shouldSplit(b, rounded) {
		rest := d.newBlock()
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
		d.cache(rest)
	}
}

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

func (d *device) markAllocated(b *block, size uint64) gpumem.Ptr {
	b.allocated = true
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
		d.record(gpumem.ActionAlloc, b.stream.Handle, b.addr, b.size)
	}
	return b.addr
}

// allocSlow handles a cache miss: cross-stream reuse, garbage collection, a
// new segment, and the out-of-memory retries.
func (d *device) allocSlow(p *pool, size, rounded uint64, s gpumem.Stream) (gpumem.Ptr, *gpumem.OutOfMemoryError, error) {
	opts := &d.a.opts
	if d.expOn && p.private == nil {
		return d.allocExpandable(p, size, rounded, s)
	}
	if opts.CrossStreamReuse && len(d.captures) == 0 {
		if b, err := d.crossStreamBlock(p, rounded, s); err != nil {
			return 0, nil, err
		} else if b != nil {
			return d.finishAlloc(b, size, rounded), nil, nil
		}
	}
	if opts.GarbageCollectionThreshold > 0 {
		d.garbageCollect()
	}
	segSize := d.segmentSize(p, rounded)
	if seg := d.growCandidate(p, segSize, s.Handle); seg != nil {
		// Growing a wholly free segment in place adds fewer bytes than a
		// new segment and spares releasing the old one. On failure (out
		// of memory) a new segment is tried, with its retries.
		if b, err := d.growSegment(seg, segSize); err == nil {
			return d.finishAlloc(b, size, rounded), nil, nil
		}
	}
	b, err := d.newSegment(p, segSize, s)
	if natural := pytorchSegmentSize(p, rounded); errors.Is(err, gpumem.ErrOutOfMemory) && segSize > natural {
		// The enlarged segment does not fit: PyTorch's size may.
		segSize = natural
		b, err = d.newSegment(p, segSize, s)
	}
	if errors.Is(err, gpumem.ErrOutOfMemory) {
		// Free oversize cached blocks, then every unsplit cached block, and retry.
		if d.releaseAvailable(p, rounded, s.Handle) {
			b, err = d.newSegment(p, segSize, s)
		}
		if errors.Is(err, gpumem.ErrOutOfMemory) && len(d.captures) == 0 {
			d.stats.NumAllocRetries++
			d.releaseCached(true)
			b, err = d.newSegment(p, segSize, s)
		}
	}
	if err != nil {
		if errors.Is(err, gpumem.ErrOutOfMemory) {
			return 0, d.oomError(size, err), nil
		}
		return 0, nil, err
	}
	return d.finishAlloc(b, size, rounded), nil, nil
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

// newSegment takes a regular segment of segSize from Upstream for pool p and
// returns its single block, out of any tree. Out-of-memory errors (from the
// device or the memory fraction) match gpumem.ErrOutOfMemory.
func (d *device) newSegment(p *pool, segSize uint64, s gpumem.Stream) (*block, error) {
	if err := d.makeRoom(segSize); err != nil {
		return nil, err
	}
	var (
		ptr gpumem.Ptr
		g   *growable
		err error
	)
	if d.growableFor(p, segSize) {
		ptr, g, err = d.allocGrowable(segSize)
		if errors.Is(err, gpumem.ErrNotSupported) {
			d.disableGrowable(err)
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
			_, _ = d.freeSegmentMemory(seg)
			return nil, fmt.Errorf("caching: new segment hook: %w", err)
		}
	}
	b := d.newBlock()
	b.addr, b.size, b.stream, b.pool, b.seg = ptr, segSize, s, p, seg
	b.tree = p.treeFor(s.Handle, true)
	seg.head = b
	d.segments[seg] = struct{}{}
	if p.private != nil {
		p.private.segments++
	}
	st := p.statType()
	d.stats.Segment.Add(st, 1)
	d.addReserved(st, int64(segSize))
	d.stats.NumDeviceAlloc++
	d.record(gpumem.ActionSegmentAlloc, s.Handle, ptr, segSize)
	return b, nil
}

// releaseSegment returns a wholly free regular segment (its one block in its
// tree) to Upstream. The caller has synchronized the work that used it.
func (d *device) releaseSegment(seg *segment) error {
	b := seg.head
	if b.inTree {
		d.takeFromTree(b.tree, b)
	}
	if gone, err := d.freeSegmentMemory(seg); !gone {
		d.cache(b) // keep it; the memory is still ours
		return fmt.Errorf("caching: freeing segment %#x: %w", uintptr(seg.addr), err)
	} else if err != nil {
		d.a.logf("caching: freeing segment %#x: %v", uintptr(seg.addr), err)
	}
	delete(d.segments, seg)
	st := seg.pool.statType()
	d.stats.Segment.Add(st, -1)
	d.stats.ReservedBytes.Add(st, -int64(seg.size))
	d.stats.NumDeviceFree++
	d.record(gpumem.ActionSegmentFree, seg.stream.Handle, seg.addr, seg.size)
	if pp := seg.pool.private; pp != nil {
		pp.segments--
		if pp.segments == 0 && pp.released {
			delete(d.private, pp.id)
		}
	}
	d.recycle(b)
	return nil
}

// makeRoom prepares reserved memory to grow by n bytes of regular segment
// (new or grown): an error matching ErrOutOfMemory past the memory
// fraction's cap; with release before growth, wholly free cached segments
// released so that the growth stays within growthBound.
func (d *device) makeRoom(n uint64) error {
	reserved := uint64(d.stats.ReservedBytes[gpumem.StatAll].Current)
	if d.limit > 0 && reserved+n > d.limit {
		return fmt.Errorf("caching: %s more would exceed the memory fraction's cap of %s: %w",
			gpumem.FormatBytes(n), gpumem.FormatBytes(d.limit), gpumem.ErrOutOfMemory)
	}
	if bound := d.growthBound(n); d.a.opts.ReleaseBeforeGrow && reserved+n > bound {
		d.releaseForGrowth(reserved + n - bound)
	}
	return nil
}

// freeSegmentMemory returns a regular segment's memory: to Upstream, or
// unmapped and released for a growable one. gone says that the memory is
// no longer the allocator's, even when err reports a later failure.
func (d *device) freeSegmentMemory(seg *segment) (gone bool, err error) {
	if seg.grow != nil {
		return d.freeGrowable(seg)
	}
	err = d.a.upstream.Free(d.id, seg.addr)
	return err == nil, err
}

// freeable reports whether seg is a regular segment that is wholly free.
func freeable(seg *segment) bool {
	return seg.exp == nil && seg.head.inTree && seg.head.next == nil
}

// syncAll waits for every stream of the device before memory is returned.
func (d *device) syncAll() {
	d.stats.NumSyncAllStreams++
	_ = d.a.b.DeviceSynchronize(d.id)
}

// releaseForGrowth frees wholly free cached segments so that growing by
// need bytes does not raise the high-water mark. It frees the best-fitting
// segment (the smallest that covers what is still needed) or, when none
// covers it, the largest, until enough is freed: fewer bytes and fewer
// device calls than freeing largest first, and the larger cached segments
// stay for the requests that need them. Freeing a segment costs a device
// synchronization and, for a large one, hundreds of microseconds.
func (d *device) releaseForGrowth(need uint64) {
	var cands []*segment
	for seg := range d.segments {
		if freeable(seg) && seg.pool.private == nil {
			cands = append(cands, seg)
		}
	}
	if len(cands) == 0 {
		d.unmapForGrowth(need)
		return
	}
	// Largest first; equal sizes by address, so that runs are repeatable.
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].size != cands[j].size {
			return cands[i].size > cands[j].size
		}
		return cands[i].addr < cands[j].addr
	})
	d.syncAll()
	remaining := need
	for len(cands) > 0 && remaining > 0 {
		i := 0 // the largest, unless a smaller one covers the rest
		for j := len(cands) - 1; j >= 0; j-- {
			if cands[j].size >= remaining {
				i = j
				break
			}
		}
		seg := cands[i]
		cands = append(cands[:i], cands[i+1:]...)
		if d.releaseSegment(seg) == nil {
			remaining -= min(remaining, seg.size)
		}
	}
	if remaining > 0 {
		d.unmapForGrowth(remaining)
	}
}

// releaseAvailable is PyTorch's release_available_cached_blocks: with
// max_split_size set, free one oversize cached block of the stream large
// enough for the request, or else the largest ones until enough is freed.
func (d *device) releaseAvailable(p *pool, rounded uint64, stream uintptr) bool {
	ms := d.maxSplit
	if ms == 0 {
		return false
	}
	t := p.treeFor(stream, false)
	if t == nil {
		return false
	}
	key := max(rounded, ms)
	if b := t.lowerBound(key); b != nil && b.seg.exp == nil && !b.isSplit() {
		d.syncAll()
		return d.releaseSegment(b.seg) == nil
	}
	blocks := t.collect()
	var freed uint64
	synced := false
	for i := len(blocks) - 1; i >= 0 && freed < key; i-- {
		b := blocks[i]
		if b.size < ms {
			break
		}
		if b.seg.exp != nil || b.isSplit() {
			continue
		}
		if !synced {
			d.syncAll()
			synced = true
		}
		sz := b.size
		if d.releaseSegment(b.seg) == nil {
			freed += sz
		}
	}
	return freed >= key
}

// releaseCached is PyTorch's release_cached_blocks: wait for every pending
// event, then free every wholly free segment (and unmap every free chunk of
// the expandable ones). With private set it also frees the cached memory
// of private pools no capture is using.
func (d *device) releaseCached(private bool) {
	d.syncEvents()
	d.syncAll()
	for seg := range d.segments {
		if seg.exp != nil {
			d.unmapFree(seg, ^uint64(0))
			continue
		}
		if !freeable(seg) {
			continue
		}
		if pp := seg.pool.private; pp != nil && (!private || pp.users > 0) {
			continue
		}
		_ = d.releaseSegment(seg)
	}
	d.releaseEmptyExpandable()
}

// garbageCollect is PyTorch's garbage_collect_cached_blocks.
func (d *device) garbageCollect() {
	allowed := d.total
	if d.limit > 0 {
		allowed = d.limit
	}
	threshold := uint64(d.a.opts.GarbageCollectionThreshold * float64(allowed))
	reserved := uint64(d.stats.ReservedBytes[gpumem.StatAll].Current)
	if reserved <= threshold {
		return
	}
	target := reserved - threshold
	type cand struct {
		seg *segment
		age uint64
	}
	var cands []cand
	var totalAge uint64
	for seg := range d.segments {
		if freeable(seg) && !seg.pool.small && seg.pool.private == nil {
			age := seg.pool.calls - seg.head.gcBase
			cands = append(cands, cand{seg, age})
			totalAge += age
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].age > cands[j].age })
	var reclaimed uint64
	synced := false
	for len(cands) > 0 && reclaimed < target {
		avg := float64(totalAge) / float64(len(cands))
		freedAny := false
		rest := cands[:0]
		for _, c := range cands {
			if float64(c.age) >= avg {
				if !synced {
					d.syncAll()
					synced = true
				}
				sz := c.seg.size
				if d.releaseSegment(c.seg) == nil {
					reclaimed += sz
					totalAge -= c.age
					freedAny = true
					continue
				}
			}
			rest = append(rest, c)
		}
		cands = rest
		if !freedAny {
			break
		}
	}
}

// Deallocate returns p to the allocator. When p was used on streams other
// than the one it was allocated on (RecordStream, or s differing from the
// allocation stream), its memory is reused only after those streams reach
// the point of this call.
func (a *Allocator) Deallocate(p gpumem.Ptr, s gpumem.Stream) error {
	if dev := s.Device; dev >= 0 && dev < len(a.devs) && !a.closed.Load() {
		// Fast path: the block is on the stream's device.
		d := a.devs[dev]
		d.mu.Lock()
		if b, _ := d.live.Get(uint64(p)); b != nil && b.allocated && !d.closed {
			if s.Handle != b.stream.Handle {
				addUse(b, s)
			}
			err := d.freeLocked(b, s)
			d.mu.Unlock()
			return err
		}
		d.mu.Unlock()
	}
	d, b, err := a.find(p, s.Device)
	if err != nil {
		return err
	}
	defer d.mu.Unlock()
	if s.Device == d.id && s.Handle != b.stream.Handle {
		addUse(b, s)
	}
	return d.freeLocked(b, s)
}

// find locates the live block at p, trying device hint first, and returns
// it with its device locked.
func (a *Allocator) find(p gpumem.Ptr, hint int) (*device, *block, error) {
	if a.closed.Load() {
		return nil, nil, errClosed()
	}
	try := func(d *device) (*block, error) {
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return nil, errClosed()
		}
		if b, _ := d.live.Get(uint64(p)); b != nil && b.allocated {
			return b, nil
		}
		d.mu.Unlock()
		return nil, nil
	}
	if hint >= 0 && hint < len(a.devs) {
		d := a.devs[hint]
		d.mu.Lock()
		if b, _ := d.live.Get(uint64(p)); b != nil && b.allocated && !d.closed {
			return d, b, nil
		}
		d.mu.Unlock()
		b, err := try(d)
		if err != nil || b != nil {
			return a.devs[hint], b, err
		}
	}
	for i, d := range a.devs {
		if i == hint {
			continue
		}
		b, err := try(d)
		if err != nil || b != nil {
			return d, b, err
		}
	}
	return nil, nil, fmt.Errorf("caching: pointer %#x was not allocated by this allocator or was already freed: %w", uintptr(p), gpumem.ErrInvalidValue)
}

func addUse(b *block, s gpumem.Stream) {
	for _, u := range b.uses {
		if u == s {
			return
		}
	}
	b.uses = append(b.uses, s)
}

func (d *device) freeLocked(b *block, s gpumem.Stream) error {
	b.allocated = false
	st := b.pool.statType()
	dec(&d.stats.Allocation, st, 1)
	dec(&d.stats.AllocatedBytes, st, int64(b.size))
	dec(&d.stats.RequestedBytes, st, int64(b.requested))
	if d.history.On() {
		d.record(gpumem.ActionFreeRequest, s.Handle, b.addr, b.size)
	}
	if len(b.uses) == 0 {
		d.live.Delete(uint64(b.addr))
		d.freeBlock(b)
		return nil
	}
	// Pending: the block stays in the address table, still ours and not
	// reusable.
	d.stats.PendingReleaseBytes += int64(b.size)
	if len(d.captures) > 0 {
		d.deferred = append(d.deferred, b)
		return nil
	}
	return d.insertEvents(b)
}

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

// freeBlock is PyTorch's free_block: merge with free neighbours of the same
// stream and pool, and cache the result.
func (d *device) freeBlock(b *block) {
	st := b.pool.statType()
	dec(&d.stats.Active, st, 1)
	dec(&d.stats.ActiveBytes, st, int64(b.size))
	if d.history.On() {
		d.record(gpumem.ActionFreeComplete, b.stream.Handle, b.addr, b.size)
	}
	b = d.mergeAndCache(b)
	if pp := b.pool.private; pp != nil && pp.released && freeable(b.seg) {
		_ = d.releaseSegment(b.seg)
	}
}

// mergeAndCache merges b (free, out of any tree) with its free neighbours
// of the same stream and caches the result, which it returns.
func (d *device) mergeAndCache(b *block) *block {
	b.uses = b.uses[:0]
	pr, nx := b.prev, b.next
	prevFree := pr != nil && pr.inTree && pr.stream == b.stream
	nextFree := nx != nil && nx.inTree && nx.stream == b.stream
	// The merged block grows a free neighbour that is in the tree (the
	// previous one, else the next); when its larger key still orders
	// before that neighbour's successor it takes the neighbour's place,
	// which spares a removal and an insertion.
	var keep *block
	switch {
	case prevFree:
		keep = pr
		if nextFree {
			d.takeFromTree(nx.tree, nx)
		}
	case nextFree:
		keep = nx
	}
	if keep == nil {
		if b.prev == nil {
			b.seg.head = b
		}
		d.cache(b)
		return b
	}
	t := keep.tree
	link, succ := t.findAt(keep)
	if keep.counted {
		keep.counted = false
		st := keep.pool.statType()
		dec(&d.stats.InactiveSplit, st, 1)
		dec(&d.stats.InactiveSplitBytes, st, int64(keep.size))
	}
	// Link the merged block: the previous block absorbs b (and the next
	// one, when free), or b absorbs the next one.
	merged := b
	if prevFree {
		merged = pr
		pr.size += b.size
		pr.next = b.next
		if b.next != nil {
			b.next.prev = pr
		}
		if nextFree {
			pr.size += nx.size
			pr.next = nx.next
			if nx.next != nil {
				nx.next.prev = pr
			}
		}
	} else {
		b.size += nx.size
		b.next = nx.next
		if nx.next != nil {
			nx.next.prev = b
		}
	}
	inPlace := succ == nil || keyLess(merged, succ.size, uintptr(succ.addr))
	if inPlace {
		if merged != keep {
			t.replace(link, keep, merged)
		}
	} else {
		t.removeAt(link, keep)
	}
	if prevFree {
		d.recycle(b)
		if nextFree {
			d.recycle(nx)
		}
	} else {
		d.recycle(nx)
	}
	if merged.prev == nil {
		merged.seg.head = merged
	}
	if inPlace {
		merged.gcBase = merged.pool.calls
		if merged.isSplit() && merged.seg.exp == nil {
			merged.counted = true
			st := merged.pool.statType()
			inc(&d.stats.InactiveSplit, st, 1)
			inc(&d.stats.InactiveSplitBytes, st, int64(merged.size))
		}
	} else {
		d.cache(merged)
	}
	return merged
}

// RecordStream marks p as used on s: when p is freed, its memory returns to
// the pool only after the work queued on s up to the free has completed.
func (a *Allocator) RecordStream(p gpumem.Ptr, s gpumem.Stream) error {
	d, b, err := a.find(p, s.Device)
	if err != nil {
		return err
	}
	defer d.mu.Unlock()
	if s.Device != d.id {
		return fmt.Errorf("caching: stream %v is not on device %d of %#x: %w", s, d.id, uintptr(p), gpumem.ErrInvalidValue)
	}
	if s.Handle != b.stream.Handle {
		addUse(b, s)
	}
	return nil
}

// Size returns the size asked for when p was allocated.
func (a *Allocator) Size(p gpumem.Ptr) (uint64, error) {
	d, b, err := a.find(p, 0)
	if err != nil {
		return 0, err
	}
	defer d.mu.Unlock()
	return b.requested, nil
}

// oomError describes an out-of-memory failure (d.mu held).
func (d *device) oomError(size uint64, cause error) *gpumem.OutOfMemoryError {
	free, total, err := d.a.b.MemInfo(d.id)
	if err != nil {
		free, total = 0, d.total
	}
	s := &d.stats
	reserved := uint64(s.ReservedBytes[gpumem.StatAll].Current)
	allocated := uint64(s.AllocatedBytes[gpumem.StatAll].Current)
	e := &gpumem.OutOfMemoryError{
		Allocator: "caching", Device: d.id, Requested: size, Capacity: total, Free: free,
		Allocated: allocated, Reserved: reserved, Largest: d.largestFree(), Limit: d.limit, Err: cause,
	}
	switch {
	case d.limit > 0 && reserved+segmentSize(size) > d.limit:
		e.Hint = "The memory fraction's cap is reached: raise per_process_memory_fraction in GPUMEM_ALLOC_CONF or free memory"
	case reserved > allocated && reserved-allocated >= reserved/5 && !d.expOn:
		e.Hint = "If reserved but unallocated memory is large try GPUMEM_ALLOC_CONF=expandable_segments:True (or max_split_size_mb) to avoid fragmentation"
	default:
		e.Hint = "Free memory held elsewhere on the device, or reduce the working set"
	}
	return e
}

// largestFree is the largest cached block of the default pools.
func (d *device) largestFree() uint64 {
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

func (d *device) record(action gpumem.HistoryAction, stream uintptr, addr gpumem.Ptr, size uint64) {
	d.history.Add(action, d.id, stream, addr, size)
}

// growthBound is the reserved size up to which a new segment of segSize
// is taken without releasing cached memory first: the reserved high-water
// mark, or, with Options.GrowthSlack, that slack over the larger of the
// allocated high-water mark and what would be allocated with this segment
// wholly used, if more.
func (d *device) growthBound(segSize uint64) uint64 {
	bound := d.highWater
	if f := d.a.opts.GrowthSlack; f > 0 {
		a := max(d.allocHigh, uint64(d.stats.AllocatedBytes[gpumem.StatAll].Current)+segSize)
		if b := uint64(float64(a) * (1 + f)); b > bound {
			bound = b
		}
	}
	return bound
}

// addReserved counts n more reserved bytes of pool kind st and raises the
// high-water mark that release before growth keeps reserved memory under.
func (d *device) addReserved(st int, n int64) {
	d.stats.ReservedBytes.Add(st, n)
	if r := uint64(d.stats.ReservedBytes[gpumem.StatAll].Current); r > d.highWater {
		d.highWater = r
	}
}

// segmentSize is the size of a new regular segment for a request of
// rounded bytes from pool p: PyTorch's sizes, with small segments of
// Options.SmallSegment and large ones of at least Options.MinLargeSegment.
func (d *device) segmentSize(p *pool, rounded uint64) uint64 {
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
