package asyncpool_test

import (
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/simtest"
	"github.com/gpumem/gpumem/trace"
)

// counting is the simulator with its capture query, its guarded calls and
// its plain stream-ordered calls counted (the guarded calls ask the
// simulator's own query, not this one).
type counting struct {
	*sim.GPU
	queries, guarded, plainCalls atomic.Int64
}

func (c *counting) StreamCaptureInfo(s gpumem.Stream) (gpumem.CaptureInfo, error) {
	c.queries.Add(1)
	return c.GPU.StreamCaptureInfo(s)
}

func (c *counting) MallocFromPoolAsyncUncaptured(size uint64, mp gpumem.MemPool, s gpumem.Stream) (gpumem.Ptr, gpumem.CaptureStatus, error) {
	c.guarded.Add(1)
	return c.GPU.MallocFromPoolAsyncUncaptured(size, mp, s)
}

func (c *counting) FreeAsyncUncaptured(p gpumem.Ptr, s gpumem.Stream) (gpumem.CaptureStatus, error) {
	c.guarded.Add(1)
	return c.GPU.FreeAsyncUncaptured(p, s)
}

func (c *counting) MallocFromPoolAsync(size uint64, mp gpumem.MemPool, s gpumem.Stream) (gpumem.Ptr, error) {
	c.plainCalls.Add(1)
	return c.GPU.MallocFromPoolAsync(size, mp, s)
}

func (c *counting) FreeAsync(p gpumem.Ptr, s gpumem.Stream) error {
	c.plainCalls.Add(1)
	return c.GPU.FreeAsync(p, s)
}

func (c *counting) reset() {
	c.queries.Store(0)
	c.guarded.Store(0)
	c.plainCalls.Store(0)
}

// plain hides the guarded calls: only gpumem.Backend's methods are promoted.
type plain struct{ gpumem.Backend }

// callCounts is what a number of allocation+free pairs cost in backend
// calls: separate capture queries, guarded calls, plain calls.
type callCounts struct{ queries, guarded, plain int64 }

func (c *counting) counts() callCounts {
	return callCounts{c.queries.Load(), c.guarded.Load(), c.plainCalls.Load()}
}

// pairs makes n allocation+free pairs on s.
func pairs(t *testing.T, a *asyncpool.Allocator, s gpumem.Stream, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		p, err := a.Allocate(mib+uint64(i)*kib, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Deallocate(p, s); err != nil {
			t.Fatal(err)
		}
	}
}

// How each capture check asks, per allocation+free pair, with no capture
// open and with one open on another stream:
//   - every call, on a backend with guarded calls: the status is asked
//     inside the call itself, no separate query;
//   - tracked: no question at all while the backend knows of no open
//     capture (plain calls), the guarded calls while it knows of one;
//   - on a backend without guarded calls, one query per call either way.
//
// A capture begun on the backend directly, not through BeginCapture, is
// seen in every mode: the guarded call declines (or the query says so)
// and the full path makes a graph allocation.
func TestGuardedCalls(t *testing.T) {
	g := simtest.New(t, sim.Config{Devices: []sim.DeviceConfig{{Name: "sim0", Capacity: 8 * gib}}})
	c := &counting{GPU: g}
	r := rigOn(t, g, sim.Config{}, asyncpool.DefaultOptions(), 2)
	r.a.Close()
	const n = 50
	for _, be := range []struct {
		name         string
		b            gpumem.Backend
		check        asyncpool.CaptureCheck
		quiet, other callCounts // per pair: no capture open; one open on another stream
	}{
		{"every_call", c, asyncpool.CaptureCheckEveryCall, callCounts{0, 2, 0}, callCounts{0, 2, 0}},
		{"tracked", c, asyncpool.CaptureCheckTracked, callCounts{0, 0, 2}, callCounts{0, 2, 0}},
		{"every_call,plain", plain{c}, asyncpool.CaptureCheckEveryCall, callCounts{2, 0, 2}, callCounts{2, 0, 2}},
		{"tracked,plain", plain{c}, asyncpool.CaptureCheckTracked, callCounts{2, 0, 2}, callCounts{2, 0, 2}},
	} {
		opts := asyncpool.DefaultOptions()
		opts.CaptureCheck = be.check
		a, err := asyncpool.New(be.b, opts)
		if err != nil {
			t.Fatal(err)
		}
		s, other := r.ss[0], r.ss[1]
		times := func(k callCounts) callCounts { return callCounts{k.queries * n, k.guarded * n, k.plain * n} }
		c.reset()
		pairs(t, a, s, n)
		if got, want := c.counts(), times(be.quiet); got != want {
			t.Errorf("%s, no capture open: %+v calls for %d pairs, want %+v", be.name, got, n, want)
		}
		st := a.Stats(0)
		if st.Allocation[gpumem.StatAll].Current != 0 || st.NumDeviceAlloc != n || st.NumDeviceFree != n {
			t.Errorf("%s: stats %+v", be.name, st.Allocation[gpumem.StatAll])
		}

		if err := g.StreamBeginCapture(other, gpumem.CaptureModeRelaxed); err != nil {
			t.Fatal(err)
		}
		c.reset()
		pairs(t, a, s, n)
		if got, want := c.counts(), times(be.other); got != want {
			t.Errorf("%s, a capture open on another stream: %+v calls for %d pairs, want %+v", be.name, got, n, want)
		}
		og, err := g.StreamEndCapture(other)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.GraphDestroy(og); err != nil {
			t.Fatal(err)
		}

		// A capture begun behind the allocator's back.
		if err := g.StreamBeginCapture(s, gpumem.CaptureModeRelaxed); err != nil {
			t.Fatal(err)
		}
		p, err := a.Allocate(mib, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Deallocate(p, s); err != nil {
			t.Fatal(err)
		}
		graph, err := g.StreamEndCapture(s)
		if err != nil {
			t.Fatal(err)
		}
		if c := a.Counters(0); c.GraphFreedInCapture != 1 {
			t.Errorf("%s: the allocation and free in a capture were not seen as one (counters %+v)", be.name, c)
		}
		if err := g.GraphDestroy(graph); err != nil {
			t.Fatal(err)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}
	r.finish()
}

// The guarded path and the plain one replay a real trace to the same
// figures.
func TestGuardedReplayMatchesPlain(t *testing.T) {
	path := filepath.Join("..", "testdata", "pytorch-gpt.trace.gz")
	tr, err := trace.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got [2]gpumem.MemoryStats
	for i, hide := range []bool{false, true} {
		g := simtest.New(t, sim.Config{NoStacks: true, Devices: []sim.DeviceConfig{{Name: "H200", Capacity: 140 * gib}}})
		var b gpumem.Backend = g
		if hide {
			b = plain{g}
		}
		got[i], _ = replayOn(t, g, b, tr)
	}
	for _, f := range []struct {
		name string
		a, b int64
	}{
		{"peak requested", got[0].RequestedBytes[gpumem.StatAll].Peak, got[1].RequestedBytes[gpumem.StatAll].Peak},
		{"peak reserved", got[0].ReservedBytes[gpumem.StatAll].Peak, got[1].ReservedBytes[gpumem.StatAll].Peak},
		{"device allocs", got[0].NumDeviceAlloc, got[1].NumDeviceAlloc},
		{"device frees", got[0].NumDeviceFree, got[1].NumDeviceFree},
	} {
		if f.a != f.b || f.a == 0 {
			t.Errorf("%s: %d guarded, %d plain", f.name, f.a, f.b)
		}
	}
}
