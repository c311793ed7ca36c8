package sim

import (
	"sort"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// A pool reserves chunks of its device's memory (whole multiples of the
// granularity) and carves allocations out of them best fit (the smallest
// free range that holds the request, the lowest addressed of equals). As in
// the CUDA driver, whose pools map physical memory into one address range,
// free ranges of chunks that lie next to each other coalesce, and an
// allocation may span chunks; a chunk holding no part of any allocation can
// be released to the device. FreeAsync puts the range on the pool's pending
// list; the stream that freed it (and streams ordered after the free
// through event waits) may reuse it at once, in stream order; when the
// stream reaches the free the range becomes free for every stream
// (opportunistic reuse).
type pool struct {
	h         uintptr
	dev       *device
	isDefault bool
	destroyed bool
	maxSize   uint64

	threshold                              uint64
	reuseFollow, reuseOpp, reuseInternal   bool
	reserved, reservedHigh, used, usedHigh uint64
	chunks                                 map[uint64]*object
	free                                   *rangeSet
	pending                                []*pfree
	access                                 []gpumem.Access
	stack                                  stack
}

// pfree is a range freed with FreeAsync whose free the stream has not
// reached yet.
type pfree struct {
	o           *object // the allocation freed
	inChunk     bool    // o still sits in its chunk (no allocation reused its range yet)
	start, size uint64
	s           *stream
	seq         uint64
	idx         int // index in pool.pending
}

func (g *GPU) newPool(d *device, isDefault bool, maxSize uint64) *pool {
	p := &pool{h: g.handle(), dev: d, isDefault: isDefault, maxSize: maxSize,
		reuseFollow: true, reuseOpp: true, reuseInternal: true,
		chunks: map[uint64]*object{}, free: newRangeSet(), access: make([]gpumem.Access, len(g.cfg.Devices))}
	p.access[d.ord] = gpumem.AccessReadWrite
	g.pools[p.h] = p
	return p
}

func (g *GPU) lookupPool(m symtab.Op, mp gpumem.MemPool) (*pool, error) {
	p := g.pools[mp.Handle]
	if p == nil || p.destroyed || p.dev.ord != mp.Device {
		return nil, errf(m, symtab.CUDAInvalidValue, "mempool(dev %d, %#x) is not a live pool", mp.Device, mp.Handle)
	}
	return p, nil
}

func (g *GPU) poolsSupported(m symtab.Op, dev int) (*device, error) {
	d, err := g.device(m, dev)
	if err != nil {
		return nil, err
	}
	if d.cfg.NoPools {
		return nil, errf(m, symtab.CUDANotSupported, "device %d has no stream-ordered pools", dev)
	}
	return d, nil
}

// DefaultMemPool returns the device's default pool (the pool MallocAsync uses).
func (g *GPU) DefaultMemPool(dev int) (gpumem.MemPool, error) {
	if err := g.enter(symtab.DefaultMemPool); err != nil {
		return gpumem.MemPool{}, err
	}
	d, err := g.poolsSupported(symtab.DefaultMemPool, dev)
	if err != nil {
		return gpumem.MemPool{}, err
	}
	return gpumem.MemPool{Handle: d.defPool.h, Device: dev}, nil
}

// MemPoolCreate creates a pool on props.Device with a release threshold of 0.
func (g *GPU) MemPoolCreate(props gpumem.PoolProps) (gpumem.MemPool, error) {
	if err := g.enter(symtab.MemPoolCreate); err != nil {
		return gpumem.MemPool{}, err
	}
	d, err := g.poolsSupported(symtab.MemPoolCreate, props.Device)
	if err != nil {
		return gpumem.MemPool{}, err
	}
	st := g.callers(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.newPool(d, false, props.MaxSize)
	p.stack = st
	return gpumem.MemPool{Handle: p.h, Device: d.ord}, nil
}

// MemPoolDestroy destroys a created pool. Allocations still live keep their
// memory until they are freed, as with cuMemPoolDestroy.
func (g *GPU) MemPoolDestroy(mp gpumem.MemPool) error {
	if err := g.enter(symtab.MemPoolDestroy); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	p, err := g.lookupPool(symtab.MemPoolDestroy, mp)
	if err != nil {
		return err
	}
	if p.isDefault {
		return errf(symtab.MemPoolDestroy, symtab.CUDAInvalidValue, "the default pool cannot be destroyed")
	}
	p.destroyed = true
	delete(g.pools, p.h)
	g.releaseChunks(p, 0)
	return nil
}

// MemPoolSetAttribute sets a pool attribute. The reserved and used
// current values are read-only; their high-water marks accept only 0, which
// resets them to the current value.
func (g *GPU) MemPoolSetAttribute(mp gpumem.MemPool, a gpumem.PoolAttribute, v uint64) error {
	if err := g.enter(symtab.MemPoolSetAttribute); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	p, err := g.lookupPool(symtab.MemPoolSetAttribute, mp)
	if err != nil {
		return err
	}
	switch a {
	case gpumem.PoolReleaseThreshold:
		p.threshold = v
	case gpumem.PoolReuseFollowEventDependencies:
		p.reuseFollow = v != 0
	case gpumem.PoolReuseAllowOpportunistic:
		p.reuseOpp = v != 0
	case gpumem.PoolReuseAllowInternalDependencies:
		p.reuseInternal = v != 0
	case gpumem.PoolReservedMemHigh, gpumem.PoolUsedMemHigh:
		if v != 0 {
			return errf(symtab.MemPoolSetAttribute, symtab.CUDAInvalidValue, "%v can only be reset with 0", a)
		}
		if a == gpumem.PoolReservedMemHigh {
			p.reservedHigh = p.reserved
		} else {
			p.usedHigh = p.used
		}
	default:
		return errf(symtab.MemPoolSetAttribute, symtab.CUDAInvalidValue, "%v cannot be set", a)
	}
	return nil
}

// MemPoolGetAttribute reads a pool attribute; during a global-mode capture
// it fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the
// capture, as the driver does. Reserved memory counts the
// chunks the pool holds; used memory counts the bytes asked for by its
// allocations whose free the stream has not reached yet (CUDA counts the
// requested sizes, not the rounded ones).
func (g *GPU) MemPoolGetAttribute(mp gpumem.MemPool, a gpumem.PoolAttribute) (uint64, error) {
	if err := g.enter(symtab.MemPoolGetAttribute); err != nil {
		return 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	p, err := g.lookupPool(symtab.MemPoolGetAttribute, mp)
	if err != nil {
		return 0, err
	}
	// CUDA 13 refuses a pool query while a global-mode capture is active
	// and invalidates the capture (measured on an H200 with
	// PoolReservedMemCurrent).
	if err := g.unsafeDuringCapture(symtab.MemPoolGetAttribute, p.dev); err != nil {
		return 0, err
	}
	b := func(x bool) uint64 {
		if x {
			return 1
		}
		return 0
	}
	switch a {
	case gpumem.PoolReleaseThreshold:
		return p.threshold, nil
	case gpumem.PoolReuseFollowEventDependencies:
		return b(p.reuseFollow), nil
	case gpumem.PoolReuseAllowOpportunistic:
		return b(p.reuseOpp), nil
	case gpumem.PoolReuseAllowInternalDependencies:
		return b(p.reuseInternal), nil
	case gpumem.PoolReservedMemCurrent:
		return p.reserved, nil
	case gpumem.PoolReservedMemHigh:
		return p.reservedHigh, nil
	case gpumem.PoolUsedMemCurrent:
		return p.used, nil
	case gpumem.PoolUsedMemHigh:
		return p.usedHigh, nil
	}
	return 0, errf(symtab.MemPoolGetAttribute, symtab.CUDAInvalidValue, "unknown pool attribute %v", a)
}

// MemPoolTrimTo releases chunks with no allocation in them until the pool
// reserves at most keep bytes (or no such chunk is left).
func (g *GPU) MemPoolTrimTo(mp gpumem.MemPool, keep uint64) error {
	if err := g.enter(symtab.MemPoolTrimTo); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	p, err := g.lookupPool(symtab.MemPoolTrimTo, mp)
	if err != nil {
		return err
	}
	g.releaseChunks(p, keep)
	return nil
}

// MemPoolSetAccess grants device dev access to the pool's memory. The
// pool's own device always has read-write access.
func (g *GPU) MemPoolSetAccess(mp gpumem.MemPool, dev int, a gpumem.Access) error {
	if err := g.enter(symtab.MemPoolSetAccess); err != nil {
		return err
	}
	if _, err := g.device(symtab.MemPoolSetAccess, dev); err != nil {
		return err
	}
	if a < gpumem.AccessNone || a > gpumem.AccessReadWrite {
		return errf(symtab.MemPoolSetAccess, symtab.CUDAInvalidValue, "bad access %d", int(a))
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	p, err := g.lookupPool(symtab.MemPoolSetAccess, mp)
	if err != nil {
		return err
	}
	if dev == p.dev.ord {
		if a != gpumem.AccessReadWrite {
			return errf(symtab.MemPoolSetAccess, symtab.CUDAInvalidValue, "the pool's own device keeps read-write access")
		}
		return nil
	}
	if !g.peerPossible(dev, p.dev.ord) {
		return errf(symtab.MemPoolSetAccess, symtab.CUDAPeerAccessUnsupported, "device %d cannot access device %d", dev, p.dev.ord)
	}
	p.access[dev] = a
	return nil
}

// MemPoolGetAccess reports device dev's access to the pool's memory.
func (g *GPU) MemPoolGetAccess(mp gpumem.MemPool, dev int) (gpumem.Access, error) {
	if err := g.enter(symtab.MemPoolGetAccess); err != nil {
		return 0, err
	}
	if _, err := g.device(symtab.MemPoolGetAccess, dev); err != nil {
		return 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	p, err := g.lookupPool(symtab.MemPoolGetAccess, mp)
	if err != nil {
		return 0, err
	}
	return p.access[dev], nil
}

// MallocAsync allocates from the device's default pool, ordered on s.
func (g *GPU) MallocAsync(size uint64, s gpumem.Stream) (gpumem.Ptr, error) {
	if err := g.enter(symtab.MallocAsync); err != nil {
		return 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.lookupStream(symtab.MallocAsync, s)
	if err != nil {
		return 0, err
	}
	if st.dev.cfg.NoPools {
		return 0, errf(symtab.MallocAsync, symtab.CUDANotSupported, "device %d has no stream-ordered pools", st.dev.ord)
	}
	return g.poolAlloc(symtab.MallocAsync, st.dev.curPool, size, st)
}

// MallocFromPoolAsync allocates from pool p, ordered on s.
func (g *GPU) MallocFromPoolAsync(size uint64, mp gpumem.MemPool, s gpumem.Stream) (gpumem.Ptr, error) {
	if err := g.enter(symtab.MallocFromPoolAsync); err != nil {
		return 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.lookupStream(symtab.MallocFromPoolAsync, s)
	if err != nil {
		return 0, err
	}
	p, err := g.lookupPool(symtab.MallocFromPoolAsync, mp)
	if err != nil {
		return 0, err
	}
	return g.poolAlloc(symtab.MallocFromPoolAsync, p, size, st)
}

// poolAlloc allocates size bytes from p for work ordered on st; lock held.
func (g *GPU) poolAlloc(m symtab.Op, p *pool, size uint64, st *stream) (gpumem.Ptr, error) {
	if err := checkSize(m, size); err != nil {
		return 0, err
	}
	n := roundUp(size, Alignment)
	if st.cap != nil {
		return g.captureAlloc(m, p, size, n, st)
	}
	var stk stack
	if !g.cfg.NoStacks {
		stk = g.callers(2)
	}
	start, fromPending, ok := g.takePending(p, n, st)
	if !ok {
		start, ok = p.free.allocBest(n)
	}
	if !ok {
		var err error
		if start, err = g.grow(m, p, n); err != nil {
			return 0, err
		}
	}
	chunk := g.spanAt(start)
	o := &object{kind: objPoolAlloc, id: g.id(), start: start, size: n, req: size, dev: p.dev.ord, stack: stk, pool: p, chunk: chunk, stream: st}
	g.eachChunk(o, insertSub)
	g.allocs[start] = o
	_ = fromPending
	p.used += size
	p.usedHigh = max(p.usedHigh, p.used)
	return gpumem.Ptr(start), nil
}

// takePending reuses a range freed in stream order that st is ordered after.
func (g *GPU) takePending(p *pool, n uint64, st *stream) (uint64, bool, bool) {
	for _, pf := range p.pending {
		if pf.size < n {
			continue
		}
		if pf.s != st && !(p.reuseFollow && st.ordered != nil && st.ordered[pf.s] >= pf.seq) {
			continue
		}
		if pf.inChunk {
			// The freed allocation leaves its chunk now: its range belongs to
			// the new allocation. Work queued on it earlier in stream order
			// is still fine: the detector only flags it once the free runs.
			g.eachChunk(pf.o, removeSub)
			pf.inChunk = false
		}
		start := pf.start
		pf.start += n
		pf.size -= n
		return start, true, true
	}
	return 0, false, false
}

// grow reserves a new chunk for an allocation of n bytes: a multiple of the
// device's PoolGranularity (32 MiB, as CUDA 13's pools grow on an H200), or
// of its Granularity when that much does not fit.
func (g *GPU) grow(m symtab.Op, p *pool, n uint64) (uint64, error) {
	d := p.dev
	if a, ok := g.growTail(p, n); ok {
		return a, nil
	}
	cs := roundUp(n, d.cfg.PoolGranularity)
	if p.maxSize > 0 && p.reserved+cs > p.maxSize || !g.fits(d, cs) {
		cs = roundUp(n, d.cfg.Granularity)
	}
	if p.maxSize > 0 && p.reserved+cs > p.maxSize {
		return 0, vendorErr(m, symtab.CUDAOutOfMemory)
	}
	if !g.reserve(d, cs) {
		g.releaseChunks(p, 0)
		if !g.reserve(d, cs) {
			return 0, vendorErr(m, symtab.CUDAOutOfMemory)
		}
	}
	start, ok := d.va.alloc(cs)
	if !ok {
		d.used -= cs
		return 0, vendorErr(m, symtab.CUDAOutOfMemory)
	}
	g.addChunk(p, start, cs)
	a, _ := p.free.allocBest(n)
	// The new chunk (merged with a free neighbour, if any) holds n bytes,
	// so the best fit exists.
	return a, nil
}

// growTail extends the pool's highest chunk when a free range ends there:
// the new chunk, placed right after it, needs only what that range lacks,
// and the two coalesce, as the driver maps more memory at the end of its
// pool's address range.
func (g *GPU) growTail(p *pool, n uint64) (uint64, bool) {
	d := p.dev
	var top uint64
	for _, c := range p.chunks {
		top = max(top, c.end())
	}
	tail, ok := p.free.byEnd[top]
	if top == 0 || !ok || tail.size >= n {
		return 0, false
	}
	cs := roundUp(n-tail.size, d.cfg.PoolGranularity)
	if p.maxSize > 0 && p.reserved+cs > p.maxSize || !g.fits(d, cs) || !g.reserve(d, cs) {
		return 0, false
	}
	if !d.va.allocAt(top, cs) {
		d.used -= cs
		return 0, false
	}
	g.addChunk(p, top, cs)
	return p.free.allocBest(n)
}

// addChunk records [start, start+cs) as a chunk of p, free.
func (g *GPU) addChunk(p *pool, start, cs uint64) {
	c := g.newObject(objPoolChunk, start, cs, cs, p.dev.ord, stack{})
	c.pool = p
	g.spans.insert(start, c)
	p.chunks[start] = c
	p.reserved += cs
	p.reservedHigh = max(p.reservedHigh, p.reserved)
	p.free.release(start, cs)
}

// releaseChunks releases chunks with nothing allocated in them until p
// reserves at most keep bytes; lock held.
func (g *GPU) releaseChunks(p *pool, keep uint64) {
	if p.reserved <= keep {
		return
	}
	starts := make([]uint64, 0, len(p.chunks))
	for s := range p.chunks {
		starts = append(starts, s)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] > starts[j] })
	for _, s := range starts {
		if p.reserved <= keep {
			return
		}
		c := p.chunks[s]
		// A chunk with no allocation in it is wholly free unless a
		// pending free still holds part of it.
		if len(c.subs) > 0 || !p.free.allocAt(c.start, c.size) {
			continue
		}
		delete(p.chunks, s)
		g.spans.remove(s, c)
		p.reserved -= c.size
		d := p.dev
		d.used -= c.size
		d.store.drop(c.start, c.size)
		d.va.release(c.start, c.size)
		c.freed = true
	}
}

// trimPools applies the pools' release thresholds at a synchronization point.
func (g *GPU) trimPools(d *device) {
	for _, p := range g.pools {
		if p.dev == d && p.reserved > p.threshold {
			g.releaseChunks(p, p.threshold)
		}
	}
}

// eachChunk calls fn for every chunk of o's pool that o overlaps, in address
// order; lock held.
func (g *GPU) eachChunk(o *object, fn func(c, o *object)) {
	for a := o.start; a < o.start+o.size; {
		c := g.spanAt(a)
		if c == nil || c.kind != objPoolChunk {
			return
		}
		fn(c, o)
		a = c.end()
	}
}

func insertSub(c *object, o *object) {
	i := sort.Search(len(c.subs), func(i int) bool { return c.subs[i].start > o.start })
	c.subs = append(c.subs, nil)
	copy(c.subs[i+1:], c.subs[i:])
	c.subs[i] = o
}

func removeSub(c *object, o *object) {
	i := sort.Search(len(c.subs), func(i int) bool { return c.subs[i].start >= o.start })
	if i < len(c.subs) && c.subs[i] == o {
		c.subs = append(c.subs[:i], c.subs[i+1:]...)
	}
}

// FreeAsync frees stream-ordered memory when s reaches this point; work
// queued on s before it may still use the memory, and MallocAsync on s (or
// on streams ordered after it by an event) may reuse it at once.
func (g *GPU) FreeAsync(ptr gpumem.Ptr, s gpumem.Stream) error {
	if err := g.enter(symtab.FreeAsync); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.lookupStream(symtab.FreeAsync, s)
	if err != nil {
		return err
	}
	o := g.allocs[uint64(ptr)]
	if o == nil || (o.kind != objPoolAlloc && o.kind != objGraphAlloc) {
		return errf(symtab.FreeAsync, symtab.CUDAInvalidValue, "%#x is not a live stream-ordered allocation%s", uint64(ptr), g.hint(uint64(ptr)))
	}
	if st.cap != nil || o.kind == objGraphAlloc {
		return g.freeGraphOrCaptured(st, o)
	}
	p := o.pool
	delete(g.allocs, o.start)
	if g.inlineReady(st) {
		// The stream is idle: the free is reached at once.
		st.enq++
		g.freePoolAlloc(o)
		st.done++
		return nil
	}
	pf := &pfree{o: o, inChunk: true, start: o.start, size: o.size, s: st, seq: st.enq + 1, idx: len(p.pending)}
	p.pending = append(p.pending, pf)
	if err := g.enqueue(st, &op{kind: opFree, m: symtab.FreeAsync, obj: o, pf: pf}); err != nil {
		// Refused (the legacy stream during a capture, say): the
		// allocation stays live, as the driver leaves it.
		p.pending = p.pending[:len(p.pending)-1]
		g.allocs[o.start] = o
		return err
	}
	return nil
}

// completeFree runs when a stream reaches a FreeAsync; lock held.
func (g *GPU) completeFree(pf *pfree) {
	p := pf.o.pool
	last := len(p.pending) - 1
	p.pending[pf.idx] = p.pending[last]
	p.pending[pf.idx].idx = pf.idx
	p.pending = p.pending[:last]
	if pf.inChunk {
		g.freePoolAlloc(pf.o)
		return
	}
	pf.o.freed = true
	p.used -= pf.o.req
	if pf.size > 0 {
		p.free.release(pf.start, pf.size)
	}
	if p.destroyed {
		g.releaseChunks(p, 0)
	}
}

// freePoolAlloc returns a pool allocation that still sits in its chunk to
// the pool; lock held.
func (g *GPU) freePoolAlloc(o *object) {
	p := o.pool
	o.freed = true
	g.eachChunk(o, removeSub)
	if g.tags.n > 0 {
		g.dropTags(o.start, o.size)
	}
	p.free.release(o.start, o.size)
	p.used -= o.req
	if p.destroyed {
		g.releaseChunks(p, 0)
	}
}

// allocBest takes size bytes from the smallest free range that holds them
// (the lowest addressed of equals) and returns their start: the best fit is
// in size's own class, or else in the first non-empty class above it, whose
// ranges all fit.
func (r *rangeSet) allocBest(size uint64) (uint64, bool) {
	if size == 0 {
		return 0, false
	}
	better := func(g, f *frange) bool {
		return f == nil || g.size < f.size || g.size == f.size && g.start < f.start
	}
	var f *frange
	c := classOf(size)
	for g := r.heads[c]; g != nil; g = g.next {
		if g.size >= size && better(g, f) {
			f = g
		}
	}
	if f == nil && c+1 < nClasses {
		if fc := r.firstClass(c + 1); fc >= 0 {
			for g := r.heads[fc]; g != nil; g = g.next {
				if better(g, f) {
					f = g
				}
			}
		}
	}
	if f == nil {
		return 0, false
	}
	start := f.start
	if !r.allocAtRange(f, start, size) {
		return 0, false
	}
	return start, true
}

// allocAtRange takes [start, start+size) from the free range f holding it.
func (r *rangeSet) allocAtRange(f *frange, start, size uint64) bool {
	if start < f.start || start+size > f.start+f.size {
		return false
	}
	r.unlink(f)
	fs, fe := f.start, f.start+f.size
	r.recycle(f)
	if start > fs {
		r.link(r.node(fs, start-fs))
	}
	if fe > start+size {
		r.link(r.node(start+size, fe-start-size))
	}
	return true
}
