package caching

import (
	"testing"

	"github.com/gpumem/gpumem"
)

// TestReleaseBeforeGrow pins release before growth and its slack: with 800
// MiB live and a free 100 MiB segment cached, a 120 MiB request needs a new
// segment (reserved would be 1020 MiB against a high-water mark of 900 MiB).
// Without slack, or with too little, the cached segment is freed first;
// with an eighth of slack over what would be allocated (920 MiB × 1.125 =
// 1035 MiB) it is kept.
func TestReleaseBeforeGrow(t *testing.T) {
	for _, c := range []struct {
		name          string
		rbg           bool
		slack         float64
		frees         int64
		reservedAfter int64
	}{
		{"off", false, 0, 0, 1020 << 20},
		{"no-slack", true, 0, 1, 920 << 20},
		{"small-slack", true, 0.01, 1, 920 << 20},
		{"eighth", true, 0.125, 0, 1020 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := New(newFake(4<<30), Options{ReleaseBeforeGrow: c.rbg, GrowthSlack: c.slack})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			s := gpumem.Stream{Handle: 1}
			keep, err := a.Allocate(800<<20, s)
			if err != nil {
				t.Fatal(err)
			}
			p, err := a.Allocate(100<<20, s)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Deallocate(p, s); err != nil {
				t.Fatal(err)
			}
			q, err := a.Allocate(120<<20, s)
			if err != nil {
				t.Fatal(err)
			}
			st := a.Stats(0)
			if st.NumDeviceFree != c.frees || st.ReservedBytes[0].Current != c.reservedAfter {
				t.Errorf("device frees %d, reserved %d MiB; want %d, %d MiB",
					st.NumDeviceFree, st.ReservedBytes[0].Current>>20, c.frees, c.reservedAfter>>20)
			}
			for _, x := range []gpumem.Ptr{q, keep} {
				if err := a.Deallocate(x, s); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	if _, err := New(newFake(1<<30), Options{GrowthSlack: -1}); err == nil {
		t.Error("a negative growth slack was accepted")
	}
}
