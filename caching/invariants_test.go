package caching

import (
	"testing"

	"github.com/gpumem/gpumem"
)

// checkInvariants verifies, under each device's lock, that segments are
// tiled exactly by their blocks, that each block is in exactly one state,
// that no two free neighbours of one stream are left unmerged, that no two
// segments overlap, and that the statistics equal a recount.
func checkInvariants(t testing.TB, a *Allocator) {
	t.Helper()
	for _, d := range a.devs {
		d.mu.Lock()
		func() {
			defer d.mu.Unlock()
			if d.closed {
				return
			}
			var recount gpumem.MemoryStats
			type span struct{ lo, hi uintptr }
			var spans []span
			treeCount := 0
			for seg := range d.segments {
				spans = append(spans, span{uintptr(seg.addr), uintptr(seg.addr) + uintptr(seg.size)})
				st := seg.pool.statType()
				recount.Segment.Add(st, 1)
				if seg.exp != nil {
					checkGhosts(t, seg)
					checkAllocations(t, seg)
					recount.ReservedBytes.Add(st, int64(uint64(seg.exp.nmapped)*seg.exp.chunk))
				} else {
					recount.ReservedBytes.Add(st, int64(seg.size))
				}
				if seg.head.prev != nil {
					t.Fatalf("segment %#x: head has a predecessor", seg.addr)
				}
				addr := seg.addr
				for b := seg.head; b != nil; b = b.next {
					if b.addr != addr {
						t.Fatalf("segment %#x: block at %#x, want %#x (gap or overlap)", seg.addr, b.addr, addr)
					}
					if b.seg != seg || b.size == 0 || b.size%MinBlockSize != 0 {
						t.Fatalf("block %#x: bad segment link or size %d", b.addr, b.size)
					}
					if b.next != nil && b.next.prev != b {
						t.Fatalf("block %#x: broken links", b.addr)
					}
					states := 0
					if b.allocated {
						states++
						recount.Allocation.Add(st, 1)
						recount.AllocatedBytes.Add(st, int64(b.size))
						recount.RequestedBytes.Add(st, int64(b.requested))
						recount.Active.Add(st, 1)
						recount.ActiveBytes.Add(st, int64(b.size))
						if got, _ := d.live.Get(uint64(b.addr)); got != b {
							t.Fatalf("allocated block %#x missing from the address table", b.addr)
						}
					}
					if b.inTree {
						states++
						treeCount++
						if b.counted {
							recount.InactiveSplit.Add(st, 1)
							recount.InactiveSplitBytes.Add(st, int64(b.size))
						}
						if b.counted != (b.isSplit() && seg.exp == nil) {
							t.Fatalf("free block %#x: inactive-split accounting is stale", b.addr)
						}
						if n := b.next; n != nil && n.inTree && n.stream == b.stream {
							t.Fatalf("free neighbours %#x and %#x of one stream not merged", b.addr, n.addr)
						}
					}
					if !b.allocated && !b.inTree {
						states++ // pending
						recount.Active.Add(st, 1)
						recount.ActiveBytes.Add(st, int64(b.size))
						if b.events == 0 && len(d.deferred) == 0 {
							t.Fatalf("pending block %#x awaits no event", b.addr)
						}
					}
					if states != 1 {
						t.Fatalf("block %#x is in %d states", b.addr, states)
					}
					addr = addr.Add(b.size)
				}
				if addr != seg.addr.Add(seg.size) {
					t.Fatalf("segment %#x: blocks cover %d of %d bytes", seg.addr, uint64(addr-seg.addr), seg.size)
				}
			}
			for i := range spans {
				for j := range spans {
					if i != j && spans[i].lo < spans[j].hi && spans[j].lo < spans[i].hi {
						t.Fatalf("segments overlap: %#x and %#x", spans[i].lo, spans[j].lo)
					}
				}
			}
			n := 0
			for _, p := range d.allPools() {
				for _, tr := range p.trees {
					checkTreap(t, tr.root, nil, nil)
					n += tr.n
					tr.each(func(b *block) {
						if !b.inTree || b.pool != p {
							t.Fatalf("tree holds block %#x of another pool or out of tree", b.addr)
						}
					})
				}
			}
			if n != treeCount {
				t.Fatalf("trees hold %d blocks, segments %d free blocks", n, treeCount)
			}
			s := d.stats
			for _, c := range []struct {
				name      string
				got, want gpumem.StatArray
			}{
				{"allocation", s.Allocation, recount.Allocation},
				{"segment", s.Segment, recount.Segment},
				{"active", s.Active, recount.Active},
				{"inactive_split", s.InactiveSplit, recount.InactiveSplit},
				{"allocated_bytes", s.AllocatedBytes, recount.AllocatedBytes},
				{"reserved_bytes", s.ReservedBytes, recount.ReservedBytes},
				{"active_bytes", s.ActiveBytes, recount.ActiveBytes},
				{"inactive_split_bytes", s.InactiveSplitBytes, recount.InactiveSplitBytes},
				{"requested_bytes", s.RequestedBytes, recount.RequestedBytes},
			} {
				for i := range c.got {
					if c.got[i].Current != c.want[i].Current {
						t.Fatalf("%s[%d] current = %d, recount %d", c.name, i, c.got[i].Current, c.want[i].Current)
					}
				}
			}
		}()
	}
}

func (d *device) allPools() []*pool {
	ps := []*pool{d.small, d.large}
	for _, pp := range d.private {
		ps = append(ps, pp.small, pp.large)
	}
	return ps
}

func checkTreap(t testing.TB, n, lo, hi *block) {
	if n == nil {
		return
	}
	if lo != nil && !keyLess(lo, n.size, uintptr(n.addr)) {
		t.Fatalf("treap BST order broken at %#x size %d (lo %#x size %d)", n.addr, n.size, lo.addr, lo.size)
	}
	if hi != nil && !keyLess(n, hi.size, uintptr(hi.addr)) {
		t.Fatalf("treap BST order broken at %#x size %d (hi %#x size %d)", n.addr, n.size, hi.addr, hi.size)
	}
	for _, c := range []*block{n.left, n.right} {
		if c != nil && c.prio > n.prio {
			t.Fatalf("treap heap order broken at %#x", n.addr)
		}
	}
	if !n.inTree || n.allocated {
		t.Fatalf("tree node %#x state inTree=%v allocated=%v", n.addr, n.inTree, n.allocated)
	}
	checkTreap(t, n.left, lo, n)
	checkTreap(t, n.right, n, hi)
}
