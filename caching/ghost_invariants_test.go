package caching

import (
	"slices"
	"testing"
)

// checkGhosts checks an expandable segment's ghosts (ghost.go): a chunk is
// mapped, a ghost or neither; each ghost is listed under its handle, whose
// active chunk is mapped to it; nghost counts them; top covers them.
func checkGhosts(t testing.TB, seg *segment) {
	t.Helper()
	e := seg.exp
	if len(e.ghost) != len(e.mapped) {
		t.Fatalf("segment %#x: ghost table of %d chunks, mapped table of %d", seg.addr, len(e.ghost), len(e.mapped))
	}
	n, high := 0, uint64(0)
	for i, g := range e.ghost {
		if e.mapped[i] {
			high = uint64(i) + 1
		}
		if !g {
			continue
		}
		n++
		high = uint64(i) + 1
		if e.mapped[i] {
			t.Fatalf("segment %#x: chunk %d both mapped and a ghost", seg.addr, i)
		}
		gs := e.moved[e.handles[i]]
		if gs == nil || !slices.Contains(gs.slots, uint64(i)) {
			t.Fatalf("segment %#x: ghost chunk %d not listed under its handle", seg.addr, i)
		}
	}
	if n != e.nghost {
		t.Fatalf("segment %#x: %d ghost chunks, %d counted", seg.addr, n, e.nghost)
	}
	if e.top != high {
		t.Fatalf("segment %#x: top %d, highest mapped or ghost chunk %d", seg.addr, e.top, high)
	}
	for h, gs := range e.moved {
		if e.span[gs.active] != 1 {
			t.Fatalf("segment %#x: handle %v that moved spans %d chunks", seg.addr, h, e.span[gs.active])
		}
		if len(gs.slots) == 0 {
			t.Fatalf("segment %#x: handle %v listed with no ghost", seg.addr, h)
		}
		if !e.mapped[gs.active] || e.handles[gs.active] != h {
			t.Fatalf("segment %#x: handle %v's active chunk %d is not mapped to it", seg.addr, h, gs.active)
		}
		for _, i := range gs.slots {
			if !e.ghost[i] || e.handles[i] != h {
				t.Fatalf("segment %#x: chunk %d listed as a ghost of %v is not one", seg.addr, i, h)
			}
		}
	}
}

// checkAllocations checks an expandable segment's physical allocations
// (expandable.span): every awake mapped chunk lies in exactly one
// allocation, whose chunks are consecutive, mapped, hold its handle and
// start where span says; no other chunk has a span.
func checkAllocations(t testing.TB, seg *segment) {
	t.Helper()
	e := seg.exp
	if len(e.span) != len(e.mapped) {
		t.Fatalf("segment %#x: span table of %d chunks, mapped table of %d", seg.addr, len(e.span), len(e.mapped))
	}
	asleep := func(i int) bool { return e.sleeping != nil && e.sleeping[i] }
	for i := 0; i < len(e.mapped); {
		if !e.mapped[i] || asleep(i) {
			if e.span[i] != 0 {
				t.Fatalf("segment %#x: chunk %d is not mapped awake but spans %d", seg.addr, i, e.span[i])
			}
			i++
			continue
		}
		n := int(e.span[i])
		if n == 0 || i+n > len(e.mapped) {
			t.Fatalf("segment %#x: mapped chunk %d starts no allocation (span %d)", seg.addr, i, n)
		}
		for k := i + 1; k < i+n; k++ {
			if !e.mapped[k] || asleep(k) || e.span[k] != 0 || e.handles[k] != e.handles[i] {
				t.Fatalf("segment %#x: chunk %d is not part of the allocation at %d of %d chunks", seg.addr, k, i, n)
			}
		}
		i += n
	}
}
