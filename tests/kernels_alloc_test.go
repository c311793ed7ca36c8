package tests

import (
	"testing"

	"github.com/gpumem/gpumem/kernels/simkernels"
	"github.com/gpumem/gpumem/sim"
)

// Every allocator feeds a kernel: the project's saxpy and reduce_sum,
// written in Go for the simulator, run on memory from caching, asyncpool,
// managed (moved to the device by Buffer.To) and deferrable (locked around
// the launch by LockAndLaunch and LockAndLaunchAsync, after a spill to the
// host tier), and every result is checked against Go. The GPU twin of this
// test, with the kernels compiled at run time, is TestGPUCompiled.
func TestKernelsFedByAllocators(t *testing.T) {
	if err := simkernels.Register(); err != nil {
		t.Fatal(err)
	}
	g, err := sim.New(sim.Config{NoStacks: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the module's unload
		if v := g.Violations(); len(v) > 0 {
			t.Errorf("violations: %v", v)
		}
		if l := g.Leaks(); len(l) > 0 {
			t.Errorf("leaks: %v", l)
		}
		g.Close()
	})
	kp := loadKernelPair(t, g, simkernels.Image())
	// 1 KiB, and 64 KiB + 12 bytes: a partial block.
	feedAllocators(t, g, kp, []uint64{256, 16<<10 + 3}, 1<<30, 1<<30)
}
