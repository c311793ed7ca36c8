package sim_test

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

const mib = uint64(1) << 20

// poolRig is a manual-mode device with a pool and two streams.
type poolRig struct {
	t    *testing.T
	g    *sim.GPU
	pool gpumem.MemPool
	s, u gpumem.Stream
}

func newPoolRig(t *testing.T) *poolRig {
	t.Helper()
	g := newSim(t, sim.Config{Manual: true, Devices: []sim.DeviceConfig{{Name: "d", Capacity: 1 << 30}}})
	r := &poolRig{t: t, g: g}
	var err error
	if r.pool, err = g.MemPoolCreate(gpumem.PoolProps{Device: 0}); err != nil {
		t.Fatal(err)
	}
	if err := g.MemPoolSetAttribute(r.pool, gpumem.PoolReleaseThreshold, ^uint64(0)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*gpumem.Stream{&r.s, &r.u} {
		if *p, err = g.StreamCreate(0, gpumem.StreamNonBlocking, 0); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func (r *poolRig) alloc(n uint64, s gpumem.Stream) gpumem.Ptr {
	r.t.Helper()
	p, err := r.g.MallocFromPoolAsync(n, r.pool, s)
	if err != nil {
		r.t.Fatal(err)
	}
	return p
}

func (r *poolRig) free(p gpumem.Ptr, s gpumem.Stream) {
	r.t.Helper()
	if err := r.g.FreeAsync(p, s); err != nil {
		r.t.Fatal(err)
	}
}

func (r *poolRig) attr(a gpumem.PoolAttribute) uint64 {
	r.t.Helper()
	v, err := r.g.MemPoolGetAttribute(r.pool, a)
	if err != nil {
		r.t.Fatal(err)
	}
	return v
}

func (r *poolRig) drain() {
	r.t.Helper()
	if err := r.g.Drain(); err != nil {
		r.t.Fatal(err)
	}
}

// Free ranges of neighbouring chunks coalesce: an allocation larger than
// any chunk reuses them without the pool growing, and the pool releases
// every chunk once nothing is left in them.
func TestPoolCoalescesAcrossChunks(t *testing.T) {
	r := newPoolRig(t)
	a := r.alloc(32*mib, r.s)
	b := r.alloc(32*mib, r.s) // a second chunk: the first is full
	if got := r.attr(gpumem.PoolReservedMemCurrent); got != 64*mib {
		t.Fatalf("reserved %d after two 32 MiB allocations", got)
	}
	r.free(a, r.s)
	r.free(b, r.s)
	r.drain()
	c := r.alloc(64*mib, r.u) // another stream: the frees have completed
	if got := r.attr(gpumem.PoolReservedMemCurrent); got != 64*mib {
		t.Errorf("reserved %d after reusing both chunks, want %d", got, 64*mib)
	}
	if c != min(a, b) {
		t.Errorf("64 MiB at %#x, want the coalesced range at %#x", uintptr(c), uintptr(min(a, b)))
	}
	if err := r.g.MemsetAsync(c, 7, 64*mib, r.u); err != nil {
		t.Errorf("memset over two chunks: %v", err)
	}
	if err := r.g.MemPoolTrimTo(r.pool, 0); err != nil {
		t.Fatal(err)
	}
	if got := r.attr(gpumem.PoolReservedMemCurrent); got != 64*mib {
		t.Errorf("trim released chunks still in use: reserved %d", got)
	}
	r.free(c, r.u)
	r.drain()
	if err := r.g.MemPoolTrimTo(r.pool, 0); err != nil {
		t.Fatal(err)
	}
	if got := r.attr(gpumem.PoolReservedMemCurrent); got != 0 {
		t.Errorf("reserved %d after trimming an empty pool", got)
	}
	if v := r.g.Violations(); len(v) != 0 {
		t.Errorf("violations: %v", v)
	}
}

// Growth extends the pool's free tail: only what the tail lacks is
// reserved.
func TestPoolGrowsFromItsFreeTail(t *testing.T) {
	r := newPoolRig(t)
	a := r.alloc(8*mib, r.s) // 24 MiB of the first chunk stay free
	b := r.alloc(40*mib, r.s)
	if got := r.attr(gpumem.PoolReservedMemCurrent); got != 64*mib {
		t.Errorf("reserved %d, want 64 MiB: 8 + 40 MiB fit in two 32 MiB chunks", got)
	}
	if b != a+gpumem.Ptr(8*mib) {
		t.Errorf("40 MiB at %#x, want it right after the 8 MiB at %#x", uintptr(b), uintptr(a))
	}
}

// Best fit: a request takes the smallest free range that holds it.
func TestPoolBestFit(t *testing.T) {
	r := newPoolRig(t)
	var ps []gpumem.Ptr
	for _, n := range []uint64{8 * mib, mib, 4 * mib, mib, 2 * mib, mib} {
		ps = append(ps, r.alloc(n, r.s))
	}
	r.free(ps[0], r.s) // an 8 MiB hole
	r.free(ps[2], r.s) // a 4 MiB hole
	r.free(ps[4], r.s) // a 2 MiB hole
	r.drain()
	if p := r.alloc(3*mib, r.u); p != ps[2] {
		t.Errorf("3 MiB at %#x, want the 4 MiB hole at %#x", uintptr(p), uintptr(ps[2]))
	}
	if p := r.alloc(2*mib, r.u); p != ps[4] {
		t.Errorf("2 MiB at %#x, want the 2 MiB hole at %#x", uintptr(p), uintptr(ps[4]))
	}
}

// Reuse across streams: memory freed on s is reused at once on s, on u
// only once u is ordered after the free by an event or the free has run.
func TestPoolReuseAcrossStreams(t *testing.T) {
	r := newPoolRig(t)
	busy := r.alloc(mib, r.s)
	if err := r.g.MemsetAsync(busy, 1, mib, r.s); err != nil { // keeps s from running ahead
		t.Fatal(err)
	}
	a := r.alloc(4*mib, r.s)
	r.free(a, r.s)
	if p := r.alloc(4*mib, r.u); p == a {
		t.Errorf("u reused memory whose free on s it is not ordered after")
	} else {
		r.free(p, r.u)
	}
	ev, err := r.g.EventCreate(0, gpumem.EventDisableTiming)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.g.EventRecord(ev, r.s); err != nil {
		t.Fatal(err)
	}
	if err := r.g.StreamWaitEvent(r.u, ev); err != nil {
		t.Fatal(err)
	}
	b := r.alloc(4*mib, r.u)
	if b != a {
		t.Errorf("u, ordered after the free by an event, got %#x, want the freed %#x", uintptr(b), uintptr(a))
	}
	r.free(b, r.u)
	r.free(busy, r.s)
	r.drain()
	// Every free has run: the chunk is one free range again, and its
	// start is the best fit.
	c := r.alloc(4*mib, r.s)
	if c != busy || r.attr(gpumem.PoolReservedMemCurrent) != 32*mib {
		t.Errorf("after the frees ran, %#x with %d reserved; want %#x, the coalesced chunk's start, and 32 MiB",
			uintptr(c), r.attr(gpumem.PoolReservedMemCurrent), uintptr(busy))
	}
	r.free(c, r.s)
	r.drain()
	if err := r.g.EventDestroy(ev); err != nil {
		t.Fatal(err)
	}
	if v := r.g.Violations(); len(v) != 0 {
		t.Errorf("violations: %v", v)
	}
}

// A pool query during a global-mode capture is refused and invalidates the
// capture, as on the driver; in relaxed mode it is allowed.
func TestPoolQueryDuringCapture(t *testing.T) {
	r := newPoolRig(t)
	for _, mode := range []gpumem.CaptureMode{gpumem.CaptureModeGlobal, gpumem.CaptureModeRelaxed} {
		if err := r.g.StreamBeginCapture(r.s, mode); err != nil {
			t.Fatal(err)
		}
		_, qerr := r.g.MemPoolGetAttribute(r.pool, gpumem.PoolReservedMemCurrent)
		graph, eerr := r.g.StreamEndCapture(r.s)
		if mode == gpumem.CaptureModeGlobal {
			var ge *gpumem.Error
			if !errors.As(qerr, &ge) || ge.Code != 900 || !errors.Is(qerr, gpumem.ErrInvalidValue) || eerr == nil {
				t.Errorf("global mode: query %v, end capture %v; want refused and invalidated", qerr, eerr)
			}
		} else if qerr != nil || eerr != nil {
			t.Errorf("relaxed mode: query %v, end capture %v", qerr, eerr)
		}
		if eerr == nil {
			if err := r.g.GraphDestroy(graph); err != nil {
				t.Fatal(err)
			}
		}
	}
}
