package telemetry

import (
	"testing"

	"github.com/gpumem/gpumem/bind"
)

// TestNVMLProcessCountBounded: a process list whose count on success is
// more than the buffer held is read to the buffer's end, and what the
// engine allocates follows the buffer, not the count (4G entries would be
// 128 GiB).
func TestNVMLProcessCountBounded(t *testing.T) {
	setFake(fakeDevices())
	fake.procCount = 1 << 24
	defer func() { fake.procCount = 0 }()
	tel, err := OpenSystem(bind.CUDA, bind.WithLoader(fakeLoader))
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Close()
	ps, err := tel.Processes(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) > 16 || len(ps) < 2 || ps[1].PID != 101 {
		t.Errorf("processes %+v", ps)
	}
	if cap(ps) > 16 {
		t.Errorf("%d processes listed; room for %d made", len(ps), cap(ps))
	}
}
