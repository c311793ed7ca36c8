package native

import (
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

// MemAddressReserve reserves a virtual address range.
func (b *Backend) MemAddressReserve(size, alignment uint64) (gpumem.Ptr, error) {
	c := getCell()
	defer putCell(c)
	if err := b.call(0, symtab.MemAddressReserve, c.addr(0), uintptr(size), uintptr(alignment), 0, 0, 0); err != nil {
		return 0, err
	}
	return gpumem.Ptr(c[0]), nil
}

// MemAddressFree releases a reserved range.
func (b *Backend) MemAddressFree(p gpumem.Ptr, size uint64) error {
	return b.call(0, symtab.MemAddressFree, uintptr(p), uintptr(size), 0, 0, 0, 0)
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
	return b.call(h.Device, symtab.MemMap, uintptr(p), uintptr(size), uintptr(offset), uintptr(h.Handle), 0, 0)
}

// MemUnmap unmaps a range.
func (b *Backend) MemUnmap(p gpumem.Ptr, size uint64) error {
	return b.call(0, symtab.MemUnmap, uintptr(p), uintptr(size), 0, 0, 0, 0)
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
