package asyncpool_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/simtest"
	"github.com/gpumem/gpumem/trace"
)

// tracesDir is ../shared/traces from the repository root.
var tracesDir = filepath.Join("..", "..", "shared", "traces")

// replay runs a trace through the allocator on 4 non-blocking streams: an
// allocation on stream STREAM&3; a free on another stream records that
// stream, then frees on the allocation stream.
func replay(tb testing.TB, a *asyncpool.Allocator, ss []gpumem.Stream, tr *trace.Trace) {
	type live struct {
		p gpumem.Ptr
		s int
	}
	m := make(map[uint64]live, 1024)
	for i, ev := range tr.Events {
		si := ev.Stream & 3
		if ev.Alloc {
			p, err := a.Allocate(ev.Size, ss[si])
			if err != nil {
				tb.Fatalf("event %d (%v): %v", i, ev, err)
			}
			m[ev.ID] = live{p, si}
			continue
		}
		l, ok := m[ev.ID]
		if !ok {
			tb.Fatalf("event %d frees unknown id %d", i, ev.ID)
		}
		delete(m, ev.ID)
		if si != l.s {
			if err := a.RecordStream(l.p, ss[si]); err != nil {
				tb.Fatalf("event %d: RecordStream: %v", i, err)
			}
		}
		if err := a.Deallocate(l.p, ss[l.s]); err != nil {
			tb.Fatalf("event %d: Deallocate: %v", i, err)
		}
	}
}

// replayOn replays tr through an allocator with the default options over b
// (g, or a wrapper of it) on four streams of g, closes everything and checks
// that nothing leaked; it returns the allocator's statistics and counters of
// device 0 as they were at the end of the trace.
func replayOn(tb testing.TB, g *sim.GPU, b gpumem.Backend, tr *trace.Trace) (gpumem.MemoryStats, asyncpool.Counters) {
	tb.Helper()
	a, err := asyncpool.New(b, asyncpool.DefaultOptions())
	if err != nil {
		tb.Fatal(err)
	}
	ss := make([]gpumem.Stream, 4)
	for i := range ss {
		if ss[i], err = g.StreamCreate(0, gpumem.StreamNonBlocking, 0); err != nil {
			tb.Fatal(err)
		}
	}
	replay(tb, a, ss, tr)
	st, c := a.Stats(0), a.Counters(0)
	if err := g.Drain(); err != nil {
		tb.Fatal(err)
	}
	if err := a.Close(); err != nil {
		tb.Fatal(err)
	}
	for _, s := range ss {
		if err := g.StreamDestroy(s); err != nil {
			tb.Fatal(err)
		}
	}
	if l := g.Leaks(); len(l) != 0 {
		tb.Errorf("leaks: %v", l[:min(len(l), 5)])
	}
	return st, c
}

func TestReplayTraces(t *testing.T) {
	want := map[string]int64{"mix2": 7950298216, "gpt2": 13271941480}
	for _, name := range []string{"mix2", "gpt2"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(tracesDir, name+".trace.gz")
			if _, err := os.Stat(path); err != nil {
				t.Skipf("trace %s not available (%v); it lives in ../shared/traces from the repository root", path, err)
			}
			if testing.Short() && name == "gpt2" {
				t.Skip("the gpt2 trace is long; skipped with -short")
			}
			tr, err := trace.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			g := simtest.New(t, sim.Config{NoStacks: true, Devices: []sim.DeviceConfig{{Name: "H200", Capacity: 140 * gib}}})
			st, c := replayOn(t, g, g, tr)
			peak := st.RequestedBytes[gpumem.StatAll].Peak
			if peak != want[name] || uint64(peak) != tr.Stats().PeakRequested {
				t.Errorf("peak requested = %d, want %d", peak, want[name])
			}
			res := st.ReservedBytes[gpumem.StatAll].Peak
			if res < peak {
				t.Errorf("peak reserved %d below peak requested %d", res, peak)
			}
			t.Logf("%s: pairs %d, peak requested %d, pool peak reserved %d (%.3fx), device allocs %d, frees %d, cross-stream frees %d, throttle joins %d",
				name, st.Allocation[gpumem.StatAll].Allocated, peak, res, float64(res)/float64(peak),
				st.NumDeviceAlloc, st.NumDeviceFree, c.CrossStreamFrees, c.ThrottleJoins)
		})
	}
}

func loadTrace(tb testing.TB, name string) *trace.Trace {
	path := filepath.Join(tracesDir, name+".trace.gz")
	if _, err := os.Stat(path); err != nil {
		tb.Skipf("trace %s not available: %v", path, err)
	}
	tr, err := trace.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return tr
}
