package clock

import (
	"testing"
	"time"
)

func TestNowIsWallTimeAndMonotonic(t *testing.T) {
	before := time.Now()
	a := Now()
	b := Now()
	after := time.Now()
	if a.Before(before) || a.After(after) {
		t.Fatalf("stamp %v outside [%v, %v]", a, before, after)
	}
	if b.Before(a) {
		t.Fatalf("second stamp %v before the first %v", b, a)
	}
	// The wall reading agrees with the system clock to well within a second
	// (a stamp is only as far off as the clock was adjusted since start).
	if d := a.Round(0).Sub(before.Round(0)); d < -time.Second || d > time.Second {
		t.Fatalf("wall reading off by %v", d)
	}
}

func BenchmarkNow(b *testing.B) {
	b.Run("clock.Now", func(b *testing.B) {
		for b.Loop() {
			_ = Now()
		}
	})
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			_ = time.Now()
		}
	})
}
