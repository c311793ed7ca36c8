package replay

import (
	"sync/atomic"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

// The Profiler forwards the Kernels methods to the backend it wraps and
// times them.
func TestProfilerTimesKernels(t *testing.T) {
	g, err := sim.New(sim.Config{NoStacks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var ran atomic.Int64
	if err := g.RegisterKernel(sim.Kernel{Name: "tick", Run: func(k *sim.KernelCall) { ran.Add(1) }}); err != nil {
		t.Fatal(err)
	}
	p, err := NewProfiler(g)
	if err != nil {
		t.Fatal(err)
	}
	var b gpumem.Backend = p
	m, err := b.ModuleLoadData(0, sim.ModuleImage{Kernels: []string{"tick"}}.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	f, err := b.ModuleFunction(m, "tick")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.OccupancyMaxPotentialBlockSize(f, 0, 0); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := b.LaunchKernel(f, gpumem.Dim3{X: 2}, gpumem.Dim3{X: 32}, 0, gpumem.Stream{}, gpumem.KernelParams{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.DeviceSynchronize(0); err != nil {
		t.Fatal(err)
	}
	if err := b.ModuleUnload(m); err != nil {
		t.Fatal(err)
	}
	if ran.Load() != 6 {
		t.Errorf("%d blocks ran, want 6", ran.Load())
	}
	want := map[string]int64{"ModuleLoadData": 1, "ModuleFunction": 1, "OccupancyMaxPotentialBlockSize": 1, "LaunchKernel": 3, "ModuleUnload": 1, "DeviceSynchronize": 1}
	got := map[string]int64{}
	for _, o := range p.Profile() {
		got[o.Op] = o.Calls
	}
	for op, n := range want {
		if got[op] != n {
			t.Errorf("%s: %d calls profiled, want %d (%v)", op, got[op], n, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("profile %v, want %v", got, want)
	}
}
