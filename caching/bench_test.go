package caching

import (
	"sync"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/fakegpu"
)

func newBenchAllocator(b testing.TB, backend gpumem.Backend) *Allocator {
	a, err := New(backend, DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	return a
}

// BenchmarkCacheHitPair measures an allocation and free served from the cache.
func BenchmarkCacheHitPair(b *testing.B) {
	a := newBenchAllocator(b, fakegpu.New(1<<34))
	defer a.Close()
	s := gpumem.Stream{Handle: 1}
	p, _ := a.Allocate(4096, s)
	_ = a.Deallocate(p, s)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, err := a.Allocate(4096, s)
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Deallocate(p, s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParallel16 measures contention: 16 goroutines allocating and
// freeing on one device, each on its own stream, a few blocks live each.
func BenchmarkParallel16(b *testing.B) {
	a := newBenchAllocator(b, fakegpu.New(1<<36))
	defer a.Close()
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	per := b.N/16 + 1
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			s := gpumem.Stream{Handle: uintptr(g + 1)}
			var ring [4]gpumem.Ptr
			for i := 0; i < per; i++ {
				k := i & 3
				if ring[k] != 0 {
					_ = a.Deallocate(ring[k], s)
				}
				p, err := a.Allocate(uint64(512*(1+(i*7+g)%64)), s)
				if err != nil {
					b.Error(err)
					return
				}
				ring[k] = p
			}
			for _, p := range ring {
				if p != 0 {
					_ = a.Deallocate(p, s)
				}
			}
		}(g)
	}
	wg.Wait()
}

// BenchmarkReplay reports host time per allocation+free pair replaying the
// real traces on the simulator (segment creation included), and the
// overhead (peak reserved over the floor).
func BenchmarkReplay(b *testing.B) {
	for _, name := range []string{"gpt2", "mix2"} {
		for _, c := range []struct {
			name string
			opts Options
		}{{"default", DefaultOptions()}, {"expandable", expandableOptions()}} {
			b.Run(name+"/"+c.name, func(b *testing.B) {
				tr := loadTrace(b, name)
				pairs := tr.Stats().Pairs
				var r replayResult
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					g, ss := replayBackend(b)
					r = replay(b, g, c.opts, tr, ss)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*pairs), "ns/pair")
				b.ReportMetric(float64(r.peakReserved)/float64(r.peakRequested), "overhead")
			})
		}
	}
}

// BenchmarkExpandableGrowth grows an expandable segment by many small
// allocations (100,000 of 40 KiB: a thousand 4 MiB chunks under 100,000 live
// blocks) and frees them: the search for mapped memory that precedes each
// mapping must cost in the free blocks that fit, not in every block of the
// segment. ns/op is per allocation+free pair, simulated device calls
// included.
func BenchmarkExpandableGrowth(b *testing.B) {
	const n = 100000
	g, ss := newSim(b, 16<<30, false)
	defer closeSim(b, g, ss)
	a, err := New(g, expandableOptions())
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	ptrs := make([]gpumem.Ptr, n)
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		for i := range ptrs {
			if ptrs[i], err = a.Allocate(40<<10, ss[0]); err != nil {
				b.Fatal(err)
			}
		}
		for _, p := range ptrs {
			if err := a.Deallocate(p, ss[0]); err != nil {
				b.Fatal(err)
			}
		}
		if err := a.EmptyCache(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/pair")
}
