package caching

import (
	"errors"
	"testing"
)

// A Close the device refuses part of keeps what was refused and says so; a
// second Close returns it, so nothing leaks; a third has nothing to do.
func TestFailedCloseIsRetried(t *testing.T) {
	errRefused := errors.New("refused")
	for _, c := range []struct {
		name string
		opts Options
		op   string
	}{
		{"segment free", Options{}, "Free"},
		{"event destroy", Options{}, "EventDestroy"},
		{"expandable release", Options{ExpandableSegments: true}, "MemRelease"},
		{"expandable range", Options{ExpandableSegments: true}, "MemAddressFree"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, ss := newSim(t, 1<<32, false)
			a, err := New(g, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			// A block used on a second stream, freed: an event; a block
			// still live at Close.
			p, err := a.Allocate(3<<20, ss[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := a.RecordStream(p, ss[1]); err != nil {
				t.Fatal(err)
			}
			if err := a.Deallocate(p, ss[0]); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Allocate(30<<20, ss[0]); err != nil {
				t.Fatal(err)
			}
			if err := g.DeviceSynchronize(0); err != nil {
				t.Fatal(err)
			}
			before := len(g.Leaks())
			for nth := 1; nth <= 16; nth++ { // every call of this Close (it tries a refused release again itself)
				g.InjectFault(c.op, nth, errRefused)
			}
			if err := a.Close(); !errors.Is(err, errRefused) {
				t.Fatalf("Close with %s refused once: %v", c.op, err)
			}
			g.ClearFaults()
			if n := len(g.Leaks()); n == 0 || n >= before {
				t.Errorf("%d live objects after the failed Close (%d before it): want what was refused, only", n, before)
			}
			if err := a.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if err := a.Close(); err != nil {
				t.Errorf("third Close: %v", err)
			}
			closeSim(t, g, ss)
		})
	}
}
