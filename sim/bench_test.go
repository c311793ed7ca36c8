package sim_test

import (
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

func benchGPU(b *testing.B, stacks bool) *sim.GPU {
	g, err := sim.New(sim.Config{NoStacks: !stacks})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// BenchmarkMallocFree measures a Malloc+Free pair with many live allocations.
func BenchmarkMallocFree(b *testing.B) {
	for _, stacks := range []bool{true, false} {
		name := "stacks"
		if !stacks {
			name = "nostacks"
		}
		b.Run(name, func(b *testing.B) {
			g := benchGPU(b, stacks)
			live := make([]gpumem.Ptr, 0, 4096)
			for i := 0; i < 4096; i++ {
				p, err := g.Malloc(0, uint64(512+i*1024))
				if err != nil {
					b.Fatal(err)
				}
				live = append(live, p)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				j := i % len(live)
				if err := g.Free(0, live[j]); err != nil {
					b.Fatal(err)
				}
				p, err := g.Malloc(0, uint64(512+(i%4096)*1024))
				if err != nil {
					b.Fatal(err)
				}
				live[j] = p
			}
		})
	}
}

// BenchmarkMallocAsyncFreeAsync measures a stream-ordered pair on a
// free-running device.
func BenchmarkMallocAsyncFreeAsync(b *testing.B) {
	for _, stacks := range []bool{true, false} {
		name := "stacks"
		if !stacks {
			name = "nostacks"
		}
		b.Run(name, func(b *testing.B) {
			g := benchGPU(b, stacks)
			s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p, err := g.MallocAsync(uint64(512+(i%64)*4096), s)
				if err != nil {
					b.Fatal(err)
				}
				if err := g.FreeAsync(p, s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
