package native

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// DefaultMemPool returns dev's default pool.
func (b *Backend) DefaultMemPool(dev int) (gpumem.MemPool, error) {
	if uint(dev) >= uint(b.nDev) {
		return gpumem.MemPool{}, b.badDevice(dev)
	}
	c := getCell()
	defer putCell(c)
	if err := b.call(dev, symtab.DefaultMemPool, c.addr(0), uintptr(b.handle[dev]), 0, 0, 0, 0); err != nil {
		return gpumem.MemPool{}, err
	}
	p := gpumem.MemPool{Handle: uintptr(c[0]), Device: dev}
	return p, b.setupPool(p)
}

// setupPool runs the dialect's PoolSetup once per pool: the default pool's
// first DefaultMemPool, a created pool's MemPoolCreate.
func (b *Backend) setupPool(p gpumem.MemPool) error {
	if b.d.PoolSetup == nil {
		return nil
	}
	if _, done := b.poolsSet.LoadOrStore(p.Handle, struct{}{}); done {
		return nil
	}
	if err := b.d.PoolSetup(b, p); err != nil {
		b.poolsSet.Delete(p.Handle)
		return fmt.Errorf("gpumem: %s: setting up device %d's pool: %w", b.d.Name, p.Device, err)
	}
	return nil
}

// MemPoolCreate creates a pool of pinned device memory on props.Device.
func (b *Backend) MemPoolCreate(props gpumem.PoolProps) (gpumem.MemPool, error) {
	dev := props.Device
	if uint(dev) >= uint(b.nDev) {
		return gpumem.MemPool{}, b.badDevice(dev)
	}
	if props.MaxSize != 0 && !b.d.PoolMaxSize(b) {
		return gpumem.MemPool{}, &gpumem.NotSupportedError{Backend: b.d.Name, Op: "MemPoolCreate",
			Reason: "this runtime version's pool properties have no maximum size"}
	}
	c := getCell()
	defer putCell(c)
	EncodePoolProps(c.bytes(), b.handle[dev], props.MaxSize)
	if err := b.call(dev, symtab.MemPoolCreate, c.addr(12), c.addr(0), 0, 0, 0, 0); err != nil {
		return gpumem.MemPool{}, err
	}
	p := gpumem.MemPool{Handle: uintptr(c[12]), Device: dev}
	b.pools.made(p.Handle)
	if err := b.setupPool(p); err != nil {
		return gpumem.MemPool{}, errors.Join(err, b.MemPoolDestroy(p))
	}
	return p, nil
}

// MemPoolDestroy destroys a created pool. A pool this backend destroyed is
// refused without reaching the library.
func (b *Backend) MemPoolDestroy(p gpumem.MemPool) error {
	if err := b.deadPool(p); err != nil {
		return err
	}
	if err := b.call(p.Device, symtab.MemPoolDestroy, p.Handle, 0, 0, 0, 0, 0); err != nil {
		return err
	}
	b.poolsSet.Delete(p.Handle)
	b.pools.destroyed(p.Handle)
	return nil
}

// deadPool refuses a pool this backend destroyed.
func (b *Backend) deadPool(p gpumem.MemPool) error {
	return b.refuseDead(&b.pools, "pool", p.Handle)
}

func poolAttr(a gpumem.PoolAttribute) (v uintptr, isInt bool, ok bool) {
	// CUmemPool_attribute and hipMemPoolAttr number them alike, 1..8; the
	// three reuse attributes are int, the others 64-bit.
	if a < gpumem.PoolReleaseThreshold || a > gpumem.PoolUsedMemHigh {
		return 0, false, false
	}
	switch a {
	case gpumem.PoolReuseFollowEventDependencies:
		return 1, true, true
	case gpumem.PoolReuseAllowOpportunistic:
		return 2, true, true
	case gpumem.PoolReuseAllowInternalDependencies:
		return 3, true, true
	case gpumem.PoolReleaseThreshold:
		return 4, false, true
	case gpumem.PoolReservedMemCurrent:
		return 5, false, true
	case gpumem.PoolReservedMemHigh:
		return 6, false, true
	case gpumem.PoolUsedMemCurrent:
		return 7, false, true
	}
	return 8, false, true // PoolUsedMemHigh
}

func (b *Backend) badPoolAttr(a gpumem.PoolAttribute) error {
	return fmt.Errorf("gpumem: %s: unknown pool attribute %d: %w", b.d.Name, int(a), gpumem.ErrInvalidValue)
}

// MemPoolSetAttribute sets a pool attribute.
func (b *Backend) MemPoolSetAttribute(p gpumem.MemPool, a gpumem.PoolAttribute, v uint64) error {
	attr, isInt, ok := poolAttr(a)
	if !ok {
		return b.badPoolAttr(a)
	}
	if err := b.deadPool(p); err != nil {
		return err
	}
	c := getCell()
	defer putCell(c)
	if isInt {
		// The int attributes are the reuse policies, booleans: any value
		// but 0 is true (a bare int32(v) made 1<<32 false).
		b32 := int32(0)
		if v != 0 {
			b32 = 1
		}
		*(*int32)(unsafe.Pointer(&c[0])) = b32
	} else {
		c[0] = v
	}
	return b.call(p.Device, symtab.MemPoolSetAttribute, p.Handle, attr, c.addr(0), 0, 0, 0)
}

// MemPoolGetAttribute reads a pool attribute.
func (b *Backend) MemPoolGetAttribute(p gpumem.MemPool, a gpumem.PoolAttribute) (uint64, error) {
	attr, isInt, ok := poolAttr(a)
	if !ok {
		return 0, b.badPoolAttr(a)
	}
	if err := b.deadPool(p); err != nil {
		return 0, err
	}
	c := getCell()
	defer putCell(c)
	if err := b.call(p.Device, symtab.MemPoolGetAttribute, p.Handle, attr, c.addr(0), 0, 0, 0); err != nil {
		return 0, err
	}
	if isInt {
		return uint64(c.i32(0)), nil
	}
	return c[0], nil
}

// MemPoolTrimTo releases unused memory down to keep bytes.
func (b *Backend) MemPoolTrimTo(p gpumem.MemPool, keep uint64) error {
	if err := b.deadPool(p); err != nil {
		return err
	}
	return b.call(p.Device, symtab.MemPoolTrimTo, p.Handle, uintptr(keep), 0, 0, 0, 0)
}

func accessFlags(a gpumem.Access) (uint32, bool) {
	switch a {
	case gpumem.AccessNone:
		return AccessNone, true
	case gpumem.AccessRead:
		return AccessRead, true
	case gpumem.AccessReadWrite:
		return AccessReadWrite, true
	}
	return 0, false
}

func (b *Backend) badAccess(a gpumem.Access) error {
	return fmt.Errorf("gpumem: %s: unknown access %d: %w", b.d.Name, int(a), gpumem.ErrInvalidValue)
}

// MemPoolSetAccess grants dev access to the pool's memory.
func (b *Backend) MemPoolSetAccess(p gpumem.MemPool, dev int, a gpumem.Access) error {
	if uint(dev) >= uint(b.nDev) {
		return b.badDevice(dev)
	}
	f, ok := accessFlags(a)
	if !ok {
		return b.badAccess(a)
	}
	if err := b.deadPool(p); err != nil {
		return err
	}
	c := getCell()
	defer putCell(c)
	EncodeAccessDesc(c.bytes()[:AccessDescSize], b.handle[dev], f)
	return b.call(p.Device, symtab.MemPoolSetAccess, p.Handle, c.addr(0), 1, 0, 0, 0)
}

// MemPoolGetAccess reads dev's access to the pool's memory.
func (b *Backend) MemPoolGetAccess(p gpumem.MemPool, dev int) (gpumem.Access, error) {
	if uint(dev) >= uint(b.nDev) {
		return 0, b.badDevice(dev)
	}
	if err := b.deadPool(p); err != nil {
		return 0, err
	}
	c := getCell()
	defer putCell(c)
	put32(c.bytes()[8:], LocationTypeDevice)
	put32(c.bytes()[12:], uint32(b.handle[dev]))
	if err := b.call(p.Device, symtab.MemPoolGetAccess, c.addr(0), p.Handle, c.addr(1), 0, 0, 0); err != nil {
		return 0, err
	}
	switch c.i32(0) {
	case AccessRead:
		return gpumem.AccessRead, nil
	case AccessReadWrite:
		return gpumem.AccessReadWrite, nil
	}
	return gpumem.AccessNone, nil
}

// MallocAsync allocates from the stream's device's current pool.
func (b *Backend) MallocAsync(size uint64, s gpumem.Stream) (gpumem.Ptr, error) {
	return b.allocOut(s, symtab.MallocAsync, size, s.Handle, 0)
}

// MallocFromPoolAsync allocates from pool p, ordered on s.
func (b *Backend) MallocFromPoolAsync(size uint64, p gpumem.MemPool, s gpumem.Stream) (gpumem.Ptr, error) {
	if err := b.deadPool(p); err != nil {
		return 0, err
	}
	return b.allocOut(s, symtab.MallocFromPoolAsync, size, p.Handle, s.Handle)
}

// FreeAsync frees stream-ordered memory once s reaches this point.
func (b *Backend) FreeAsync(p gpumem.Ptr, s gpumem.Stream) error {
	return b.callOnStream(s, symtab.FreeAsync, uintptr(p), s.Handle, 0, 0, 0, 0)
}
