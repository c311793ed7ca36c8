package allocatortest_test

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/allocatortest"
	"github.com/gpumem/gpumem/sim"
)

// hostileNames are the registered allocators, each built by name as the
// configuration selects them (managed is opted in by its backend key).
var hostileNames = []string{"caching", "asyncpool", "managed"}

// newHostile builds allocator name over a fresh small simulated device with
// conf (in GPUMEM_ALLOC_CONF syntax, without the backend key).
func newHostile(t *testing.T, name, conf string) (*sim.GPU, gpumem.Allocator) {
	t.Helper()
	g, err := sim.New(sim.Config{Devices: []sim.DeviceConfig{allocatortest.SmallDevice}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	full := "backend:" + name
	if conf != "" {
		full += "," + conf
	}
	a, err := gpumem.NewNamedAllocator(g, name, full)
	if err != nil {
		t.Fatalf("%s with %q: %v", name, full, err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return g, a
}

// Hostile inputs to the API, the same answer from every allocator.
func TestHostileAPI(t *testing.T) {
	for _, tc := range []struct {
		name string
		conf string
		run  func(t *testing.T, g *sim.GPU, a gpumem.Allocator)
	}{
		{"a memory fraction whose cap rounds to 0 bytes caps at 0", "per_process_memory_fraction:1e-12", func(t *testing.T, g *sim.GPU, a gpumem.Allocator) {
			p, err := a.Allocate(4096, gpumem.Stream{})
			var oom *gpumem.OutOfMemoryError
			if !errors.As(err, &oom) {
				if err == nil {
					_ = a.Deallocate(p, gpumem.Stream{})
				}
				t.Fatalf("Allocate(4096) under a cap of 0 bytes: %v, want an *OutOfMemoryError", err)
			}
		}},
	} {
		for _, name := range hostileNames {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				g, a := newHostile(t, name, tc.conf)
				tc.run(t, g, a)
			})
		}
	}
}
