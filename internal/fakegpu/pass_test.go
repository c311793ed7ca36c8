package fakegpu

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
)

var _ gpumem.Allocator = (*Pass)(nil)

func TestPass(t *testing.T) {
	g := New(10 << 20)
	a := NewPass(g, "pass")
	s0, s1 := gpumem.Stream{Handle: 1}, gpumem.Stream{Handle: 2}
	p, err := a.Allocate(3<<20, s0)
	if err != nil {
		t.Fatal(err)
	}
	q, err := a.Allocate(1<<20, s1)
	if err != nil {
		t.Fatal(err)
	}
	var oom *gpumem.OutOfMemoryError
	if _, err := a.Allocate(8<<20, s0); !errors.As(err, &oom) || oom.Allocator != "pass" || !errors.Is(err, gpumem.ErrOutOfMemory) {
		t.Errorf("over capacity: %v", err)
	}
	st := a.Stats(0)
	if st.ReservedBytes[gpumem.StatAll].Current != 4<<20 || st.RequestedBytes[gpumem.StatAll].Current != 4<<20 ||
		st.NumDeviceAlloc != 2 || st.NumOOMs != 1 || g.Used(0) != 4<<20 {
		t.Errorf("stats %+v, device holds %d", st, g.Used(0))
	}
	if err := a.RecordStream(p, s1); err != nil || a.Records() != 1 {
		t.Errorf("record: %v, %d records", err, a.Records())
	}
	if err := a.RecordStream(1, s1); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("record of an unknown pointer: %v", err)
	}
	if err := a.Deallocate(p, s1); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("free on another stream: %v", err)
	}
	if err := a.Deallocate(p, s0); err != nil || a.Live() != 1 {
		t.Errorf("free: %v, %d live", err, a.Live())
	}
	if err := a.Deallocate(p, s0); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("double free: %v", err)
	}
	_ = q
	if err := a.Close(); err != nil || !a.Closed() || a.Live() != 0 || g.Allocations() != 0 {
		t.Errorf("close: %v; %d live, %d on the device", err, a.Live(), g.Allocations())
	}
	if err := a.Close(); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("second close: %v", err)
	}
	if _, err := a.Allocate(1, s0); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("allocate after close: %v", err)
	}
}
