package managed

import (
	"errors"
	"testing"
	"time"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

// The other-processes hook (which opens NVML or ROCm SMI on its first
// call) runs with no pool lock held when the oversubscription guard
// refuses: the pool's other calls go on meanwhile.
func TestGuardOtherProcessesOutsideLock(t *testing.T) {
	_, a := setup(t, sim.Config{}, Options{MaxDeviceFraction: 1e-12})
	calls, blocked := 0, 0
	gpumem.SetOtherProcessesFunc(func(gpumem.Backend, int) (*gpumem.OtherProcessesMemory, error) {
		calls++
		done := make(chan struct{})
		go func() {
			a.dev.Stats(0) // takes the device-preferred pool's device lock
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second): // a deadlock, not a timing
			blocked++
		}
		return &gpumem.OtherProcessesMemory{Bytes: 3 << 20}, nil
	})
	defer gpumem.SetOtherProcessesFunc(nil)
	_, err := a.Alloc(mib, dev0, s0)
	var oom *gpumem.OutOfMemoryError
	if !errors.As(err, &oom) {
		t.Fatalf("Alloc under a cap of 0 bytes: %v, want an out-of-memory error", err)
	}
	if oom.Others == nil || oom.Others.Bytes != 3<<20 {
		t.Errorf("Others %v, want the hook's 3 MiB", oom.Others)
	}
	if calls == 0 || blocked != 0 {
		t.Errorf("the hook ran %d times, %d of them holding the pool's lock", calls, blocked)
	}
}
