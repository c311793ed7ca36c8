package gpumem

import (
	"errors"
	"strings"
	"testing"
)

func TestOtherProcesses(t *testing.T) {
	defer SetOtherProcessesFunc(nil)
	var b Backend // the function is not asked for a nil backend
	SetOtherProcessesFunc(func(Backend, int) (*OtherProcessesMemory, error) { return &OtherProcessesMemory{Bytes: 1}, nil })
	if OtherProcesses(b, 0) != nil {
		t.Fatal("asked for a nil backend")
	}
	type fake struct{ Backend }
	calls := 0
	SetOtherProcessesFunc(func(_ Backend, dev int) (*OtherProcessesMemory, error) {
		calls++
		switch dev {
		case 1:
			return nil, errors.New("no telemetry")
		case 2:
			panic("a bug in telemetry")
		}
		return &OtherProcessesMemory{Bytes: 3 << 20, Processes: []ProcessMemory{{7, 1 << 20}, {8, 2 << 20}}}, nil
	})
	e := (&OutOfMemoryError{Allocator: "x", Device: 0, Requested: 1 << 30}).NoteOtherProcesses(fake{})
	if e.Others == nil || !strings.Contains(e.Error(), "other processes hold 3.00 MiB (process 7: 1.00 MiB, process 8: 2.00 MiB)") {
		t.Fatalf("%v", e)
	}
	if s := e.Summary(); s != "Other processes hold 3.00 MiB (process 7: 1.00 MiB, process 8: 2.00 MiB) on device 0.\n" {
		t.Fatalf("summary without statistics: %q", s)
	}
	for _, dev := range []int{1, 2} {
		if e := (&OutOfMemoryError{Device: dev}).NoteOtherProcesses(fake{}); e.Others != nil || strings.Contains(e.Error(), "other processes") || e.Summary() != "" {
			t.Errorf("device %d: %v", dev, e)
		}
	}
	if calls != 3 {
		t.Errorf("%d calls", calls)
	}
	SetOtherProcessesFunc(nil)
	if OtherProcesses(fake{}, 0) != nil {
		t.Error("removed, yet asked")
	}
	many := &OtherProcessesMemory{Bytes: 6, Processes: []ProcessMemory{{1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}}}
	if s := many.String(); !strings.HasSuffix(s, "process 4: 1 B, and 2 more)") {
		t.Errorf("%q", s)
	}
	var none *OtherProcessesMemory
	if none.String() != "unknown" {
		t.Error(none.String())
	}
}
