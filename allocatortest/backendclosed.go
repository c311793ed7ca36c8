package allocatortest

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

// BackendClosed checks that an allocator built by newAlloc hands out no
// cached block once its backend is closed: every allocation is then
// ErrClosed, as the backend's own calls are. It allocates and frees cached
// bytes on the default stream of a default simulator, closes the simulator,
// and asks for cached bytes again and for each of others.
func BackendClosed(t *testing.T, newAlloc Factory, cached uint64, others ...uint64) {
	t.Helper()
	g, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a := newAlloc(t, g)
	s := gpumem.Stream{}
	p, err := a.Allocate(cached, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Deallocate(p, s); err != nil {
		t.Fatal(err)
	}
	_ = g.Close()
	if _, err := a.Allocate(cached, s); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("Allocate of a cached size after the backend closed: %v, want ErrClosed", err)
	}
	for _, size := range others {
		if _, err := a.Allocate(size, s); !errors.Is(err, gpumem.ErrClosed) {
			t.Errorf("Allocate of %d bytes after the backend closed: %v, want ErrClosed", size, err)
		}
	}
	_ = a.Close()
}
