package managed

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

// After the backend is closed, a cached block is not handed out: every
// allocation is ErrClosed, as the backend's own calls are.
func TestBackendClosedIsClosed(t *testing.T) {
	g, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.Force = true
	a, err := New(g, o)
	if err != nil {
		t.Fatal(err)
	}
	s := gpumem.Stream{}
	p, err := a.Allocate(1<<20, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Deallocate(p, s); err != nil {
		t.Fatal(err)
	}
	_ = g.Close()
	if _, err := a.Allocate(1<<20, s); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("Allocate of a cached size after the backend closed: %v, want ErrClosed", err)
	}
	_ = a.Close()
}
