package managed

// See doc.go for an overview.

import (
	"errors"
	"fmt"
	"sort"

	"github.com/gpumem/gpumem"
)

// ErrResidencyMismatch is matched by VerifyResidency's error when the
// driver's range attributes disagree with the allocator's beliefs.
var ErrResidencyMismatch = errors.New("managed: residency differs from the driver's range attributes")

// Residency returns the bytes of live buffers believed resident at each
// location, from the allocator's own advice and prefetches: a buffer counts
// at its Location, except that buffers placed on a device that cannot
// migrate pages count at the host, where their pages stay. Locations with
// no bytes are left out.
func (a *Allocator) Residency() map[gpumem.Location]uint64 {
	if a == nil {
		return nil
	}
	out := map[gpumem.Location]uint64{}
	for i := range a.resident {
		n := a.resident[i].Load()
		if n <= 0 {
			continue
		}
		loc := gpumem.HostLocation()
		if i > 0 {
			loc = gpumem.DeviceLocation(i - 1)
		}
		out[loc] = uint64(n)
	}
	return out
}

// VerifyResidency checks every live buffer against the backend's range
// attributes: its preferred location must be the buffer's Location, and,
// when the buffer's last move prefetched it, so must the last prefetch
// location. Only the whole pages (Options.PageSize) inside a buffer are
// checked, since buffers that share a page share its advice. A
// disagreement is an error matching ErrResidencyMismatch that lists the
// buffers; a backend without range attributes gives its ErrNotSupported.
func (a *Allocator) VerifyResidency() error {
	if a == nil {
		return errNil("VerifyResidency")
	}
	if err := a.checkOpen(); err != nil {
		return err
	}
	var bufs []*Buffer
	for i := range a.shards {
		sh := &a.shards[i]
		sh.mu.Lock()
		for _, b := range sh.m {
			bufs = append(bufs, b)
		}
		sh.mu.Unlock()
	}
	sort.Slice(bufs, func(i, j int) bool { return bufs[i].Ptr < bufs[j].Ptr })
	ps := a.opts.PageSize
	var bad []error
	for _, b := range bufs {
		lo := (uint64(b.Ptr) + ps - 1) &^ (ps - 1)
		hi := (uint64(b.Ptr) + b.Size) &^ (ps - 1)
		if hi <= lo {
			continue
		}
		b.mu.Lock()
		if b.freed {
			b.mu.Unlock()
			continue
		}
		loc, prefetched := b.loc, b.prefetched
		pref, err := a.b.RangeLocation(gpumem.Ptr(lo), hi-lo, gpumem.RangePreferredLocation)
		var last gpumem.Location
		if err == nil && prefetched {
			last, err = a.b.RangeLocation(gpumem.Ptr(lo), hi-lo, gpumem.RangeLastPrefetchLocation)
		}
		b.mu.Unlock()
		if err != nil {
			return fmt.Errorf("managed: reading the range attributes of %#x: %w", uintptr(b.Ptr), err)
		}
		if pref != loc {
			bad = append(bad, fmt.Errorf("buffer %#x (%s): preferred location %s, believed %s", uintptr(b.Ptr), gpumem.FormatBytes(b.Size), pref, loc))
		}
		if prefetched && last != loc {
			bad = append(bad, fmt.Errorf("buffer %#x (%s): last prefetch location %s, believed %s", uintptr(b.Ptr), gpumem.FormatBytes(b.Size), last, loc))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %w", ErrResidencyMismatch, errors.Join(bad...))
	}
	return nil
}
