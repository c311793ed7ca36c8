package managed

import (
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/sim"
)

// BenchmarkAllocateDeallocate is the cache-hit path through the managed
// allocator, against the caching allocator alone on the same simulator.
func BenchmarkAllocateDeallocate(b *testing.B) {
	g, err := sim.New(sim.Config{NoStacks: true})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	m, err := New(g, Options{Force: true})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	c, err := caching.New(g, caching.DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for _, r := range []struct {
		name string
		res  gpumem.Resource
	}{{"managed", m}, {"caching", c}} {
		b.Run(r.name, func(b *testing.B) {
			s := gpumem.Stream{}
			for i := 0; i < b.N; i++ {
				p, err := r.res.Allocate(1<<20, s)
				if err != nil {
					b.Fatal(err)
				}
				if err := r.res.Deallocate(p, s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
