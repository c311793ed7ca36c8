package sim

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// The simulator speaks CUDA's status codes from the CUDA backend's table:
// every name ErrorName gives and every sentinel its errors match.
func TestStatusesFromTheCUDATable(t *testing.T) {
	g := NewDefault()
	defer g.Close()
	for _, s := range symtab.Statuses[symtab.CUDA].Statuses {
		if got := g.ErrorName(s.Code); got != s.Name {
			t.Errorf("ErrorName(%d) = %q, want %q", s.Code, got, s.Name)
		}
		e := vendorErr(symtab.Malloc, s.Code)
		want := s.Err
		if s.Closed {
			want = gpumem.ErrClosed
		}
		if e.Err != want || e.Name != s.Name || e.Op != "cuMemAlloc_v2" {
			t.Errorf("code %d: %+v, want sentinel %v", s.Code, e, want)
		}
	}
	_, err := g.Malloc(0, 1<<62)
	var ve *gpumem.Error
	if !errors.As(err, &ve) || ve.Code != symtab.CUDAOutOfMemory || ve.Name != "CUDA_ERROR_OUT_OF_MEMORY" {
		t.Errorf("an impossible allocation: %v", err)
	}
}

// Counters and faults are indexed by the driver table's ids: the names they
// accept are the rows' names.
func TestMethodsAreTableRows(t *testing.T) {
	for name, op := range methodByName {
		if symtab.Driver.Rows[op].Op != name {
			t.Errorf("%s is row %d, named %s", name, op, symtab.Driver.Rows[op].Op)
		}
	}
	if _, ok := methodByName["Init"]; ok {
		t.Error("the simulator accepts Init, which is not one of its methods")
	}
	g := NewDefault()
	defer g.Close()
	g.Name()
	g.InjectFault("CopyToDevice", 1, nil)
	if err := g.CopyToDevice(0, []byte{1}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("injected CopyToDevice fault: %v", err)
	}
	if g.Calls("Name") != 1 || g.Calls("CopyToDevice") != 1 || int(g.calls[symtab.Name].Load()) != 1 {
		t.Errorf("counters: Name %d, CopyToDevice %d", g.Calls("Name"), g.Calls("CopyToDevice"))
	}
}
