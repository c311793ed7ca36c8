package replay

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/trace"
)

// On the simulator, an allocator that takes every request straight from the
// device reserves exactly what the trace asks for: the replay's peak
// reserved is the trace's floor, to the byte.
func TestSimPassThroughReproducesFloor(t *testing.T) {
	tr := mustTrace(t, small)
	p := filepath.Join("..", "..", "shared", "traces", "mix2.trace.gz")
	if _, err := os.Stat(p); err == nil {
		if tr, err = trace.ReadFile(p); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Logf("shared traces absent (%v): using a small trace", err)
	}
	floor := tr.Stats().PeakRequested
	g, err := sim.New(sim.Config{NoStacks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	res, err := Run(g, tr, newPassAlloc(g), Options{Allocator: "pass"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Backend != "sim" || res.PeakRequested != floor || res.PeakReserved != floor || res.OOMs != 0 {
		t.Fatalf("%+v, floor %d", res, floor)
	}
	if leaks := g.Leaks(); len(leaks) != 0 {
		t.Fatalf("the replay leaked: %v", leaks)
	}
}

// A simulated device too small for the trace: the failures are counted and
// the replay goes on.
func TestSimOOM(t *testing.T) {
	g, err := sim.New(sim.Config{Devices: []sim.DeviceConfig{{Capacity: 8 << 20}}, NoStacks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	tr := mustTrace(t, "a 1 6291456 0\na 2 6291456 0\nf 1 0\na 3 4194304 1\nf 3 1\n")
	res, err := Run(g, tr, newPassAlloc(g), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.OOMs != 1 || res.Pairs != 3 || res.PeakRequested != 6291456 {
		t.Fatalf("%+v", res)
	}
}
