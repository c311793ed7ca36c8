package caching

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

// The other-processes hook (which opens NVML or ROCm SMI on its first call,
// and lists processes each time) runs with no device lock held: an
// out-of-memory failure must not stall the device's other allocations and
// frees for as long as the library takes.
func TestOOMOtherProcessesOutsideLock(t *testing.T) {
	g, err := sim.New(sim.Config{Devices: []sim.DeviceConfig{{Capacity: 64 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	a, err := New(g, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	calls, locked := 0, 0
	gpumem.SetOtherProcessesFunc(func(b gpumem.Backend, dev int) (*gpumem.OtherProcessesMemory, error) {
		calls++
		d := a.devs[dev]
		if !d.mu.TryLock() {
			locked++
		} else {
			d.mu.Unlock()
		}
		return &gpumem.OtherProcessesMemory{Bytes: 1 << 20, Processes: []gpumem.ProcessMemory{{PID: 7, Bytes: 1 << 20}}}, nil
	})
	defer gpumem.SetOtherProcessesFunc(nil)
	held, err := a.Allocate(40<<20, s)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Deallocate(held, s)
	for _, size := range []uint64{128 << 20, 32 << 20} { // larger than the device; then more than is left of it
		_, err := a.Allocate(size, s)
		var oom *gpumem.OutOfMemoryError
		if !errors.As(err, &oom) {
			t.Fatalf("allocating %d: %v, want an out-of-memory error", size, err)
		}
		if oom.Others == nil || oom.Others.Bytes != 1<<20 {
			t.Errorf("allocating %d: Others %v, want the hook's 1 MiB", size, oom.Others)
		}
	}
	if calls == 0 || locked != 0 {
		t.Errorf("the hook ran %d times, %d of them under the device lock", calls, locked)
	}
}
