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

// counting is the simulator with its capture query and its guarded calls
// counted (the guarded calls ask the simulator's own query, not this one).
type counting struct {
	*sim.GPU
	queries, guarded atomic.Int64
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

// plain hides the guarded calls: only gpumem.Backend's methods are promoted.
type plain struct{ gpumem.Backend }

// On a backend with guarded calls, a plain allocation and free ask the
// capture status inside the call itself: no separate query. Without them,
// one query each. A capture begun on the backend directly, not through
// BeginCapture, is still seen: the guarded call declines and the full path
// makes a graph allocation.
func TestGuardedCalls(t *testing.T) {
	g := simtest.New(t, sim.Config{Devices: []sim.DeviceConfig{{Name: "sim0", Capacity: 8 * gib}}})
	c := &counting{GPU: g}
	r := rigOn(t, g, sim.Config{}, asyncpool.DefaultOptions(), 1)
	r.a.Close()
	for _, be := range []struct {
		name          string
		b             gpumem.Backend
		query, guards int64 // per allocation+free pair
	}{{"guarded", c, 0, 2}, {"plain", plain{c}, 2, 0}} {
		a, err := asyncpool.New(be.b, asyncpool.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		s := r.ss[0]
		c.queries.Store(0)
		c.guarded.Store(0)
		const n = 50
		for i := 0; i < n; i++ {
			p, err := a.Allocate(mib+uint64(i)*kib, s)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Deallocate(p, s); err != nil {
				t.Fatal(err)
			}
		}
		if q, gd := c.queries.Load(), c.guarded.Load(); q != n*be.query || gd != n*be.guards {
			t.Errorf("%s: %d queries and %d guarded calls for %d pairs, want %d and %d", be.name, q, gd, n, n*be.query, n*be.guards)
		}
		st := a.Stats(0)
		if st.Allocation[gpumem.StatAll].Current != 0 || st.NumDeviceAlloc != n || st.NumDeviceFree != n {
			t.Errorf("%s: stats %+v", be.name, st.Allocation[gpumem.StatAll])
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
