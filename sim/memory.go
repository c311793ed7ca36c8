package sim

import (
	"fmt"
	"sort"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

type objKind uint8

const (
	objDevice     objKind = iota // Malloc
	objHost                      // MallocHost
	objManaged                   // MallocManaged
	objPoolChunk                 // memory a pool reserved from its device
	objPoolAlloc                 // MallocAsync / MallocFromPoolAsync
	objGraphAlloc                // MallocAsync during capture: a graph memory node
	objMapping                   // MemMap of a physical allocation into a reservation
	objTag                       // Tag: a sub-allocation annotation
	objReserve                   // MemAddressReserve
	objGlobal                    // a global of a loaded module
)

var objKindNames = [...]string{"device allocation", "pinned host allocation", "managed allocation",
	"pool chunk", "stream-ordered allocation", "graph allocation", "virtual memory mapping", "tagged block", "address reservation", "module global"}

func (k objKind) String() string { return objKindNames[k] }

// object is anything with an address range: allocations, pool chunks,
// mappings, reservations and tags. Device and stream-ordered allocations,
// the hot ones, carry only the common fields; the rest live in objExt.
type object struct {
	kind        objKind
	freed       bool
	dev         int // owning device (-1 for host memory)
	id          uint64
	start, size uint64  // size rounded up to Alignment (the granularity for mappings)
	req         uint64  // size asked for
	pool        *pool   // pool chunks and their allocations; graph allocations
	chunk       *object // a stream-ordered allocation's chunk
	stream      *stream // the stream a stream-ordered allocation is ordered on
	stack       stack
	tlinks
	*objExt
}

// objExt holds the fields of the less common kinds of object.
type objExt struct {
	host []byte // contiguous backing of host and managed memory; nil: paged

	subs []*object // a pool chunk's live allocations, sorted by start

	// graph allocations
	graph     *graph
	live      bool // allocated by a launch and not yet freed
	owned     bool // launched and not yet freed with FreeAsync
	graphRefs int  // graphs and execs that hold its address

	// managed memory
	mpages []mpage
	mps    uint64 // managed page size

	// mappings and reservations
	mh     *memHandle
	hoff   uint64
	access []gpumem.Access
	res    *object // a mapping's reservation
	mapped int     // a reservation's mappings

	owner uint64 // a tag's owner
}

func (o *object) end() uint64 { return o.start + o.size }

func (o *object) describe() string {
	s := fmt.Sprintf("%v #%d [%#x, %#x) of %d bytes", o.kind, o.id, o.start, o.start+o.size, o.req)
	if o.dev >= 0 {
		s += fmt.Sprintf(" on device %d", o.dev)
	}
	if o.kind == objTag {
		s += fmt.Sprintf(" (owner %d)", o.owner)
	}
	return s
}

func roundUp(x, a uint64) uint64 { return (x + a - 1) &^ (a - 1) }

// checkSize rejects zero sizes and sizes that cannot fit in the address space.
func checkSize(m symtab.Op, size uint64) error {
	if size == 0 {
		return errf(m, symtab.CUDAInvalidValue, "size 0")
	}
	if size > 1<<56 {
		return errf(m, symtab.CUDAOutOfMemory, "size %d is beyond any device", size)
	}
	return nil
}

func (g *GPU) oom(m symtab.Op, d *device, size uint64) error {
	// Exactly what the driver returns: no wrapping.
	_ = d
	_ = size
	return vendorErr(m, symtab.CUDAOutOfMemory)
}

// fits reports whether n more bytes fit on d, evicting managed pages if need be.
func (g *GPU) fits(d *device, n uint64) bool { return d.used+n <= d.cfg.Capacity }

// reserve takes n bytes of d's physical capacity, evicting managed pages
// resident on d to the host when that makes room; lock held.
func (g *GPU) reserve(d *device, n uint64) bool {
	if d.used+n > d.cfg.Capacity {
		return false
	}
	if d.used+d.resident+n > d.cfg.Capacity {
		g.evict(d, d.used+d.resident+n-d.cfg.Capacity, nil)
	}
	d.used += n
	return true
}

func (g *GPU) newObject(kind objKind, start, size, req uint64, dev int, st stack) *object {
	o := &object{kind: kind, id: g.id(), start: start, size: size, req: req, dev: dev, stack: st}
	if kind != objDevice && kind != objPoolAlloc {
		o.objExt = &objExt{}
	}
	return o
}

// Malloc allocates device memory (cuMemAlloc). Sizes are rounded up to 512
// bytes; a size the device cannot hold fails as the driver does, with
// CUDA_ERROR_OUT_OF_MEMORY.
func (g *GPU) Malloc(dev int, size uint64) (gpumem.Ptr, error) {
	if err := g.enter(symtab.Malloc); err != nil {
		return 0, err
	}
	d, err := g.device(symtab.Malloc, dev)
	if err != nil {
		return 0, err
	}
	if err := checkSize(symtab.Malloc, size); err != nil {
		return 0, err
	}
	st := g.callers(1)
	rs := roundUp(size, Alignment)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.unsafeDuringCapture(symtab.Malloc, d); err != nil {
		return 0, err
	}
	if rs > d.cfg.Capacity || !g.reserve(d, rs) {
		return 0, g.oom(symtab.Malloc, d, size)
	}
	start, ok := d.va.alloc(rs)
	if !ok {
		d.used -= rs
		return 0, g.oom(symtab.Malloc, d, size)
	}
	o := g.newObject(objDevice, start, rs, size, dev, st)
	g.allocs[start] = o
	g.spans.insert(start, o)
	return gpumem.Ptr(start), nil
}

// Free frees memory from Malloc or MallocManaged (cuMemFree). Like cuMemFree
// it first waits for the work queued on the device, so that work queued
// before the Free never sees freed memory. Freeing anything else, or twice,
// is CUDA_ERROR_INVALID_VALUE; freeing 0 does nothing, as in CUDA.
func (g *GPU) Free(dev int, p gpumem.Ptr) error {
	if err := g.enter(symtab.Free); err != nil {
		return err
	}
	d, err := g.device(symtab.Free, dev)
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.unsafeDuringCapture(symtab.Free, d); err != nil {
		return err
	}
	if p == 0 {
		return nil // as cuMemFree(0)
	}
	o := g.allocs[uint64(p)]
	if o == nil || (o.kind != objDevice && o.kind != objManaged) {
		return errf(symtab.Free, symtab.CUDAInvalidValue, "%#x is not a live allocation of Malloc or MallocManaged%s", uint64(p), g.hint(uint64(p)))
	}
	if o.kind == objDevice && o.dev != dev {
		return errf(symtab.Free, symtab.CUDAInvalidValue, "%#x belongs to device %d, not %d", uint64(p), o.dev, dev)
	}
	if err := g.syncDevice(symtab.Free, d); err != nil {
		return err
	}
	g.freeObject(o)
	return nil
}

// hint says what an address that is not a live allocation is, for messages.
func (g *GPU) hint(a uint64) string {
	if o := g.spanAt(a); o != nil {
		return fmt.Sprintf(" (it lies inside %s)", o.describe())
	}
	return ""
}

// freeObject releases a Malloc, MallocHost or MallocManaged object; lock held.
func (g *GPU) freeObject(o *object) {
	o.freed = true
	delete(g.allocs, o.start)
	g.spans.remove(o.start, o)
	g.dropTags(o.start, o.size)
	switch o.kind {
	case objDevice:
		d := g.devs[o.dev]
		d.used -= o.size
		d.store.drop(o.start, o.size)
		d.va.release(o.start, o.size)
	case objHost:
		if o.host == nil {
			g.bigStore.drop(o.start, o.size)
		}
		o.host = nil
		g.hostVA.release(o.start, o.size)
	case objManaged:
		for i := range o.mpages {
			if l := o.mpages[i].loc; l >= 0 {
				g.devs[l].resident -= o.pageBytes(i)
			}
		}
		if o.host == nil {
			g.bigStore.drop(o.start, o.size)
		}
		o.host = nil
		g.managedVA.release(o.start, roundUp(o.size, o.mps))
	}
}

// MallocHost allocates pinned host memory (cuMemHostAlloc, portable),
// addressable by every device and, through HostBytes, by the program.
func (g *GPU) MallocHost(size uint64) (gpumem.Ptr, error) {
	if err := g.enter(symtab.MallocHost); err != nil {
		return 0, err
	}
	if err := checkSize(symtab.MallocHost, size); err != nil {
		return 0, err
	}
	if size > maxHostAlloc {
		return 0, vendorErr(symtab.MallocHost, symtab.CUDAOutOfMemory)
	}
	st := g.callers(1)
	rs := roundUp(size, Alignment)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.unsafeDuringCapture(symtab.MallocHost, nil); err != nil {
		return 0, err
	}
	start, ok := g.hostVA.alloc(rs)
	if !ok {
		return 0, vendorErr(symtab.MallocHost, symtab.CUDAOutOfMemory)
	}
	o := g.newObject(objHost, start, rs, size, -1, st)
	if rs <= contiguousLimit {
		o.host = make([]byte, rs)
	}
	g.allocs[start] = o
	g.spans.insert(start, o)
	return gpumem.Ptr(start), nil
}

// FreeHost frees pinned host memory; freeing 0 does nothing, as in CUDA.
func (g *GPU) FreeHost(p gpumem.Ptr) error {
	if err := g.enter(symtab.FreeHost); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.unsafeDuringCapture(symtab.FreeHost, nil); err != nil {
		return err
	}
	if p == 0 {
		return nil
	}
	o := g.allocs[uint64(p)]
	if o == nil || o.kind != objHost {
		return errf(symtab.FreeHost, symtab.CUDAInvalidValue, "%#x is not a live MallocHost allocation%s", uint64(p), g.hint(uint64(p)))
	}
	for _, d := range g.devs {
		if err := g.syncDevice(symtab.FreeHost, d); err != nil {
			return err
		}
	}
	g.freeObject(o)
	return nil
}

// mpage is the state of one managed page.
type mpage struct {
	loc        int8 // locUnpopulated, locHost or a device ordinal
	pref       int8 // locNone, locHost or a device ordinal
	last       int8 // last prefetch location: locNone, locHost or a device
	readMostly bool
	accessedBy uint64 // bit d: device d
}

const (
	locHost        = -1
	locUnpopulated = -2
	locNone        = -3
)

func (o *object) pageBytes(i int) uint64 {
	off := uint64(i) * o.mps
	return min(o.mps, o.size-off)
}

// MallocManaged allocates managed (unified) memory attached globally. Its
// pages are populated on first touch and move with Prefetch, kernels
// (Launch) and host access (HostBytes).
func (g *GPU) MallocManaged(dev int, size uint64) (gpumem.Ptr, error) {
	if err := g.enter(symtab.MallocManaged); err != nil {
		return 0, err
	}
	d, err := g.device(symtab.MallocManaged, dev)
	if err != nil {
		return 0, err
	}
	if d.cfg.NoManaged {
		return 0, errf(symtab.MallocManaged, symtab.CUDANotSupported, "device %d has no managed memory", dev)
	}
	if err := checkSize(symtab.MallocManaged, size); err != nil {
		return 0, err
	}
	if size > maxManagedAlloc {
		return 0, vendorErr(symtab.MallocManaged, symtab.CUDAOutOfMemory)
	}
	st := g.callers(1)
	rs := roundUp(size, Alignment)
	g.mu.Lock()
	defer g.mu.Unlock()
	start, ok := g.managedVA.alloc(roundUp(rs, d.cfg.ManagedPageSize))
	if !ok {
		return 0, vendorErr(symtab.MallocManaged, symtab.CUDAOutOfMemory)
	}
	o := g.newObject(objManaged, start, rs, size, dev, st)
	o.mps = d.cfg.ManagedPageSize
	o.mpages = make([]mpage, (rs+o.mps-1)/o.mps)
	for i := range o.mpages {
		o.mpages[i] = mpage{loc: locUnpopulated, pref: locNone, last: locNone}
	}
	if rs <= contiguousLimit {
		o.host = make([]byte, rs)
	}
	g.allocs[start] = o
	g.spans.insert(start, o)
	return gpumem.Ptr(start), nil
}

// spanAt finds the top-level object containing addr; lock held.
func (g *GPU) spanAt(a uint64) *object {
	o := g.spans.floor(a)
	if o == nil || a >= o.start+o.size {
		return nil
	}
	return o
}

// subAt finds the live allocation of a pool chunk containing a.
func (c *object) subAt(a uint64) *object {
	i := sort.Search(len(c.subs), func(i int) bool { return c.subs[i].start > a }) - 1
	if i < 0 {
		return nil
	}
	s := c.subs[i]
	if a >= s.start+s.size {
		return nil
	}
	return s
}

// use is one owner of the memory an operation touches, as resolved when the
// operation was queued; the detector checks it again when the operation runs.
type use struct {
	obj        *object
	addr, size uint64
}

// resolve checks that [a, a+n) is usable memory and returns its owners
// (innermost: a tag, a pool allocation, or the allocation itself). dev is
// the device that will touch it (-1: the host); kernel says whether a kernel
// touches it directly, which needs peer access to other devices' memory.
// Lock held.
func (g *GPU) resolve(m symtab.Op, a, n uint64, dev int, kernel bool) ([]use, error) {
	if n == 0 {
		return nil, nil
	}
	if a == 0 || a+n < a {
		return nil, errf(m, symtab.CUDAInvalidValue, "bad range [%#x, +%d)", a, n)
	}
	end := a + n
	var uses []use
	for cur := a; cur < end; {
		o := g.spanAt(cur)
		if o == nil {
			return nil, errf(m, symtab.CUDAInvalidValue, "%s", g.notAllocated(cur))
		}
		inner := o
		segEnd := min(end, o.end())
		switch o.kind {
		case objPoolChunk:
			s := o.subAt(cur)
			if s == nil {
				return nil, errf(m, symtab.CUDAInvalidValue, "%#x lies in a pool's memory but in no live allocation", cur)
			}
			if end > s.end() {
				return nil, errf(m, symtab.CUDAInvalidValue, "range [%#x, %#x) runs past the end of %s", a, end, s.describe())
			}
			inner = s
			if kernel && dev >= 0 && dev != o.dev && o.pool.access[dev] == gpumem.AccessNone {
				return nil, errf(m, symtab.CUDAInvalidValue, "device %d has no access to %s (MemPoolSetAccess)", dev, s.describe())
			}
		case objMapping:
			if dev >= 0 && o.access[dev] == gpumem.AccessNone {
				return nil, errf(m, symtab.CUDAInvalidValue, "device %d has no access to %s (MemSetAccess)", dev, o.describe())
			}
		default:
			if end > o.end() {
				return nil, errf(m, symtab.CUDAInvalidValue, "range [%#x, %#x) runs past the end of %s", a, end, o.describe())
			}
			if kernel && dev >= 0 && (o.kind == objDevice || o.kind == objGraphAlloc) && o.dev != dev && !g.devs[dev].peer[o.dev] {
				return nil, errf(m, symtab.CUDAInvalidValue, "device %d has no peer access to %s (EnablePeerAccess)", dev, o.describe())
			}
		}
		if g.tags.n > 0 {
			if t := g.tags.floor(cur); t != nil && cur < t.end() && segEnd <= t.end() {
				inner = t
			}
		}
		uses = append(uses, use{obj: inner, addr: cur, size: segEnd - cur})
		cur = segEnd
	}
	return uses, nil
}

// innermost returns the current innermost owner of address a, or nil.
func (g *GPU) innermost(a, end uint64) *object {
	o := g.spanAt(a)
	if o == nil {
		return nil
	}
	if o.kind == objPoolChunk {
		o = o.subAt(a)
		if o == nil {
			return nil
		}
	}
	if g.tags.n > 0 {
		if t := g.tags.floor(a); t != nil && a < t.end() && end <= t.end() {
			return t
		}
	}
	return o
}

// segment finds the backing of address a: a contiguous host slice, or a page
// store and the offset in it; n is how many bytes from a it covers. Lock held.
func (g *GPU) segment(a uint64) (host []byte, ps *pageStore, off, n uint64, ok bool) {
	o := g.spanAt(a)
	if o == nil {
		return nil, nil, 0, 0, false
	}
	n = o.end() - a
	switch o.kind {
	case objHost, objManaged:
		if o.host != nil {
			return o.host[a-o.start:], nil, 0, n, true
		}
		return nil, g.bigStore, a, n, true
	case objMapping:
		return nil, o.mh.store, o.hoff + (a - o.start), n, true
	case objGraphAlloc:
		if !o.live {
			return nil, nil, 0, 0, false
		}
	}
	return nil, g.devs[o.dev].store, a, n, true
}

// readMem copies [a, a+len(dst)) into dst; false if part of it is gone.
func (g *GPU) readMem(a uint64, dst []byte) bool {
	for len(dst) > 0 {
		host, ps, off, n, ok := g.segment(a)
		if !ok {
			return false
		}
		n = min(n, uint64(len(dst)))
		if host != nil {
			copy(dst[:n], host)
		} else {
			ps.read(off, dst[:n])
		}
		dst = dst[n:]
		a += n
	}
	return true
}

// writeMem copies src to [a, a+len(src)); false if part of it is gone.
func (g *GPU) writeMem(a uint64, src []byte) bool {
	for len(src) > 0 {
		host, ps, off, n, ok := g.segment(a)
		if !ok {
			return false
		}
		n = min(n, uint64(len(src)))
		if host != nil {
			copy(host, src[:n])
		} else {
			ps.write(off, src[:n])
		}
		src = src[n:]
		a += n
	}
	return true
}

func (g *GPU) fillMem(a, size uint64, v byte) bool {
	for size > 0 {
		host, ps, off, n, ok := g.segment(a)
		if !ok {
			return false
		}
		n = min(n, size)
		if host != nil {
			b := host[:n]
			for i := range b {
				b[i] = v
			}
		} else {
			ps.fill(off, n, v)
		}
		size -= n
		a += n
	}
	return true
}

// copyMem copies size bytes from src to dst through a bounded buffer.
func (g *GPU) copyMem(dst, src, size uint64) bool {
	const chunk = 1 << 20
	buf := make([]byte, min(size, chunk))
	if dst > src && dst < src+size {
		// Overlapping, copy backwards.
		for size > 0 {
			n := min(size, chunk)
			if !g.readMem(src+size-n, buf[:n]) || !g.writeMem(dst+size-n, buf[:n]) {
				return false
			}
			size -= n
		}
		return true
	}
	for size > 0 {
		n := min(size, chunk)
		if !g.readMem(src, buf[:n]) || !g.writeMem(dst, buf[:n]) {
			return false
		}
		src += n
		dst += n
		size -= n
	}
	return true
}

// HostBytes returns the host's view of pinned host or managed memory
// [p, p+n): a slice that aliases the simulated memory, for tests to read and
// write directly. Managed pages it covers migrate to the host, as a host
// access would fault them there. Device memory is not host-accessible.
func (g *GPU) HostBytes(p gpumem.Ptr, n uint64) ([]byte, error) {
	if g == nil {
		return nil, errNil("HostBytes")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed.Load() {
		return nil, fmt.Errorf("sim: HostBytes: %w", gpumem.ErrClosed)
	}
	a := uint64(p)
	o := g.spanAt(a)
	if o == nil || (o.kind != objHost && o.kind != objManaged) {
		return nil, fmt.Errorf("sim: HostBytes: %#x is not pinned host or managed memory%s: %w", a, g.hint(a), gpumem.ErrInvalidValue)
	}
	if a+n > o.end() || a+n < a {
		return nil, fmt.Errorf("sim: HostBytes: [%#x, +%d) runs past the end of %s: %w", a, n, o.describe(), gpumem.ErrInvalidValue)
	}
	if o.host == nil {
		return nil, fmt.Errorf("sim: HostBytes: %s is larger than 4 GiB and backed by pages; use CopyFromDevice/CopyToDevice: %w", o.describe(), gpumem.ErrNotSupported)
	}
	if o.kind == objManaged {
		g.touchManaged(o, a, n, locHost, true)
	}
	off := a - o.start
	return o.host[off : off+n : off+n], nil
}

// Tag annotates [p, p+size) inside a live allocation as a block handed out
// by a sub-allocator (a caching allocator carving segments), owned by owner.
// The use-after-free detector then treats the block like an allocation of
// its own: work queued on the block that runs after Untag, or after the
// range was tagged for another owner, is reported as a Violation. Tags must
// not overlap. Tagging is optional; untagged memory is checked at the
// granularity of its allocation.
func (g *GPU) Tag(p gpumem.Ptr, size uint64, owner uint64) error {
	if g == nil {
		return errNil("Tag")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	a := uint64(p)
	if size == 0 || a+size < a {
		return fmt.Errorf("sim: Tag: bad range [%#x, +%d): %w", a, size, gpumem.ErrInvalidValue)
	}
	if _, err := g.resolve(symtab.Launch, a, size, -1, false); err != nil {
		return fmt.Errorf("sim: Tag: %w", err)
	}
	if t := g.tags.floor(a + size - 1); t != nil && t.end() > a {
		return fmt.Errorf("sim: Tag: [%#x, +%d) overlaps %s: %w", a, size, t.describe(), gpumem.ErrInvalidValue)
	}
	t := g.newObject(objTag, a, size, size, -1, g.callers(1))
	t.owner = owner
	g.tags.insert(a, t)
	return nil
}

// Untag removes the tag starting at p, as a sub-allocator does when it frees
// the block; work still queued on the block is then reported when it runs.
func (g *GPU) Untag(p gpumem.Ptr) error {
	if g == nil {
		return errNil("Untag")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.tags.floor(uint64(p))
	if t == nil || t.start != uint64(p) {
		return fmt.Errorf("sim: Untag: no tag starts at %#x: %w", uint64(p), gpumem.ErrInvalidValue)
	}
	t.freed = true
	g.tags.remove(t.start, t)
	return nil
}

// UntagAsync removes the tag starting at p in stream order: the tag leaves
// the index at once, so the range can be tagged for its next owner (a
// caching allocator reusing the block on the same stream), and counts as
// freed when s reaches this point. Work queued on s before it is fine; work
// on other streams that runs later is reported. A sub-allocator calls it
// when a block becomes reusable on s, and Untag for blocks that become
// reusable once other streams' recorded work is known to be complete.
func (g *GPU) UntagAsync(p gpumem.Ptr, s gpumem.Stream) error {
	if g == nil {
		return errNil("UntagAsync")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.lookupStream(symtab.Launch, s)
	if err != nil {
		return fmt.Errorf("sim: UntagAsync: %w", err)
	}
	t := g.tags.floor(uint64(p))
	if t == nil || t.start != uint64(p) {
		return fmt.Errorf("sim: UntagAsync: no tag starts at %#x: %w", uint64(p), gpumem.ErrInvalidValue)
	}
	g.tags.remove(t.start, t)
	if st.cap != nil || g.inlineReady(st) {
		t.freed = true
		return nil
	}
	return g.enqueue(st, &op{kind: opUntag, m: symtab.Launch, obj: t})
}

// dropTags removes the tags inside a range being freed.
func (g *GPU) dropTags(start, size uint64) {
	if g.tags.n == 0 {
		return
	}
	for {
		t := g.tags.ceil(start)
		if t == nil || t.start >= start+size {
			return
		}
		t.freed = true
		g.tags.remove(t.start, t)
	}
}
