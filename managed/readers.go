package managed

import (
	"fmt"
	"sort"

	"github.com/gpumem/gpumem"
)

// AddReader advises the buffer to be accessed by device dev
// (AdviseSetAccessedBy): dev's page tables map the pages wherever they
// live, so kernels of dev read them without faulting or pulling them over.
// Call it for each device that will read the buffer besides the one it was
// allocated on. Moves (To) keep a reader's advice and give none of their
// own: after a move to the host no device maps the pages unless it is a
// reader, so a device that is to read host-resident data in place is added
// here. Adding a reader twice is not an error. The advice is undone when
// the buffer is freed, so a cached block handed out again carries only its
// pool's hints.
func (b *Buffer) AddReader(dev int) error {
	if err := b.check(); err != nil {
		return err
	}
	a := b.a
	if err := a.checkOpen(); err != nil {
		return err
	}
	if dev < 0 || dev >= a.ndev {
		return fmt.Errorf("managed: reader device %d of %d: %w", dev, a.ndev, gpumem.ErrInvalidValue)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.freed {
		return b.errFreed()
	}
	if b.readers[dev] {
		return nil
	}
	if b.accessedBy != dev {
		if err := a.b.Advise(b.Ptr, b.Size, gpumem.AdviseSetAccessedBy, gpumem.DeviceLocation(dev)); err != nil {
			return fmt.Errorf("managed: advising %#x accessed by reader device %d: %w", uintptr(b.Ptr), dev, err)
		}
	}
	if b.readers == nil {
		b.readers = make(map[int]bool)
	}
	b.readers[dev] = true
	return nil
}

// RemoveReader undoes AddReader for device dev. Removing a device that is
// not a reader is an error matching ErrInvalidValue.
func (b *Buffer) RemoveReader(dev int) error {
	if err := b.check(); err != nil {
		return err
	}
	a := b.a
	if err := a.checkOpen(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.freed {
		return b.errFreed()
	}
	if !b.readers[dev] {
		return fmt.Errorf("managed: device %d is not a reader of %#x: %w", dev, uintptr(b.Ptr), gpumem.ErrInvalidValue)
	}
	if b.accessedBy != dev {
		if err := a.b.Advise(b.Ptr, b.Size, gpumem.AdviseUnsetAccessedBy, gpumem.DeviceLocation(dev)); err != nil {
			return fmt.Errorf("managed: unsetting reader device %d of %#x: %w", dev, uintptr(b.Ptr), err)
		}
	}
	delete(b.readers, dev)
	return nil
}

// Readers returns the devices added by AddReader, in order.
func (b *Buffer) Readers() []int {
	if b.check() != nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]int, 0, len(b.readers))
	for d := range b.readers {
		out = append(out, d)
	}
	sort.Ints(out)
	return out
}

// dropReadersLocked unsets the accessed-by advice of every reader that the
// placement advice does not also name. b.mu held.
func (b *Buffer) dropReadersLocked() error {
	var first error
	for d := range b.readers {
		if d == b.accessedBy {
			continue
		}
		if err := b.a.b.Advise(b.Ptr, b.Size, gpumem.AdviseUnsetAccessedBy, gpumem.DeviceLocation(d)); err != nil && first == nil {
			first = fmt.Errorf("managed: unsetting reader device %d of %#x: %w", d, uintptr(b.Ptr), err)
		}
	}
	b.readers = nil
	return first
}
