package trace

import (
	"math"
	"testing"
)

// Sizes near 2^63: the sums saturate at math.MaxUint64 rather than wrap.
func TestStatsSaturate(t *testing.T) {
	big := uint64(1) << 63
	for _, tc := range []struct {
		name      string
		events    []Event
		peak, tot uint64
		liveAtEnd int
	}{
		{"two live halves of 2^64", []Event{{Alloc: true, ID: 1, Size: big}, {Alloc: true, ID: 2, Size: big}}, math.MaxUint64, math.MaxUint64, 2},
		{"three, one freed", []Event{{Alloc: true, ID: 1, Size: big}, {Alloc: true, ID: 2, Size: big}, {ID: 1}, {Alloc: true, ID: 3, Size: 1}}, math.MaxUint64, math.MaxUint64, 2},
		{"the largest size alone", []Event{{Alloc: true, ID: 1, Size: math.MaxUint64}, {ID: 1}, {Alloc: true, ID: 2, Size: 7}}, math.MaxUint64, math.MaxUint64, 1},
	} {
		st := (&Trace{Events: tc.events}).Stats()
		if st.PeakRequested != tc.peak || st.TotalBytes != tc.tot || st.LiveAtEnd != tc.liveAtEnd {
			t.Errorf("%s: peak %d total %d live %d; want %d %d %d", tc.name, st.PeakRequested, st.TotalBytes, st.LiveAtEnd, tc.peak, tc.tot, tc.liveAtEnd)
		}
	}
}

// Stats ignores the events a checked trace could not hold: a free of an
// unknown or already freed ID counts as no free.
func TestStatsIgnoresImpossibleFrees(t *testing.T) {
	st := (&Trace{Events: []Event{
		{Alloc: true, ID: 1, Size: 10}, {ID: 1}, {ID: 1}, {ID: 99}, {Alloc: true, ID: 2, Size: 5},
	}}).Stats()
	if st.Pairs != 2 || st.Frees != 1 || st.LiveAtEnd != 1 || st.PeakRequested != 10 {
		t.Errorf("stats %+v; want 2 allocations, 1 free, 1 live, peak 10", st)
	}
}
