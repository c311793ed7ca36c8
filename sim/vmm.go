package sim

import (
	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// The virtual memory API: reservations of address space (MemAddressReserve),
// physical allocations (MemCreate, counted against the device's capacity),
// mappings of a physical allocation's range into a reservation (MemMap) and
// access rights per device (MemSetAccess), with CUDA's rules: sizes and
// offsets are multiples of the granularity, a mapping needs access set
// before any device uses it, a reservation cannot be freed while mapped, and
// a released physical allocation lives until its last mapping is unmapped.

type memHandle struct {
	id       uint64
	dev      *device
	size     uint64
	store    *pageStore
	released bool
	maps     int
	stack    stack
}

func (g *GPU) vmmDevice(m symtab.Op, dev int) (*device, error) {
	d, err := g.device(m, dev)
	if err != nil {
		return nil, err
	}
	if d.cfg.NoVMM {
		return nil, errf(m, symtab.CUDANotSupported, "device %d has no virtual memory management", dev)
	}
	return d, nil
}

// anyVMM returns the largest granularity of the devices with the virtual
// memory API, or an error if none has it.
func (g *GPU) anyVMM(m symtab.Op) (uint64, error) {
	var gran uint64
	for _, d := range g.devs {
		if !d.cfg.NoVMM {
			gran = max(gran, d.cfg.Granularity)
		}
	}
	if gran == 0 {
		return 0, errf(m, symtab.CUDANotSupported, "no device has virtual memory management")
	}
	return gran, nil
}

// MemGranularity returns the device's granularity (minimum and recommended
// are the same in the simulator: Config's Granularity, 2 MiB by default).
func (g *GPU) MemGranularity(dev int, recommended bool) (uint64, error) {
	if err := g.enter(symtab.MemGranularity); err != nil {
		return 0, err
	}
	d, err := g.vmmDevice(symtab.MemGranularity, dev)
	if err != nil {
		return 0, err
	}
	return d.cfg.Granularity, nil
}

// MemAddressReserve reserves size bytes of address space aligned to
// alignment (0: the granularity). size must be a multiple of the granularity.
func (g *GPU) MemAddressReserve(size, alignment uint64) (gpumem.Ptr, error) {
	if err := g.enter(symtab.MemAddressReserve); err != nil {
		return 0, err
	}
	gran, err := g.anyVMM(symtab.MemAddressReserve)
	if err != nil {
		return 0, err
	}
	if size == 0 || size%gran != 0 || size > 1<<50 {
		return 0, errf(symtab.MemAddressReserve, symtab.CUDAInvalidValue, "size %d is not a positive multiple of the granularity %d", size, gran)
	}
	if alignment == 0 {
		alignment = gran
	}
	if !pow2(alignment) || alignment > 1<<40 {
		return 0, errf(symtab.MemAddressReserve, symtab.CUDAInvalidValue, "alignment %d is not a power of two", alignment)
	}
	alignment = max(alignment, gran)
	stk := g.callers(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	start, ok := g.reserveVA.alloc(size + alignment)
	if !ok {
		return 0, vendorErr(symtab.MemAddressReserve, symtab.CUDAOutOfMemory)
	}
	a := roundUp(start, alignment)
	if a > start {
		g.reserveVA.release(start, a-start)
	}
	if tail := start + size + alignment - (a + size); tail > 0 {
		g.reserveVA.release(a+size, tail)
	}
	r := g.newObject(objReserve, a, size, size, -1, stk)
	g.reserves.insert(a, r)
	return gpumem.Ptr(a), nil
}

// MemAddressFree frees a reservation; it must be the whole reservation and
// nothing may be mapped in it.
func (g *GPU) MemAddressFree(p gpumem.Ptr, size uint64) error {
	if err := g.enter(symtab.MemAddressFree); err != nil {
		return err
	}
	if _, err := g.anyVMM(symtab.MemAddressFree); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.reserves.floor(uint64(p))
	if r == nil || r.start != uint64(p) || r.size != size {
		return errf(symtab.MemAddressFree, symtab.CUDAInvalidValue, "[%#x, +%d) is not a reservation", uint64(p), size)
	}
	if r.mapped > 0 {
		return errf(symtab.MemAddressFree, symtab.CUDAInvalidValue, "the reservation at %#x still has %d mappings", uint64(p), r.mapped)
	}
	r.freed = true
	g.reserves.remove(r.start, r)
	g.reserveVA.release(r.start, r.size)
	return nil
}

// MemCreate creates a physical allocation of size bytes (a multiple of the
// granularity) on dev, counted against its capacity.
func (g *GPU) MemCreate(dev int, size uint64) (gpumem.MemHandle, error) {
	if err := g.enter(symtab.MemCreate); err != nil {
		return gpumem.MemHandle{}, err
	}
	d, err := g.vmmDevice(symtab.MemCreate, dev)
	if err != nil {
		return gpumem.MemHandle{}, err
	}
	if size == 0 || size%d.cfg.Granularity != 0 {
		return gpumem.MemHandle{}, errf(symtab.MemCreate, symtab.CUDAInvalidValue, "size %d is not a positive multiple of the granularity %d", size, d.cfg.Granularity)
	}
	stk := g.callers(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	if size > d.cfg.Capacity || !g.reserve(d, size) {
		return gpumem.MemHandle{}, vendorErr(symtab.MemCreate, symtab.CUDAOutOfMemory)
	}
	h := &memHandle{id: uint64(g.handle()), dev: d, size: size, store: newPageStore(), stack: stk}
	g.handles[h.id] = h
	return gpumem.MemHandle{Handle: h.id, Device: dev}, nil
}

func (g *GPU) lookupHandle(m symtab.Op, mh gpumem.MemHandle) (*memHandle, error) {
	h := g.handles[mh.Handle]
	if h == nil || h.released || h.dev.ord != mh.Device {
		return nil, errf(m, symtab.CUDAInvalidValue, "memhandle(dev %d, %#x) is not a live physical allocation", mh.Device, mh.Handle)
	}
	return h, nil
}

// MemRelease releases a physical allocation; its memory returns to the
// device once its last mapping is unmapped.
func (g *GPU) MemRelease(mh gpumem.MemHandle) error {
	if err := g.enter(symtab.MemRelease); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	h, err := g.lookupHandle(symtab.MemRelease, mh)
	if err != nil {
		return err
	}
	h.released = true
	delete(g.handles, h.id)
	if h.maps == 0 {
		g.freeHandle(h)
	}
	return nil
}

func (g *GPU) freeHandle(h *memHandle) {
	h.dev.used -= h.size
	h.store = nil
}

// MemMap maps [offset, offset+size) of the physical allocation at p, inside
// one reservation, where nothing is mapped yet. p, size and offset must be
// multiples of the granularity.
func (g *GPU) MemMap(p gpumem.Ptr, size, offset uint64, mh gpumem.MemHandle) error {
	if err := g.enter(symtab.MemMap); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	h, err := g.lookupHandle(symtab.MemMap, mh)
	if err != nil {
		return err
	}
	gran := h.dev.cfg.Granularity
	a := uint64(p)
	if size == 0 || a%gran != 0 || size%gran != 0 || offset%gran != 0 {
		return errf(symtab.MemMap, symtab.CUDAInvalidValue, "address %#x, size %d and offset %d must be multiples of the granularity %d", a, size, offset, gran)
	}
	if offset+size > h.size || offset+size < offset {
		return errf(symtab.MemMap, symtab.CUDAInvalidValue, "[%d, +%d) exceeds the physical allocation of %d bytes", offset, size, h.size)
	}
	r := g.reserves.floor(a)
	if r == nil || a+size > r.end() {
		return errf(symtab.MemMap, symtab.CUDAInvalidValue, "[%#x, +%d) is not inside one reservation", a, size)
	}
	if o := g.spans.floor(a + size - 1); o != nil && o.end() > a {
		return errf(symtab.MemMap, symtab.CUDAInvalidValue, "[%#x, +%d) overlaps %s", a, size, o.describe())
	}
	o := g.newObject(objMapping, a, size, size, h.dev.ord, g.callers(1))
	o.mh, o.hoff, o.res = h, offset, r
	o.access = make([]gpumem.Access, len(g.devs))
	g.spans.insert(a, o)
	h.maps++
	r.mapped++
	return nil
}

// mappingsIn returns the mappings that exactly tile [a, a+size), or nil.
func (g *GPU) mappingsIn(a, size uint64) []*object {
	var out []*object
	for cur := a; cur < a+size; {
		o := g.spans.floor(cur)
		if o == nil || o.kind != objMapping || o.start != cur || o.end() > a+size {
			return nil
		}
		out = append(out, o)
		cur = o.end()
	}
	return out
}

// MemUnmap unmaps [p, p+size), which must consist of whole mappings. It
// does not wait for queued work: work still queued on the range is
// reported as a Violation when it runs.
func (g *GPU) MemUnmap(p gpumem.Ptr, size uint64) error {
	if err := g.enter(symtab.MemUnmap); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	a := uint64(p)
	ms := g.mappingsIn(a, size)
	if size == 0 || ms == nil {
		return errf(symtab.MemUnmap, symtab.CUDAInvalidValue, "[%#x, +%d) is not a whole number of mappings", a, size)
	}
	for _, o := range ms {
		o.freed = true
		g.spans.remove(o.start, o)
		g.dropTags(o.start, o.size)
		o.res.mapped--
		o.mh.maps--
		if o.mh.released && o.mh.maps == 0 {
			g.freeHandle(o.mh)
		}
	}
	return nil
}

// MemSetAccess sets device dev's access to the mapped range [p, p+size).
func (g *GPU) MemSetAccess(p gpumem.Ptr, size uint64, dev int, a gpumem.Access) error {
	if err := g.enter(symtab.MemSetAccess); err != nil {
		return err
	}
	if _, err := g.vmmDevice(symtab.MemSetAccess, dev); err != nil {
		return err
	}
	if a < gpumem.AccessNone || a > gpumem.AccessReadWrite {
		return errf(symtab.MemSetAccess, symtab.CUDAInvalidValue, "bad access %d", int(a))
	}
	if uint64(p)+size < uint64(p) {
		return errf(symtab.MemSetAccess, symtab.CUDAInvalidValue, "%#x + %d wraps past the address space", uint64(p), size)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	start := uint64(p)
	var ms []*object
	for cur := start; cur < start+size; {
		o := g.spanAt(cur)
		if o == nil || o.kind != objMapping {
			return errf(symtab.MemSetAccess, symtab.CUDAInvalidValue, "%#x is not mapped", cur)
		}
		ms = append(ms, o)
		cur = o.end()
	}
	if size == 0 {
		return errf(symtab.MemSetAccess, symtab.CUDAInvalidValue, "size 0")
	}
	for _, o := range ms {
		if o.dev != dev && !g.peerPossible(dev, o.dev) {
			return errf(symtab.MemSetAccess, symtab.CUDAPeerAccessUnsupported, "device %d cannot access device %d", dev, o.dev)
		}
	}
	for _, o := range ms {
		o.access[dev] = a
	}
	return nil
}
