package caching

import (
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/fakegpu"
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
			a, err := New(fakegpu.New(4<<30), Options{ReleaseBeforeGrow: c.rbg, GrowthSlack: c.slack})
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
	if _, err := New(fakegpu.New(1<<30), Options{GrowthSlack: -1}); err == nil {
		t.Error("a negative growth slack was accepted")
	}
}

// TestSegmentDivisor pins the growth of large segments with the footprint:
// with nothing reserved a 12 MiB request gets PyTorch's 20 MiB; once 800 MiB
// is held, a sixteenth of it (50 MiB); the cap stays MinLargeSegment; with
// no divisor, MinLargeSegment at once.
func TestSegmentDivisor(t *testing.T) {
	for _, c := range []struct {
		name           string
		divisor        int
		first, afterGB uint64 // segment sizes in MiB: empty device, then with 800 MiB held
	}{
		{"sixteenth", 16, 20, 50},
		{"none", 0, 256, 256},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := New(fakegpu.New(8<<30), Options{MinLargeSegment: 256 << 20, SegmentDivisor: c.divisor})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			s := gpumem.Stream{Handle: 1}
			p, err := a.Allocate(12<<20, s)
			if err != nil {
				t.Fatal(err)
			}
			if r := a.Stats(0).ReservedBytes[0].Current; r != int64(c.first)<<20 {
				t.Errorf("first segment %d MiB, want %d", r>>20, c.first)
			}
			big, err := a.Allocate(800<<20-uint64(a.Stats(0).ReservedBytes[0].Current), s)
			if err != nil {
				t.Fatal(err)
			}
			before := a.Stats(0).ReservedBytes[0].Current
			if before != 800<<20 {
				t.Fatalf("reserved %d MiB, want 800", before>>20)
			}
			// On another stream, so that no free block of the first
			// stream's segments can serve it.
			s2 := gpumem.Stream{Handle: 2}
			q, err := a.Allocate(12<<20, s2)
			if err != nil {
				t.Fatal(err)
			}
			if got := a.Stats(0).ReservedBytes[0].Current - before; got != int64(c.afterGB)<<20 {
				t.Errorf("segment with %d MiB held: %d MiB, want %d", before>>20, got>>20, c.afterGB)
			}
			for _, x := range []gpumem.Ptr{p, big} {
				if err := a.Deallocate(x, s); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.Deallocate(q, s2); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := New(fakegpu.New(1<<30), Options{SegmentDivisor: -1}); err == nil {
		t.Error("a negative segment divisor was accepted")
	}
}
