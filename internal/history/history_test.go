package history

import (
	"testing"
	"time"

	"github.com/gpumem/gpumem"
)

func TestRingKeepsTheLastN(t *testing.T) {
	r := New(3)
	if !r.On() || r.Cap() != 3 || r.Len() != 0 {
		t.Fatalf("new ring: on %v cap %d len %d", r.On(), r.Cap(), r.Len())
	}
	base := time.Unix(100, 0)
	for i := 0; i < 5; i++ {
		r.AddAt(base.Add(time.Duration(i)), gpumem.ActionAlloc, 0, 0, gpumem.Ptr(i), uint64(i))
	}
	got := r.AppendTo(nil)
	if r.Len() != 3 || len(got) != 3 {
		t.Fatalf("len %d, %d entries", r.Len(), len(got))
	}
	for i, e := range got {
		if e.Addr != gpumem.Ptr(i+2) {
			t.Errorf("entry %d: addr %d, want %d", i, e.Addr, i+2)
		}
	}
}

func TestZeroRingKeepsNothing(t *testing.T) {
	var r Ring
	r.Add(gpumem.ActionAlloc, 0, 0, 1, 1)
	if r.On() || r.Len() != 0 || len(r.AppendTo(nil)) != 0 {
		t.Fatal("the zero ring kept an entry")
	}
	if n := New(-1); n.On() {
		t.Fatal("a negative size kept entries")
	}
}

func TestRingStampsNow(t *testing.T) {
	r := New(1)
	before := time.Now()
	r.Add(gpumem.ActionFreeRequest, 2, 7, 9, 10)
	e := r.AppendTo(nil)[0]
	if e.Time.Before(before.Add(-time.Second)) || e.Action != gpumem.ActionFreeRequest || e.Device != 2 || e.Stream != 7 || e.Size != 10 {
		t.Fatalf("entry %+v", e)
	}
}

func TestMergeOrdersByTime(t *testing.T) {
	at := func(s int64, p gpumem.Ptr) gpumem.HistoryEntry {
		return gpumem.HistoryEntry{Time: time.Unix(s, 0), Addr: p}
	}
	got := Merge([]gpumem.HistoryEntry{at(1, 1), at(3, 3)}, []gpumem.HistoryEntry{at(2, 2), at(3, 4)}, nil)
	want := []gpumem.Ptr{1, 2, 3, 4}
	if len(got) != len(want) {
		t.Fatalf("%d entries", len(got))
	}
	for i := range want {
		if got[i].Addr != want[i] {
			t.Errorf("entry %d: %d, want %d", i, got[i].Addr, want[i])
		}
	}
}
