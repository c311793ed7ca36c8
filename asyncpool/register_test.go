package asyncpool_test

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/config"
	"github.com/gpumem/gpumem/internal/oomhooks"
	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/simtest"
)

func TestRegistered(t *testing.T) {
	g := simtest.New(t, sim.Config{Devices: []sim.DeviceConfig{{Name: "sim0", Capacity: 1 * gib}}})
	var info gpumem.AllocatorInfo
	for _, i := range gpumem.Allocators() {
		if i.Name == config.BackendAsyncPool {
			info = i
		}
	}
	if info.New == nil || info.Doc == "" || info.Enabled != nil {
		t.Fatalf("registration %+v: want a constructor, a description, always enabled", info)
	}
	a, err := gpumem.NewAllocator(g, "backend:asyncpool,throttle_ratio:0.5")
	if err != nil {
		t.Fatal(err)
	}
	ap, ok := a.(*asyncpool.Allocator)
	if !ok {
		t.Fatalf("NewAllocator built a %T", a)
	}
	if o := ap.Options(); o.ThrottleRatio != 0.5 || o.ReleaseThreshold != asyncpool.KeepAll {
		t.Errorf("options %+v", o)
	}
	if err := gpumem.SetupOf(a, 0); err != nil {
		t.Errorf("SetupOf: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a, err = gpumem.NewNamedAllocator(g, config.BackendAsyncPool, "release_threshold_mb:0")
	if err != nil {
		t.Fatal(err)
	}
	if o := a.(*asyncpool.Allocator).Options(); o.ReleaseThreshold != 0 {
		t.Errorf("named: options %+v", o)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct{ conf, key string }{
		{"backend:asyncpool,max_split_size_mb:64", "max_split_size_mb"},
		{"backend:asyncpool,expandable_segments:True", "expandable_segments"},
		{"backend:asyncpool,throttle_ratio:2", "throttle_ratio"},
	} {
		a, err := gpumem.NewAllocator(g, c.conf)
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Key != c.key || !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("%s: allocator %v, error %v: want a *config.Error naming %s", c.conf, a, err, c.key)
		}
		if a != nil {
			t.Errorf("%s: an allocator (%T) with the error", c.conf, a)
		}
	}
}

// A handler that frees nothing but always asks for another attempt is
// asked oomhooks.MaxAttempts times, then the allocation fails.
func TestOOMHandlerBounded(t *testing.T) {
	cfg := sim.Config{Devices: []sim.DeviceConfig{{Name: "small", Capacity: 1 * gib}}}
	r := newRig(t, cfg, asyncpool.DefaultOptions(), 1)
	defer r.finish()
	s := r.ss[0]
	p := r.alloc(700*mib, s)
	var attempts []int
	var before map[string]int
	r.a.SetOOMHandler(func(dev int, requested uint64, attempt int) bool {
		if attempt == 0 {
			before = r.calls("MallocFromPoolAsync")
		}
		if dev != 0 || requested != 500*mib {
			t.Errorf("handler asked for device %d, %d bytes", dev, requested)
		}
		attempts = append(attempts, attempt)
		return true
	})
	_, err := r.a.Allocate(500*mib, s)
	if !errors.Is(err, gpumem.ErrOutOfMemory) {
		t.Fatalf("Allocate: %v, want out of memory", err)
	}
	if err := oomhooks.CheckAttempts(attempts); err != nil {
		t.Fatal(err)
	}
	// One more try per yes.
	if n := r.delta(before, "MallocFromPoolAsync"); n != oomhooks.MaxAttempts {
		t.Errorf("%d pool allocations after the handler was first asked, want %d", n, oomhooks.MaxAttempts)
	}
	if st := r.a.Stats(0); st.NumOOMs != 1 || st.NumAllocRetries != 1 {
		t.Errorf("ooms/retries = %d/%d, want 1/1", st.NumOOMs, st.NumAllocRetries)
	}
	r.a.SetOOMHandler(nil)
	r.free(p, s)
}

// The OOM handler and the observers are called with no lock held: they may
// call the allocator, Close included (which waits for every call under
// way), and the allocation then fails with ErrClosed.
func TestOOMHandlerMayClose(t *testing.T) {
	cfg := sim.Config{Devices: []sim.DeviceConfig{{Name: "small", Capacity: 1 * gib}}}
	r := newRig(t, cfg, asyncpool.DefaultOptions(), 1)
	defer r.finish()
	s := r.ss[0]
	r.alloc(700*mib, s) // freed by Close
	var observed int
	r.a.AddOOMObserver(func(e *gpumem.OutOfMemoryError) {
		observed++
		_ = r.a.Stats(0)
	})
	if _, err := r.a.Allocate(2*gib, s); !errors.Is(err, gpumem.ErrOutOfMemory) || observed != 1 {
		t.Fatalf("Allocate over capacity: %v, observed %d times", err, observed)
	}
	r.a.SetOOMHandler(func(int, uint64, int) bool {
		if err := r.a.Close(); err != nil {
			t.Errorf("Close in the OOM handler: %v", err)
		}
		return true
	})
	if _, err := r.a.Allocate(500*mib, s); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("Allocate whose OOM handler closed the allocator: %v, want ErrClosed", err)
	}
}
