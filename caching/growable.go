package caching

import (
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
)

// growable is the mapping state of a growable segment: a regular large
// segment whose memory is mapped into a virtual range reserved with room
// beyond it, so that, while wholly free, it can grow in place to serve a
// larger request. See doc.go for the policy.
type growable struct {
	va      uint64     // bytes of the reserved range, from the segment's address
	handles []physical // physical allocations mapped one after another
}

// growHeadroom is how many times a growable segment's size its virtual
// range covers (at most twice the device's capacity).
const growHeadroom = 8

// initGrowable turns growable segments on, or off with a message where the
// virtual memory API is unavailable. Like initExpandable, it runs in New
// before the device is shared.
func (d *device) initGrowable() {
	if err := d.initGranularity(); err != nil {
		d.disableGrowableLocked(err)
		return
	}
	d.growOn = true
}

// disableGrowableLocked turns growable segments off on the device, saying
// why through Options.Logf. d.mu must be held.
func (d *device) disableGrowableLocked(err error) {
	d.growOn = false
	d.a.logf("caching: growable segments are off on device %d: the backend's virtual memory API is unavailable (%v); using regular segments", d.id, err)
}

// growableForLocked reports whether a new segment of segSize for pool p is made
// growable: large pools outside captures, with the backend as upstream, in
// multiples of the mapping granularity. d.mu must be held.
func (d *device) growableForLocked(p *pool, segSize uint64) bool {
	return d.growOn && !p.small && p.private == nil && len(d.captures) == 0 &&
		segSize%d.gran == 0 && (d.maxSplit == 0 || segSize < d.maxSplit)
}

// allocGrowableLocked reserves a virtual range with headroom and maps segSize
// bytes of new physical memory at its start. d.mu must be held.
func (d *device) allocGrowableLocked(segSize uint64) (gpumem.Ptr, *growable, error) {
	va := min(segSize*growHeadroom, 2*d.total)
	va = max((va+d.gran-1)/d.gran*d.gran, segSize)
	base, err := d.a.b.MemAddressReserve(va, d.gran)
	if err != nil {
		return 0, nil, err
	}
	h, err := d.mapPhysicalLocked(base, segSize)
	if err != nil {
		_ = d.a.b.MemAddressFree(base, va)
		return 0, nil, err
	}
	return base, &growable{va: va, handles: []physical{{h, segSize}}}, nil
}

// mapPhysicalLocked creates n bytes of physical memory on the device and maps
// them read-write at addr, undoing what it did on failure. d.mu must be held.
func (d *device) mapPhysicalLocked(addr gpumem.Ptr, n uint64) (gpumem.MemHandle, error) {
	h, err := d.mapNewLocked(addr, n)
	if err != nil {
		return gpumem.MemHandle{}, err
	}
	if err := d.a.b.MemSetAccess(addr, n, d.id, gpumem.AccessReadWrite); err != nil {
		// Released even if the unmap fails: the driver frees it with its
		// last mapping.
		uerr := d.a.b.MemUnmap(addr, n)
		return gpumem.MemHandle{}, errors.Join(err, uerr, d.releaseHandleLocked(h, n))
	}
	return h, nil
}

// growCandidateLocked is the wholly free growable segment of pool p owned by
// stream that can grow to segSize: the largest, so that growing it adds
// the fewest bytes. Nil when there is none. d.mu must be held.
func (d *device) growCandidateLocked(p *pool, segSize uint64, stream uintptr) *segment {
	if !d.growableForLocked(p, segSize) {
		return nil
	}
	var best *segment
	for seg := range d.segments {
		g := seg.grow
		if g == nil || seg.pool != p || seg.stream.Handle != stream || seg.size >= segSize || g.va < segSize || !freeableLocked(seg) {
			continue
		}
		if best == nil || seg.size > best.size || (seg.size == best.size && seg.addr < best.addr) {
			best = seg
		}
	}
	return best
}

// growSegmentLocked grows the wholly free segment seg in place to segSize and
// returns its single block, out of any tree. Cached memory is released
// first as for a new segment, seg excepted. On failure seg is cached again
// unchanged. d.mu must be held.
func (d *device) growSegmentLocked(seg *segment, segSize uint64) (*block, error) {
	b := seg.head
	d.takeFromTreeLocked(b.tree, b) // out of the tree: not a candidate for release
	delta := segSize - seg.size
	if err := d.makeRoomLocked(delta); err != nil {
		d.cacheLocked(b)
		return nil, err
	}
	end := seg.addr.Add(seg.size)
	h, err := d.mapPhysicalLocked(end, delta)
	if err != nil {
		d.cacheLocked(b)
		return nil, fmt.Errorf("caching: growing segment %#x by %s on device %d: %w", uintptr(seg.addr), gpumem.FormatBytes(delta), d.id, err)
	}
	g := seg.grow
	g.handles = append(g.handles, physical{h, delta})
	seg.size = segSize
	b.size = segSize
	st := seg.pool.statType()
	d.addReservedLocked(st, int64(delta))
	d.stats.NumDeviceAlloc++
	d.stats.SegmentGrowths++
	d.recordLocked(gpumem.ActionSegmentMap, seg.stream.Handle, end, delta)
	return b, nil
}

// freeGrowableLocked unmaps a growable segment, releases its physical memory and
// its virtual range. The segment is gone (gone) once the unmap succeeded;
// failures after that are reported but leave nothing to retry.
// d.mu must be held.
func (d *device) freeGrowableLocked(seg *segment) (gone bool, err error) {
	g := seg.grow
	if err := d.a.b.MemUnmap(seg.addr, seg.size); err != nil {
		return false, err
	}
	var errs []error
	for _, p := range g.handles {
		if err := d.releaseHandleLocked(p.h, p.size); err != nil {
			errs = append(errs, err)
		}
	}
	if err := d.freeRangeLocked(seg.addr, g.va); err != nil {
		errs = append(errs, err)
	}
	g.handles = nil
	return true, errors.Join(errs...)
}
