package ptrmap

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

type val struct {
	size uint64
	tag  *int
}

// check compares m with the reference map and verifies the table's
// invariant: every key is reachable from its home without crossing an
// empty slot.
func check(t *testing.T, m *Map[val], ref map[uint64]val) {
	t.Helper()
	if m.Len() != len(ref) {
		t.Fatalf("Len %d, want %d", m.Len(), len(ref))
	}
	for k, want := range ref {
		got, ok := m.Get(k)
		if !ok || got != want {
			t.Fatalf("Get(%#x) = %v, %v; want %v", k, got, ok, want)
		}
	}
	n := 0
	mask := len(m.slots) - 1
	for i, s := range m.slots {
		if s.key == 0 {
			continue
		}
		n++
		for j := m.home(s.key); j != i; j = (j + 1) & mask {
			if m.slots[j].key == 0 {
				t.Fatalf("key %#x at %d is cut off from its home %d by an empty slot at %d", s.key, i, m.home(s.key), j)
			}
		}
	}
	if n != len(ref) {
		t.Fatalf("%d occupied slots, want %d", n, len(ref))
	}
	if len(m.slots) > 0 && m.n*2 > len(m.slots) {
		t.Fatalf("load %d/%d over one half", m.n, len(m.slots))
	}
}

func TestAgainstGoMap(t *testing.T) {
	for _, align := range []uint64{1, 512, 2 << 20, 1 << 32} {
		rng := rand.New(rand.NewPCG(1, align))
		var m Map[val]
		ref := map[uint64]val{}
		var keys []uint64
		x := new(int)
		for step := 0; step < 20000; step++ {
			switch r := rng.IntN(10); {
			case r < 5 || len(keys) == 0: // insert a new or an existing key
				k := (rng.Uint64N(4096) + 1) * align
				v := val{size: rng.Uint64(), tag: x}
				_, had := ref[k]
				if got := m.Insert(k, v); got == had {
					t.Fatalf("Insert(%#x) = %v with the key present: %v", k, got, had)
				}
				if !had {
					ref[k] = v
					keys = append(keys, k)
				}
			case r < 8: // delete a present key
				i := rng.IntN(len(keys))
				k := keys[i]
				keys[i] = keys[len(keys)-1]
				keys = keys[:len(keys)-1]
				got, ok := m.Delete(k)
				if !ok || got != ref[k] {
					t.Fatalf("Delete(%#x) = %v, %v; want %v", k, got, ok, ref[k])
				}
				delete(ref, k)
			case r < 9: // delete or look up an absent key
				k := (rng.Uint64N(4096) + 5000) * align
				if _, ok := m.Delete(k); ok {
					t.Fatalf("Delete of absent %#x reported present", k)
				}
				if m.Ref(k) != nil {
					t.Fatalf("Ref of absent %#x is not nil", k)
				}
			default: // change a value in place, or with Set
				k := keys[rng.IntN(len(keys))]
				v := ref[k]
				v.size++
				if rng.IntN(2) == 0 {
					*m.Ref(k) = v
				} else if !m.Set(k, v) {
					t.Fatalf("Set(%#x) refused", k)
				}
				ref[k] = v
			}
			if step%997 == 0 {
				check(t, &m, ref)
			}
		}
		check(t, &m, ref)
		// Drain: the table shrinks back.
		for _, k := range keys {
			if _, ok := m.Delete(k); !ok {
				t.Fatalf("Delete(%#x) while draining: absent", k)
			}
			delete(ref, k)
		}
		check(t, &m, ref)
		if len(m.slots) > 4*minSlots {
			t.Errorf("empty map keeps %d slots", len(m.slots))
		}
	}
}

func TestZeroKey(t *testing.T) {
	var m Map[int]
	if m.Insert(0, 1) || m.Set(0, 1) {
		t.Fatal("the zero key was stored")
	}
	if _, ok := m.Get(0); ok {
		t.Fatal("Get(0) found a value")
	}
	if _, ok := m.Delete(0); ok || m.Ref(0) != nil || m.Len() != 0 {
		t.Fatal("the zero key is present")
	}
	// The zero Map answers lookups without a table.
	if _, ok := m.Get(7); ok {
		t.Fatal("empty map found 7")
	}
	if _, ok := m.Delete(7); ok {
		t.Fatal("empty map deleted 7")
	}
}

// Deleting from the middle of a run that wraps past the end of the array
// moves the wrapped entries back correctly.
func TestWrappingRun(t *testing.T) {
	var m Map[int]
	m.resize(minSlots)
	last := uint64(len(m.slots) - 1)
	// Find keys whose home is the last slot.
	var ks []uint64
	for k := uint64(1); len(ks) < 5; k++ {
		if uint64(m.home(k)) == last {
			ks = append(ks, k)
		}
	}
	for i, k := range ks {
		if !m.Insert(k, i) {
			t.Fatalf("Insert(%d)", k)
		}
	}
	ref := map[uint64]int{}
	for i, k := range ks {
		ref[k] = i
	}
	for _, k := range []uint64{ks[0], ks[2]} {
		if v, ok := m.Delete(k); !ok || v != ref[k] {
			t.Fatalf("Delete(%d) = %d, %v", k, v, ok)
		}
		delete(ref, k)
		for k2, want := range ref {
			if got, ok := m.Get(k2); !ok || got != want {
				t.Fatalf("after deleting %d: Get(%d) = %d, %v; want %d", k, k2, got, ok, want)
			}
		}
	}
}

func TestRange(t *testing.T) {
	var m Map[int]
	want := []uint64{}
	for k := uint64(1); k <= 100; k++ {
		m.Insert(k<<21, int(k))
		want = append(want, k<<21)
	}
	var keys []uint64
	m.Range(func(k uint64, _ int) bool { keys = append(keys, k); return true })
	slices.Sort(keys)
	if !slices.Equal(keys, want) {
		t.Fatalf("keys = %v", keys)
	}
	sum, visits := 0, 0
	m.Range(func(k uint64, v int) bool {
		if k != uint64(v)<<21 {
			t.Fatalf("Range gave %#x -> %d", k, v)
		}
		sum += v
		visits++
		return true
	})
	if sum != 5050 || visits != 100 {
		t.Fatalf("Range visited %d entries summing to %d", visits, sum)
	}
	visits = 0
	m.Range(func(uint64, int) bool { visits++; return visits < 3 })
	if visits != 3 {
		t.Fatalf("Range went on after false: %d visits", visits)
	}
}

// The churn of an allocator: a steady population of live keys, one
// removed and one added per iteration.
func benchChurn(b *testing.B, live int, ins func(uint64), del func(uint64)) {
	keys := make([]uint64, live)
	next := uint64(1 << 40)
	for i := range keys {
		next += 2 << 20
		keys[i] = next
		ins(next)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % live
		del(keys[j])
		next += 2 << 20
		keys[j] = next
		ins(next)
	}
}

func BenchmarkChurn(b *testing.B) {
	for _, live := range []int{512, 65536} {
		b.Run("ptrmap/live="+strconv.Itoa(live), func(b *testing.B) {
			var m Map[val]
			benchChurn(b, live, func(k uint64) { m.Insert(k, val{size: k}) }, func(k uint64) { m.Delete(k) })
		})
		b.Run("gomap/live="+strconv.Itoa(live), func(b *testing.B) {
			m := map[uint64]val{}
			benchChurn(b, live, func(k uint64) {
				if _, ok := m[k]; !ok {
					m[k] = val{size: k}
				}
			}, func(k uint64) {
				//lint:ignore S1033 the lookup is what is measured: a Go map needs it to know whether the key was there
				if _, ok := m[k]; ok {
					delete(m, k)
				}
			})
		})
	}
}

// TestBlockAddresses drives the map as the caching allocator does: keys
// are block addresses (multiples of 512 in a few hundred KiB), values
// pointers, inserted when a block is handed out and deleted when it
// returns, against a Go map.
func TestBlockAddresses(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 3))
	var m Map[*val]
	ref := map[uint64]*val{}
	for i := 0; i < 20000; i++ {
		k := uint64(rng.IntN(4096)+1) << 9
		if rng.IntN(2) == 0 {
			if _, ok := ref[k]; ok {
				continue
			}
			v := &val{size: k}
			if !m.Insert(k, v) {
				t.Fatalf("Insert(%#x) of an absent key failed", k)
			}
			ref[k] = v
		} else {
			got, ok := m.Delete(k)
			if want, had := ref[k]; ok != had || got != want {
				t.Fatalf("Delete(%#x) = %v, %v", k, got, ok)
			}
			delete(ref, k)
		}
		if m.Len() != len(ref) {
			t.Fatalf("Len %d, want %d", m.Len(), len(ref))
		}
	}
	for k := uint64(512); k < 4097<<9; k += 512 {
		got, _ := m.Get(k)
		if got != ref[k] {
			t.Fatalf("Get(%#x) = %v, want %v", k, got, ref[k])
		}
	}
}
