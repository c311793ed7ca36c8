package asyncpool_test

import (
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/sim"
)

func benchRig(tb testing.TB, check asyncpool.CaptureCheck) (*sim.GPU, *asyncpool.Allocator, gpumem.Stream) {
	opts := asyncpool.DefaultOptions()
	opts.CaptureCheck = check
	opts.HistorySize = 0
	return simPool(tb, sim.Config{NoStacks: true, Devices: []sim.DeviceConfig{{Name: "H200", Capacity: 140 * gib}}}, opts)
}

// simPool is a simulator of cfg, an asyncpool allocator of opts over it and
// a non-blocking stream of device 0; the caller closes all three.
func simPool(tb testing.TB, cfg sim.Config, opts asyncpool.Options) (*sim.GPU, *asyncpool.Allocator, gpumem.Stream) {
	tb.Helper()
	g, err := sim.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	a, err := asyncpool.New(g, opts)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		tb.Fatal(err)
	}
	return g, a, s
}

// The allocator adds no heap allocation to a pair beyond the backend's own.
func TestAllocFreePairAllocations(t *testing.T) {
	g, a, s := benchRig(t, asyncpool.CaptureCheckHooks)
	pool, err := g.DefaultMemPool(0)
	if err != nil {
		t.Fatal(err)
	}
	raw := testing.AllocsPerRun(2000, func() {
		p, err := g.MallocFromPoolAsync(mib, pool, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.FreeAsync(p, s); err != nil {
			t.Fatal(err)
		}
	})
	ours := testing.AllocsPerRun(2000, func() {
		p, err := a.Allocate(mib, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Deallocate(p, s); err != nil {
			t.Fatal(err)
		}
	})
	if ours > raw {
		t.Errorf("allocations per pair: allocator %.1f, backend alone %.1f", ours, raw)
	}
	t.Logf("heap allocations per pair: allocator %.1f, backend alone %.1f", ours, raw)
	_ = g.Drain()
	_ = a.Close()
	_ = g.StreamDestroy(s)
}

func BenchmarkAllocFreePair(b *testing.B) {
	for _, mode := range []asyncpool.CaptureCheck{asyncpool.CaptureCheckEveryCall, asyncpool.CaptureCheckHooks} {
		b.Run("capture_check="+mode.String(), func(b *testing.B) {
			g, a, s := benchRig(b, mode)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p, err := a.Allocate(mib, s)
				if err != nil {
					b.Fatal(err)
				}
				if err := a.Deallocate(p, s); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			_ = g.Drain()
			_ = a.Close()
			_ = g.StreamDestroy(s)
		})
	}
	b.Run("backend_alone", func(b *testing.B) {
		g, a, s := benchRig(b, asyncpool.CaptureCheckHooks)
		pool, _ := g.DefaultMemPool(0)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			p, err := g.MallocFromPoolAsync(mib, pool, s)
			if err != nil {
				b.Fatal(err)
			}
			if err := g.FreeAsync(p, s); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		_ = g.Drain()
		_ = a.Close()
		_ = g.StreamDestroy(s)
	})
}

func BenchmarkReplayMix2(b *testing.B) {
	tr := loadTrace(b, "mix2")
	for i := 0; i < b.N; i++ {
		g, err := sim.New(sim.Config{NoStacks: true, Devices: []sim.DeviceConfig{{Name: "H200", Capacity: 140 * gib}}})
		if err != nil {
			b.Fatal(err)
		}
		a, err := asyncpool.New(g, asyncpool.DefaultOptions())
		if err != nil {
			b.Fatal(err)
		}
		ss := make([]gpumem.Stream, 4)
		for j := range ss {
			ss[j], _ = g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
		}
		replay(b, a, ss, tr)
		_ = g.Drain()
		_ = a.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(tr.Stats().Pairs), "ns/pair")
}
