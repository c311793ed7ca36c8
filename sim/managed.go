package sim

import (
	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// Migration counts the managed-memory bytes that moved, by direction, and
// the pages moved because a kernel or the host touched them.
type Migration struct {
	HostToDevice   uint64
	DeviceToHost   uint64
	DeviceToDevice uint64
	Faults         uint64 // pages migrated on touch (Launch, HostBytes)
	Evicted        uint64 // bytes evicted from a device to make room
}

// Migrated returns the managed-memory migration counters.
func (g *GPU) Migrated() Migration {
	if g == nil {
		return Migration{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.migrated
}

func locOf(l gpumem.Location) int8 {
	if l.Kind == gpumem.LocationHost {
		return locHost
	}
	return int8(l.Device)
}

func locationOf(l int8) gpumem.Location {
	switch {
	case l == locHost:
		return gpumem.HostLocation()
	case l >= 0:
		return gpumem.DeviceLocation(int(l))
	}
	return gpumem.Location{Kind: gpumem.LocationInvalid}
}

func (g *GPU) checkLocation(m symtab.Op, l gpumem.Location) error {
	switch l.Kind {
	case gpumem.LocationHost:
		return nil
	case gpumem.LocationDevice:
		if l.Device < 0 || l.Device >= len(g.devs) || l.Device > 63 {
			return errf(m, symtab.CUDAInvalidDevice, "no device %d", l.Device)
		}
		if g.devs[l.Device].cfg.NoManaged {
			return errf(m, symtab.CUDANotSupported, "device %d has no managed memory", l.Device)
		}
		return nil
	}
	return errf(m, symtab.CUDAInvalidValue, "invalid location")
}

// managedRange finds the managed allocation holding [a, a+n); lock held.
func (g *GPU) managedRange(m symtab.Op, a, n uint64) (*object, error) {
	o := g.spanAt(a)
	if o == nil || o.kind != objManaged {
		return nil, errf(m, symtab.CUDAInvalidValue, "%#x is not managed memory%s", a, g.hint(a))
	}
	if n == 0 || a+n > o.end() || a+n < a {
		return nil, errf(m, symtab.CUDAInvalidValue, "[%#x, +%d) is not inside %s", a, n, o.describe())
	}
	return o, nil
}

func (o *object) pageRange(a, n uint64) (int, int) {
	return int((a - o.start) / o.mps), int((a + n - 1 - o.start) / o.mps)
}

// Advise sets a usage hint on the managed pages of [p, p+size). The
// coarse-grain advice exists on HIP only: CUDA_ERROR_NOT_SUPPORTED.
func (g *GPU) Advise(p gpumem.Ptr, size uint64, advice gpumem.Advice, loc gpumem.Location) error {
	if err := g.enter(symtab.Advise); err != nil {
		return err
	}
	needLoc := advice == gpumem.AdviseSetPreferredLocation || advice == gpumem.AdviseSetAccessedBy || advice == gpumem.AdviseUnsetAccessedBy
	switch advice {
	case gpumem.AdviseSetCoarseGrain, gpumem.AdviseUnsetCoarseGrain:
		return errf(symtab.Advise, symtab.CUDANotSupported, "%v is a HIP advice", advice)
	case gpumem.AdviseSetReadMostly, gpumem.AdviseUnsetReadMostly, gpumem.AdviseSetPreferredLocation,
		gpumem.AdviseUnsetPreferredLocation, gpumem.AdviseSetAccessedBy, gpumem.AdviseUnsetAccessedBy:
	default:
		return errf(symtab.Advise, symtab.CUDAInvalidValue, "unknown advice %d", int(advice))
	}
	if needLoc {
		if err := g.checkLocation(symtab.Advise, loc); err != nil {
			return err
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	o, err := g.managedRange(symtab.Advise, uint64(p), size)
	if err != nil {
		return err
	}
	first, last := o.pageRange(uint64(p), size)
	for i := first; i <= last; i++ {
		pg := &o.mpages[i]
		switch advice {
		case gpumem.AdviseSetReadMostly:
			pg.readMostly = true
		case gpumem.AdviseUnsetReadMostly:
			pg.readMostly = false
		case gpumem.AdviseSetPreferredLocation:
			pg.pref = locOf(loc)
		case gpumem.AdviseUnsetPreferredLocation:
			pg.pref = locNone
		case gpumem.AdviseSetAccessedBy:
			if loc.Kind == gpumem.LocationDevice {
				pg.accessedBy |= 1 << uint(loc.Device)
			}
		case gpumem.AdviseUnsetAccessedBy:
			if loc.Kind == gpumem.LocationDevice {
				pg.accessedBy &^= 1 << uint(loc.Device)
			}
		}
	}
	return nil
}

// Prefetch migrates the managed pages of [p, p+size) to loc when s reaches
// it. A device with no room evicts other managed pages to the host first.
func (g *GPU) Prefetch(p gpumem.Ptr, size uint64, loc gpumem.Location, s gpumem.Stream) error {
	if err := g.enter(symtab.Prefetch); err != nil {
		return err
	}
	if err := g.checkLocation(symtab.Prefetch, loc); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.lookupStream(symtab.Prefetch, s)
	if err != nil {
		return err
	}
	o, err := g.managedRange(symtab.Prefetch, uint64(p), size)
	if err != nil {
		return err
	}
	return g.enqueue(st, &op{kind: opPrefetch, m: symtab.Prefetch, dst: uint64(p), size: size, loc: loc,
		uses: []use{{obj: o, addr: uint64(p), size: size}}, dev: st.dev.ord})
}

func (g *GPU) prefetchRun(o *op) {
	m := g.spanAt(o.dst)
	if m == nil || m.kind != objManaged {
		return
	}
	to := locOf(o.loc)
	first, last := m.pageRange(o.dst, o.size)
	for i := first; i <= last; i++ {
		m.mpages[i].last = to
		g.migrate(m, i, to, false)
	}
}

// touchRange faults the managed pages a kernel on dev touches to dev.
func (g *GPU) touchRange(a, n uint64, dev int) {
	if n == 0 {
		return
	}
	if o := g.spanAt(a); o != nil && o.kind == objManaged {
		g.touchManaged(o, a, n, int8(dev), true)
	}
}

func (g *GPU) touchManaged(o *object, a, n uint64, to int8, fault bool) {
	if n == 0 {
		return
	}
	first, last := o.pageRange(a, n)
	for i := first; i <= last; i++ {
		g.migrate(o, i, to, fault)
	}
}

// migrate moves page i of o to location to, counting the bytes; false when
// the device has no room even after eviction. Lock held.
func (g *GPU) migrate(o *object, i int, to int8, fault bool) bool {
	pg := &o.mpages[i]
	from := pg.loc
	if from == to {
		return true
	}
	n := o.pageBytes(i)
	if to >= 0 {
		d := g.devs[to]
		if d.used+d.resident+n > d.cfg.Capacity {
			g.evict(d, d.used+d.resident+n-d.cfg.Capacity, o)
			if d.used+d.resident+n > d.cfg.Capacity {
				return false
			}
		}
		d.resident += n
	}
	if from >= 0 {
		g.devs[from].resident -= n
	}
	pg.loc = to
	switch {
	case from == locUnpopulated:
		return true // first touch populates; nothing moved
	case from == locHost:
		g.migrated.HostToDevice += n
	case to == locHost:
		g.migrated.DeviceToHost += n
	default:
		g.migrated.DeviceToDevice += n
	}
	if fault {
		g.migrated.Faults++
	}
	return true
}

// evict moves managed pages resident on d (not those of except) to the host
// until need bytes are free.
func (g *GPU) evict(d *device, need uint64, except *object) {
	var freed uint64
	for _, o := range g.allocs {
		if o.kind != objManaged || o == except {
			continue
		}
		for i := range o.mpages {
			if o.mpages[i].loc != int8(d.ord) {
				continue
			}
			n := o.pageBytes(i)
			d.resident -= n
			o.mpages[i].loc = locHost
			g.migrated.DeviceToHost += n
			g.migrated.Evicted += n
			freed += n
			if freed >= need {
				return
			}
		}
	}
}

// RangeLocation reads the preferred or last-prefetch location of a managed
// range; a range whose pages disagree, or that has none, gives a Location of
// kind LocationInvalid (CUDA's CU_DEVICE_INVALID).
func (g *GPU) RangeLocation(p gpumem.Ptr, size uint64, attr gpumem.RangeAttribute) (gpumem.Location, error) {
	if err := g.enter(symtab.RangeLocation); err != nil {
		return gpumem.Location{}, err
	}
	if attr != gpumem.RangePreferredLocation && attr != gpumem.RangeLastPrefetchLocation {
		return gpumem.Location{}, errf(symtab.RangeLocation, symtab.CUDAInvalidValue, "unknown range attribute %d", int(attr))
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	o, err := g.managedRange(symtab.RangeLocation, uint64(p), size)
	if err != nil {
		return gpumem.Location{}, err
	}
	first, last := o.pageRange(uint64(p), size)
	var v int8
	for i := first; i <= last; i++ {
		x := o.mpages[i].pref
		if attr == gpumem.RangeLastPrefetchLocation {
			x = o.mpages[i].last
		}
		if i == first {
			v = x
		} else if x != v {
			return locationOf(locNone), nil
		}
	}
	return locationOf(v), nil
}

// Residency reports where the bytes of the managed range [p, p+size) live:
// bytes per location. Pages never touched are not resident anywhere and are
// left out.
func (g *GPU) Residency(p gpumem.Ptr, size uint64) map[gpumem.Location]uint64 {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[gpumem.Location]uint64{}
	a := uint64(p)
	o := g.spanAt(a)
	if o == nil || o.kind != objManaged || size == 0 {
		return out
	}
	end := o.end()
	if a+size > a && a+size < end {
		end = a + size
	}
	first, last := o.pageRange(a, end-a)
	for i := first; i <= last; i++ {
		l := o.mpages[i].loc
		if l == locUnpopulated {
			continue
		}
		ps := o.start + uint64(i)*o.mps
		pe := ps + o.pageBytes(i)
		out[locationOf(l)] += min(pe, end) - max(ps, a)
	}
	return out
}
