package deferrable_test

import (
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/deferrable"
	"github.com/gpumem/gpumem/sim"
)

// benchSpillUnspill moves one 64 MiB buffer down to tier and back per
// iteration and reports each direction's throughput from Stats.
func benchSpillUnspill(b *testing.B, tier deferrable.Tier) {
	const size = 64 << 20
	g := sim.NewDefault()
	defer g.Close()
	opts := deferrable.Options{HistorySize: -1}
	if tier == deferrable.TierDisk {
		opts.DiskDir = b.TempDir()
	}
	m, err := deferrable.New(g, 0, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer g.StreamDestroy(s)
	buf, err := m.Alloc(size, s)
	if err != nil {
		b.Fatal(err)
	}
	p, _ := buf.Acquire(s)
	g.MemsetAsync(p, 7, size, s) // touch every page so copies move real bytes
	buf.Release()
	// One warm-up round trip creates the copy stream and pins the host arena
	// (and, for disk, the staging ring).
	if err := buf.MoveTo(tier); err != nil {
		b.Fatal(err)
	}
	if err := buf.MoveTo(deferrable.TierDevice); err != nil {
		b.Fatal(err)
	}
	m.ResetTransferStats()
	b.SetBytes(2 * size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := buf.MoveTo(tier); err != nil {
			b.Fatal(err)
		}
		if _, err := buf.Acquire(s); err != nil {
			b.Fatal(err)
		}
		if err := buf.Release(); err != nil {
			b.Fatal(err)
		}
		if err := g.StreamSynchronize(s); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	st := m.Stats()
	b.ReportMetric(st.Spilled().BytesPerSecond()/1e9, "spill_GB/s")
	b.ReportMetric(st.Unspilled().BytesPerSecond()/1e9, "unspill_GB/s")
}

func BenchmarkSpillUnspill64MiBHost(b *testing.B) { benchSpillUnspill(b, deferrable.TierHost) }
func BenchmarkSpillUnspill64MiBDisk(b *testing.B) { benchSpillUnspill(b, deferrable.TierDisk) }
