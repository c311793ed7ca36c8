package metrics_test

import (
	"io"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/managed"
	"github.com/gpumem/gpumem/metrics"
	"github.com/gpumem/gpumem/sim"
)

// BenchmarkWritePrometheus measures one scrape of a caching allocator on
// four devices.
func BenchmarkWritePrometheus(b *testing.B) {
	cfg := sim.Config{}
	for i := 0; i < 4; i++ {
		cfg.Devices = append(cfg.Devices, sim.DeviceConfig{Name: "bench", Capacity: 1 << 30})
	}
	g, err := sim.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	a, err := caching.New(g, caching.DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	for d := 0; d < 4; d++ {
		p, err := a.Allocate(1<<20, gpumem.Stream{Device: d})
		if err != nil {
			b.Fatal(err)
		}
		defer a.Deallocate(p, gpumem.Stream{Device: d})
	}
	var r metrics.Registry
	if err := r.Add("caching", a, []int{0, 1, 2, 3}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := r.WritePrometheus(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

// Every allocator of the project is a Source.
var (
	_ metrics.Source = (*caching.Allocator)(nil)
	_ metrics.Source = (*asyncpool.Allocator)(nil)
	_ metrics.Source = (*managed.Allocator)(nil)
)
