package caching

import (
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
)

// Physical memory of the virtual memory API: made and mapped here, released
// through releaseHandleLocked (orphans.go).

// mapNewLocked creates n bytes of physical memory on the device and maps
// them at addr (access not granted). d.mu must be held.
func (d *device) mapNewLocked(addr gpumem.Ptr, n uint64) (gpumem.MemHandle, error) {
	h, err := d.a.b.MemCreate(d.id, n)
	if err != nil {
		return gpumem.MemHandle{}, fmt.Errorf("creating %s of physical memory: %w", gpumem.FormatBytes(n), err)
	}
	if err := d.mapLocked(addr, n, h); err != nil {
		return gpumem.MemHandle{}, err
	}
	return h, nil
}

// mapLocked maps the n bytes of h at addr; h is released (or kept as an
// orphan) if it cannot be. d.mu must be held.
func (d *device) mapLocked(addr gpumem.Ptr, n uint64, h gpumem.MemHandle) error {
	if err := d.a.b.MemMap(addr, n, 0, h); err != nil {
		return errors.Join(fmt.Errorf("mapping %#x: %w", uintptr(addr), err), d.releaseHandleLocked(h, n))
	}
	return nil
}

// physical is a physical allocation (MemCreate) of size bytes.
type physical struct {
	h    gpumem.MemHandle
	size uint64
}
