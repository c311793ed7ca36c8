package native

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// MemGranularity returns dev's physical allocation granularity.
func (b *Backend) MemGranularity(dev int, recommended bool) (uint64, error) {
	if uint(dev) >= uint(b.nDev) {
		return 0, b.badDevice(dev)
	}
	c := getCell()
	defer putCell(c)
	b.d.WriteAllocProp(b, (*[AllocPropSize]byte)(unsafe.Pointer(&c[4])), b.handle[dev])
	var opt uintptr // CU_MEM_ALLOC_GRANULARITY_MINIMUM / hipMemAllocationGranularityMinimum
	if recommended {
		opt = 1
	}
	if err := b.call(dev, symtab.MemGranularity, c.addr(0), c.addr(4), opt, 0, 0, 0); err != nil {
		return 0, err
	}
	return c[0], nil
}

// reserveSize is the size MemAddressReserve and MemAddressFree pass for a
// range of size bytes: with Dialect.ReserveAligned, size rounded up to the
// largest minimum granularity over the devices, so that a size aligned for
// one device is never refused (as a false out of memory) because device 0's
// granularity is coarser.
func (b *Backend) reserveSize(size uint64) uint64 {
	if !b.d.ReserveAligned {
		return size
	}
	b.reserveG.Do(func() {
		for dev := 0; dev < b.nDev; dev++ {
			if g, err := b.MemGranularity(dev, false); err == nil && g > b.reserveGr {
				b.reserveGr = g
			}
		}
	})
	if g := b.reserveGr; g != 0 && size%g != 0 {
		return (size/g + 1) * g
	}
	return size
}

// MemAddressReserve reserves a virtual address range.
func (b *Backend) MemAddressReserve(size, alignment uint64) (gpumem.Ptr, error) {
	c := getCell()
	defer putCell(c)
	if err := b.call(0, symtab.MemAddressReserve, c.addr(0), uintptr(b.reserveSize(size)), uintptr(alignment), 0, 0, 0); err != nil {
		return 0, err
	}
	return gpumem.Ptr(c[0]), nil
}

// MemAddressFree releases a reserved range.
func (b *Backend) MemAddressFree(p gpumem.Ptr, size uint64) error {
	return b.call(0, symtab.MemAddressFree, uintptr(p), uintptr(b.reserveSize(size)), 0, 0, 0, 0)
}

// MemCreate creates physical memory on dev.
func (b *Backend) MemCreate(dev int, size uint64) (gpumem.MemHandle, error) {
	if uint(dev) >= uint(b.nDev) {
		return gpumem.MemHandle{}, b.badDevice(dev)
	}
	c := getCell()
	defer putCell(c)
	b.d.WriteAllocProp(b, (*[AllocPropSize]byte)(unsafe.Pointer(&c[4])), b.handle[dev])
	if err := b.call(dev, symtab.MemCreate, c.addr(0), uintptr(size), c.addr(4), 0, 0, 0); err != nil {
		return gpumem.MemHandle{}, err
	}
	return gpumem.MemHandle{Handle: c[0], Device: dev}, nil
}

// MemRelease releases physical memory.
func (b *Backend) MemRelease(h gpumem.MemHandle) error {
	return b.call(h.Device, symtab.MemRelease, uintptr(h.Handle), 0, 0, 0, 0, 0)
}

// MemMap maps physical memory into a reserved range.
func (b *Backend) MemMap(p gpumem.Ptr, size, offset uint64, h gpumem.MemHandle) error {
	if err := b.call(h.Device, symtab.MemMap, uintptr(p), uintptr(size), uintptr(offset), uintptr(h.Handle), 0, 0); err != nil {
		return err
	}
	if b.d.UnmapByMapping {
		b.maps.add(p, size)
	}
	return nil
}

// MemUnmap unmaps a range. With Dialect.UnmapByMapping a range that holds
// several of MemMap's mappings is unmapped one mapping at a time, in address
// order, since the vendor's call would release only the first; a range that
// holds some of them but is not exactly a run of them (part of a mapping,
// or a gap) is refused with ErrInvalidValue and nothing is unmapped.
func (b *Backend) MemUnmap(p gpumem.Ptr, size uint64) error {
	if !b.d.UnmapByMapping {
		return b.call(0, symtab.MemUnmap, uintptr(p), uintptr(size), 0, 0, 0, 0)
	}
	if b.maps.takeExact(p, size) {
		// One mapping spans the range (mappings never overlap): the
		// common case, with no scan and no slice.
		if err := b.call(0, symtab.MemUnmap, uintptr(p), uintptr(size), 0, 0, 0, 0); err != nil {
			b.maps.add(p, size)
			return err
		}
		return nil
	}
	within := b.maps.within(p, size)
	if len(within) == 0 {
		// No mapping of this backend's starts in the range: the vendor
		// judges it.
		return b.call(0, symtab.MemUnmap, uintptr(p), uintptr(size), 0, 0, 0, 0)
	}
	// The mappings must tile the range exactly, a single one included: one
	// that runs past its end would be unmapped whole (the vendor's call
	// releases the whole mapping at its address, whatever the size), memory
	// the caller did not name, and a gap is a range that is not mapped.
	at := p
	for _, m := range within {
		if m.p != at || uint64(m.p-p)+m.size > size {
			return fmt.Errorf("gpumem: %s: unmapping [%#x, +%d): the range is not a whole number of mappings (one at %#x of %d bytes): %w", b.d.Name, uintptr(p), size, uintptr(m.p), m.size, gpumem.ErrInvalidValue)
		}
		at = m.p + gpumem.Ptr(m.size)
	}
	if uint64(at-p) != size {
		return fmt.Errorf("gpumem: %s: unmapping [%#x, +%d): the mappings cover %d bytes of it: %w", b.d.Name, uintptr(p), size, uint64(at-p), gpumem.ErrInvalidValue)
	}
	for i, m := range within {
		if err := b.call(0, symtab.MemUnmap, uintptr(m.p), uintptr(m.size), 0, 0, 0, 0); err != nil {
			b.maps.remove(within[:i])
			return fmt.Errorf("unmapping mapping %d of %d at %#x (%d bytes) of the range at %#x: %w", i+1, len(within), uintptr(m.p), m.size, uintptr(p), err)
		}
	}
	b.maps.remove(within)
	return nil
}

// mapping is one MemMap: size bytes at p.
type mapping struct {
	p    gpumem.Ptr
	size uint64
}

// mappings records the live MemMap mappings by start address (HIP only;
// virtual memory calls are off the allocation fast path).
type mappings struct {
	mu sync.Mutex
	m  map[gpumem.Ptr]uint64
}

func (ms *mappings) add(p gpumem.Ptr, size uint64) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.m == nil {
		ms.m = map[gpumem.Ptr]uint64{}
	}
	ms.m[p] = size
}

// takeExact removes and reports a mapping of exactly size bytes at p.
func (ms *mappings) takeExact(p gpumem.Ptr, size uint64) bool {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if n, ok := ms.m[p]; ok && n == size {
		delete(ms.m, p)
		return true
	}
	return false
}

// within returns the mappings that start in [p, p+size), in address order.
func (ms *mappings) within(p gpumem.Ptr, size uint64) []mapping {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	var out []mapping
	for q, n := range ms.m {
		if q >= p && uint64(q-p) < size {
			out = append(out, mapping{q, n})
		}
	}
	slices.SortFunc(out, func(a, b mapping) int { return cmp.Compare(a.p, b.p) })
	return out
}

func (ms *mappings) remove(done []mapping) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	for _, m := range done {
		delete(ms.m, m.p)
	}
}

// MemSetAccess grants dev access to a mapped range.
func (b *Backend) MemSetAccess(p gpumem.Ptr, size uint64, dev int, a gpumem.Access) error {
	if uint(dev) >= uint(b.nDev) {
		return b.badDevice(dev)
	}
	f, ok := accessFlags(a)
	if !ok {
		return b.badAccess(a)
	}
	c := getCell()
	defer putCell(c)
	EncodeAccessDesc(c.bytes()[:AccessDescSize], b.handle[dev], f)
	return b.call(dev, symtab.MemSetAccess, uintptr(p), uintptr(size), c.addr(0), 1, 0, 0)
}
