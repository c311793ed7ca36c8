package caching

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/allocatortest"
	"github.com/gpumem/gpumem/sim"
)

// After the backend is closed, a cached block is not handed out: every
// allocation is ErrClosed, as the backend's own calls are.
func TestBackendClosedIsClosed(t *testing.T) {
	allocatortest.BackendClosed(t, func(t *testing.T, b gpumem.Backend) gpumem.Allocator {
		a, err := New(b, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		return a
	}, 1<<20, 4096)
}

// A stream checked once is remembered until a stream is destroyed: a cache
// hit on it then makes no call, and a stream destroyed after its check is
// refused on the next cache hit, with nothing changed.
func TestCheckedStreamsForgetDestroyed(t *testing.T) {
	g, err := sim.New(sim.Config{})
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
	p, err := a.Allocate(1<<20, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Deallocate(p, s); err != nil {
		t.Fatal(err)
	}
	if !a.checked.Known(s) {
		t.Fatal("a stream that passed its check is not remembered")
	}
	if err := g.StreamDestroy(s); err != nil {
		t.Fatal(err)
	}
	if a.checked.Known(s) {
		t.Fatal("a destroyed stream is still remembered")
	}
	before := a.Stats(0)
	if _, err := a.Allocate(1<<20, s); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Fatalf("allocation on a destroyed stream: %v", err)
	}
	if after := a.Stats(0); after.Allocation[gpumem.StatAll].Current != before.Allocation[gpumem.StatAll].Current {
		t.Fatal("a refused allocation changed the statistics")
	}
}
