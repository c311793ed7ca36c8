package deferrable

import (
	"cmp"
	"math/rand"
	"slices"
	"testing"

	"github.com/gpumem/gpumem/internal/extent"
)

// TestArenaPlacementUnchanged checks that the arena, whose slabs now keep
// their free extents in an extent.List each, places every block where the
// former single scan over all slabs' extents did: the smallest free extent
// that holds the block, the first slab's and the lowest among equals.
func TestArenaPlacementUnchanged(t *testing.T) {
	type oldExt struct{ off, size uint64 }
	rng := rand.New(rand.NewSource(3))
	for round := 0; round < 100; round++ {
		a := &hostArena{}
		var old [][]oldExt // the former free lists, per slab
		for i := 0; i < 1+rng.Intn(4); i++ {
			size := uint64(1+rng.Intn(64)) * hostAlign
			a.slabs = append(a.slabs, newSlab(0, size, nil))
			old = append(old, []oldExt{{0, size}})
		}
		var blocks []hostBlock
		for step := 0; step < 200; step++ {
			if rng.Intn(3) < 2 || len(blocks) == 0 {
				need := roundUp(uint64(1+rng.Intn(16*hostAlign)), hostAlign)
				// The former choice: one scan, strictly smaller wins.
				bs, bi := -1, -1
				for si, free := range old {
					for i, e := range free {
						if e.size >= need && (bi < 0 || e.size < old[bs][bi].size) {
							bs, bi = si, i
						}
					}
				}
				blk, ok := a.bestFitLocked(need)
				if ok != (bi >= 0) {
					t.Fatalf("round %d step %d: fit %d: %v, the former arena: %v", round, step, need, ok, bi >= 0)
				}
				if !ok {
					continue
				}
				e := old[bs][bi]
				if blk.s != a.slabs[bs] || blk.off != e.off {
					t.Fatalf("round %d step %d: %d bytes at slab %p offset %d; the former arena: slab %d offset %d", round, step, need, blk.s, blk.off, bs, e.off)
				}
				if e.size == need {
					old[bs] = append(old[bs][:bi], old[bs][bi+1:]...)
				} else {
					old[bs][bi] = oldExt{e.off + need, e.size - need}
				}
				blocks = append(blocks, blk)
			} else {
				i := rng.Intn(len(blocks))
				blk := blocks[i]
				blocks = append(blocks[:i], blocks[i+1:]...)
				a.release(blk)
				si := slices.Index(a.slabs, blk.s)
				merged := append(slices.Clone(old[si]), oldExt{blk.off, blk.size})
				slices.SortFunc(merged, func(x, y oldExt) int { return cmp.Compare(x.off, y.off) })
				old[si] = old[si][:0]
				for _, e := range merged {
					if n := len(old[si]); n > 0 && old[si][n-1].off+old[si][n-1].size == e.off {
						old[si][n-1].size += e.size
					} else {
						old[si] = append(old[si], e)
					}
				}
			}
			for si, s := range a.slabs {
				var want []extent.Extent
				for _, e := range old[si] {
					want = append(want, extent.Extent{Off: e.off, Size: e.size})
				}
				if got := s.free.AppendTo(nil); !slices.Equal(got, want) {
					t.Fatalf("round %d step %d: slab %d free %v, the former arena %v", round, step, si, got, want)
				}
			}
		}
	}
}
