package streamcheck_test

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/streamcheck"
	"github.com/gpumem/gpumem/sim"
)

// plain hides the simulator's StreamChecker, so that the fallback (asking
// the backend) is exercised too.
type plain struct{ gpumem.Backend }

func TestCheckAndGone(t *testing.T) {
	g, err := sim.New(sim.Config{Devices: []sim.DeviceConfig{{Capacity: 1 << 30}, {Capacity: 1 << 30}}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []gpumem.Backend{g, plain{g}} {
		if err := streamcheck.Check(b, s); err != nil || streamcheck.Gone(b, s) {
			t.Fatalf("%T: live stream: %v", b, err)
		}
		if err := streamcheck.Check(b, gpumem.Stream{Device: 1}); err != nil {
			t.Fatalf("%T: default stream of device 1: %v", b, err)
		}
		bogus := gpumem.Stream{Device: 0, Handle: 0xdead}
		if err := streamcheck.Check(b, bogus); !errors.Is(err, gpumem.ErrInvalidValue) || !streamcheck.Gone(b, bogus) {
			t.Fatalf("%T: bogus stream: %v", b, err)
		}
		if err := streamcheck.Check(b, gpumem.Stream{Device: 1, Handle: s.Handle}); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Fatalf("%T: a stream named on the wrong device: %v", b, err)
		}
	}
	if err := g.StreamDestroy(s); err != nil {
		t.Fatal(err)
	}
	if !streamcheck.Gone(g, s) {
		t.Fatal("a destroyed stream is not gone")
	}
	g.Close()
	if err := streamcheck.Check(g, gpumem.Stream{}); !errors.Is(err, gpumem.ErrClosed) {
		t.Fatalf("closed backend: %v", err)
	}
}
