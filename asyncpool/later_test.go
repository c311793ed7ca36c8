package asyncpool_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/sim"
)

// holding is the simulator as a backend that holds frees back
// (guard.Later): it keeps them until its next stream-ordered allocation or
// FlushLater, which reports refused an error injected as the driver's.
type holding struct {
	*sim.GPU
	mu      sync.Mutex
	held    []gpumem.Ptr
	streams []gpumem.Stream
	later   int   // frees handed to FreeAsyncLater
	refused error // what FlushLater reports once
}

func (h *holding) FreeAsyncLater(p gpumem.Ptr, s gpumem.Stream) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.later++
	h.held = append(h.held, p)
	h.streams = append(h.streams, s)
	return nil
}

// sendLocked frees what is held, as the backend would before its next call.
func (h *holding) sendLocked() error {
	var errs []error
	for i, p := range h.held {
		errs = append(errs, h.GPU.FreeAsync(p, h.streams[i]))
	}
	h.held, h.streams = nil, nil
	return errors.Join(errs...)
}

func (h *holding) FlushLater() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	err := errors.Join(h.sendLocked(), h.refused)
	h.refused = nil
	return err
}

func (h *holding) MallocFromPoolAsync(size uint64, mp gpumem.MemPool, s gpumem.Stream) (gpumem.Ptr, error) {
	h.mu.Lock()
	err := h.sendLocked()
	h.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return h.GPU.MallocFromPoolAsync(size, mp, s)
}

func (h *holding) heldNow() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held)
}

// TestFastPathHoldsFreesBack checks that the fast path's free goes to a
// backend that can hold it back, that the memory comes back to the pool
// with the next allocation, and that a free the backend later reports
// refused reaches the caller of EmptyCache; with another capture check, or
// a recorded stream, frees are sent at once.
func TestFastPathHoldsFreesBack(t *testing.T) {
	g, err := sim.New(sim.Config{NoStacks: true, Devices: []sim.DeviceConfig{{Name: "H200", Capacity: 4 * gib}}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	h := &holding{GPU: g}
	a, err := asyncpool.New(h, asyncpool.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.StreamDestroy(s)
	p, err := a.Allocate(3*gib, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Deallocate(p, s); err != nil {
		t.Fatal(err)
	}
	if h.later != 1 || h.heldNow() != 1 {
		t.Fatalf("the fast path's free: %d to FreeAsyncLater, %d held; want 1, 1", h.later, h.heldNow())
	}
	// The pool has the memory back by the next allocation: 3 GiB twice
	// fits a 4 GiB device only if the first was freed before it.
	q, err := a.Allocate(3*gib, s)
	if err != nil {
		t.Fatalf("the allocation after a held-back free: %v", err)
	}
	if h.heldNow() != 0 {
		t.Errorf("%d frees still held after the next allocation", h.heldNow())
	}
	if st := a.Stats(0); uint64(st.AllocatedBytes[gpumem.StatAll].Current) != 3*gib {
		t.Errorf("allocated %d bytes, want %d", st.AllocatedBytes[gpumem.StatAll].Current, 3*gib)
	}

	h.refused = errors.New("fake: free refused")
	if err := a.Deallocate(q, s); err != nil {
		t.Fatal(err)
	}
	err = a.EmptyCache()
	if err == nil || !strings.Contains(err.Error(), "free refused") || !strings.Contains(err.Error(), "asyncpool: device 0") {
		t.Errorf("EmptyCache = %v, want the refused free, naming the device", err)
	}
	if err := a.EmptyCache(); err != nil {
		t.Errorf("a second EmptyCache = %v, want nil (reported once)", err)
	}

	// A recorded stream takes the free stream's path: sent at once.
	s2, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.StreamDestroy(s2)
	r, err := a.Allocate(mib, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.RecordStream(r, s2); err != nil {
		t.Fatal(err)
	}
	before := h.later
	if err := a.Deallocate(r, s); err != nil {
		t.Fatal(err)
	}
	if h.later != before {
		t.Error("a free after RecordStream was held back")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	// Only CaptureCheckTracked trusts the backend to know the captures.
	o := asyncpool.DefaultOptions()
	o.CaptureCheck = asyncpool.CaptureCheckEveryCall
	b, err := asyncpool.New(h, o)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	before = h.later
	x, err := b.Allocate(mib, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Deallocate(x, s); err != nil {
		t.Fatal(err)
	}
	if h.later != before {
		t.Error("a free with CaptureCheckEveryCall was held back")
	}
}
