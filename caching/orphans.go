package caching

import (
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
)

// A physical allocation or a virtual range whose release the device refused
// is not forgotten: the device still holds it. It waits here, and EmptyCache
// and Close try again, reporting what still fails; so a transient failure
// leaks nothing past Close.

// orphanRange is a virtual range whose MemAddressFree failed.
type orphanRange struct {
	addr gpumem.Ptr
	size uint64
}

// releaseHandleLocked releases h, a physical allocation of size bytes no
// longer counted as reserved, or keeps it for a later try and counts it as
// unreleased. d.mu must be held.
func (d *device) releaseHandleLocked(h gpumem.MemHandle, size uint64) error {
	if err := d.a.b.MemRelease(h); err != nil {
		d.orphans = append(d.orphans, physical{h, size})
		d.stats.UnreleasedBytes += int64(size)
		return fmt.Errorf("caching: releasing %s of physical memory (kept, tried again by EmptyCache and Close): %w",
			gpumem.FormatBytes(size), err)
	}
	return nil
}

// freeRangeLocked frees a virtual range, or keeps it for a later try. d.mu
// must be held.
func (d *device) freeRangeLocked(addr gpumem.Ptr, size uint64) error {
	if err := d.a.b.MemAddressFree(addr, size); err != nil {
		d.orphanRanges = append(d.orphanRanges, orphanRange{addr, size})
		return fmt.Errorf("caching: freeing the virtual range %#x (kept, tried again by EmptyCache and Close): %w", uintptr(addr), err)
	}
	return nil
}

// retryOrphansLocked tries again to release what the device refused, and
// reports what it still refuses. d.mu must be held.
func (d *device) retryOrphansLocked() error {
	var errs []error
	hs := d.orphans
	d.orphans = nil
	for _, o := range hs {
		d.stats.UnreleasedBytes -= int64(o.size)
		if err := d.releaseHandleLocked(o.h, o.size); err != nil {
			errs = append(errs, err)
		}
	}
	rs := d.orphanRanges
	d.orphanRanges = nil
	for _, r := range rs {
		if err := d.freeRangeLocked(r.addr, r.size); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
