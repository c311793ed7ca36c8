package caching

import (
	"bytes"
	"context"
	"testing"

	"github.com/gpumem/gpumem"
)

// expandableSegments returns the device's expandable segments.
func expandableSegments(a *Allocator) []*segment {
	d := a.devs[0]
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*segment
	for seg := range d.segments {
		if seg.exp != nil {
			out = append(out, seg)
		}
	}
	return out
}

// checkTables checks an expandable segment's chunk tables: as long as each
// other, covering every mapped chunk, no larger than growth by doubling from
// the highest mapped chunk gives, and counting nmapped mapped chunks.
func checkTables(t *testing.T, seg *segment) {
	t.Helper()
	e := seg.exp
	n := len(e.mapped)
	if len(e.handles) != n || (e.sleeping != nil && len(e.sleeping) != n) {
		t.Fatalf("tables of %d, %d and %d chunks", len(e.handles), n, len(e.sleeping))
	}
	if uint64(n) < e.top || uint64(n) > max(2*e.top, 64) || uint64(n) > e.n {
		t.Errorf("tables of %d chunks for chunks mapped up to %d (of %d)", n, e.top, e.n)
	}
	mapped := 0
	for _, m := range e.mapped {
		if m {
			mapped++
		}
	}
	if mapped != e.nmapped {
		t.Errorf("%d chunks marked mapped, %d counted", mapped, e.nmapped)
	}
}

// An expandable segment's range is twice the device, but its chunk tables
// grow with what is mapped: a first allocation allocates tables for a few
// dozen chunks, not for the whole range (143,771 chunks of 2 MiB on an
// H200), and they keep up as memory grows, across Sleep and Wake.
func TestExpandableTablesGrowWithMapping(t *testing.T) {
	g, a, ss := newSleepSim(t, 140<<30)
	small, err := a.AllocateTagged(4096, ss[0], KeepOnSleep)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.CopyToDevice(small, bytes.Repeat([]byte{7}, 4096)); err != nil {
		t.Fatal(err)
	}
	var ptrs []gpumem.Ptr
	for i := 0; i < 3; i++ {
		p, err := a.Allocate(30<<20, ss[0])
		if err != nil {
			t.Fatal(err)
		}
		ptrs = append(ptrs, p)
	}
	segs := expandableSegments(a)
	if len(segs) != 2 {
		t.Fatalf("%d expandable segments, want the small and the large pool's", len(segs))
	}
	for _, seg := range segs {
		if len(seg.exp.mapped) > 64 || seg.exp.n < 10000 {
			t.Errorf("chunk tables of %d entries for a range of %d chunks after the first allocations", len(seg.exp.mapped), seg.exp.n)
		}
		checkTables(t, seg)
	}
	ctx := context.Background()
	if err := a.Sleep(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Wake(ctx); err != nil {
		t.Fatal(err)
	}
	// Grow the large pool past the tables made before Sleep (whose
	// sleeping table must follow).
	for i := 0; i < 200; i++ {
		p, err := a.Allocate(20<<20, ss[0])
		if err != nil {
			t.Fatal(err)
		}
		ptrs = append(ptrs, p)
	}
	grown := false
	for _, seg := range expandableSegments(a) {
		checkTables(t, seg)
		if seg.exp.top > 200 {
			grown = true
		}
	}
	if !grown {
		t.Fatal("the large pool did not grow past 200 chunks")
	}
	if !holds(t, g, small, bytes.Repeat([]byte{7}, 4096)) {
		t.Error("a kept allocation changed across Sleep and Wake")
	}
	for _, p := range append(ptrs, small) {
		if err := a.Deallocate(p, ss[0]); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(0); st.ReservedBytes[gpumem.StatAll].Current != 0 {
		t.Errorf("%d bytes reserved after freeing everything and emptying the cache", st.ReservedBytes[gpumem.StatAll].Current)
	}
}
