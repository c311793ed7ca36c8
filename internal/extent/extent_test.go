package extent

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"testing"
)

// op is one operation of a table test: take Size bytes (want At, or !OK),
// put [Off, Off+Size), or trim the tail of an address space ending at End
// (want the new end At).
type op struct {
	kind      byte // 't' take, 'p' put, 'e' trim tail
	off, size uint64
	at        uint64
	ok        bool
}

func take(size, at uint64) op    { return op{kind: 't', size: size, at: at, ok: true} }
func noFit(size uint64) op       { return op{kind: 't', size: size} }
func put(off, size uint64) op    { return op{kind: 'p', off: off, size: size} }
func trim(end, newEnd uint64) op { return op{kind: 'e', off: end, at: newEnd} }

func ext(pairs ...uint64) []Extent {
	var out []Extent
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, Extent{pairs[i], pairs[i+1]})
	}
	return out
}

func listOf(p Policy, free []Extent) *List {
	l := &List{Policy: p}
	for _, e := range free {
		l.free = append(l.free, e)
		l.bytes += e.Size
	}
	return l
}

// check verifies the invariants of the package documentation.
func check(l *List) error {
	var sum uint64
	for i, e := range l.free {
		if e.Size == 0 {
			return fmt.Errorf("extent %d %v is empty", i, e)
		}
		if i > 0 && l.free[i-1].End() >= e.Off {
			return fmt.Errorf("extents %d %v and %d %v overlap or touch", i-1, l.free[i-1], i, e)
		}
		sum += e.Size
	}
	if sum != l.bytes {
		return fmt.Errorf("free bytes %d, extents add up to %d", l.bytes, sum)
	}
	return nil
}

func TestList(t *testing.T) {
	tests := []struct {
		name   string
		policy Policy
		before []Extent
		ops    []op
		after  []Extent
	}{
		{"empty list fits nothing", FirstFit, nil, []op{noFit(1)}, nil},
		{"zero size fits nothing", BestFit, ext(0, 8), []op{noFit(0)}, ext(0, 8)},
		{"take carves the low end", FirstFit, ext(0, 10), []op{take(4, 0), take(4, 4)}, ext(8, 2)},
		{"exact take removes the extent", FirstFit, ext(0, 4, 8, 4), []op{take(4, 0)}, ext(8, 4)},
		{"first fit takes the lowest", FirstFit, ext(0, 8, 10, 4, 20, 6), []op{take(4, 0)}, ext(4, 4, 10, 4, 20, 6)},
		{"best fit takes the smallest", BestFit, ext(0, 8, 10, 4, 20, 6), []op{take(4, 10), take(5, 20)}, ext(0, 8, 25, 1)},
		{"best fit: the lowest of equals", BestFit, ext(0, 8, 10, 6, 20, 6), []op{take(5, 10)}, ext(0, 8, 15, 1, 20, 6)},
		{"too big fits nowhere", BestFit, ext(0, 8, 10, 6), []op{noFit(9)}, ext(0, 8, 10, 6)},
		{"put alone", FirstFit, ext(0, 4, 20, 4), []op{put(10, 4)}, ext(0, 4, 10, 4, 20, 4)},
		{"put into empty", FirstFit, nil, []op{put(10, 4)}, ext(10, 4)},
		{"put merges below", FirstFit, ext(0, 4, 20, 4), []op{put(4, 4)}, ext(0, 8, 20, 4)},
		{"put merges above", FirstFit, ext(0, 4, 20, 4), []op{put(16, 4)}, ext(0, 4, 16, 8)},
		{"put merges both", FirstFit, ext(0, 4, 8, 4, 20, 4), []op{put(4, 4)}, ext(0, 12, 20, 4)},
		{"put first", FirstFit, ext(10, 4), []op{put(0, 4)}, ext(0, 4, 10, 4)},
		{"put last", FirstFit, ext(0, 4), []op{put(10, 4)}, ext(0, 4, 10, 4)},
		{"put zero does nothing", FirstFit, ext(0, 4), []op{put(4, 0)}, ext(0, 4)},
		{"take then put restores", BestFit, ext(0, 16), []op{take(4, 0), take(4, 4), put(0, 4), put(4, 4)}, ext(0, 16)},
		{"trim the free tail", FirstFit, ext(0, 4, 10, 6), []op{trim(16, 10)}, ext(0, 4)},
		{"trim keeps a tail in use", FirstFit, ext(0, 4, 10, 6), []op{trim(20, 20)}, ext(0, 4, 10, 6)},
		{"trim of nothing", FirstFit, nil, []op{trim(16, 16)}, nil},
		{"free the last extent then trim", FirstFit, ext(0, 4), []op{put(8, 8), trim(16, 8)}, ext(0, 4)},
		{"free back to back then trim all", FirstFit, ext(0, 4), []op{put(4, 4), trim(8, 0)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := listOf(tt.policy, tt.before)
			for i, o := range tt.ops {
				switch o.kind {
				case 't':
					if at, ok := l.Fit(o.size); ok != o.ok || ok && at.Off != o.at {
						t.Fatalf("op %d: Fit(%d) = %v, %v; want offset %d, %v", i, o.size, at, ok, o.at, o.ok)
					}
					if at, ok := l.Take(o.size); ok != o.ok || at != o.at {
						t.Fatalf("op %d: Take(%d) = %d, %v; want %d, %v", i, o.size, at, ok, o.at, o.ok)
					}
				case 'p':
					l.Put(o.off, o.size)
				case 'e':
					if end := l.TrimTail(o.off); end != o.at {
						t.Fatalf("op %d: TrimTail(%d) = %d, want %d", i, o.off, end, o.at)
					}
				}
				if err := check(l); err != nil {
					t.Fatalf("op %d: %v", i, err)
				}
			}
			if got := l.AppendTo(nil); !slices.Equal(got, tt.after) {
				t.Fatalf("after: %v, want %v", got, tt.after)
			}
		})
	}
}

func TestPutOverlapPanics(t *testing.T) {
	for _, tt := range []struct {
		free      []Extent
		off, size uint64
	}{
		{ext(0, 8), 0, 8},        // double free
		{ext(0, 8), 4, 8},        // overlaps the end of the extent below
		{ext(8, 8), 4, 8},        // overlaps the start of the extent above
		{ext(8, 8), 10, 2},       // inside
		{ext(8, 8), 0, 32},       // around
		{ext(0, 4, 8, 4), 2, 10}, // across two
		{nil, ^uint64(0) - 1, 4}, // past the end of the address space
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Put(%d, %d) on %v did not panic", tt.off, tt.size, tt.free)
				}
			}()
			listOf(FirstFit, tt.free).Put(tt.off, tt.size)
		}()
	}
}

// model is the address space [0, n) as one flag per byte: free or not.
type model []bool

// extents returns the maximal runs of free bytes: what a fully coalesced
// free list must hold.
func (m model) extents() []Extent {
	var out []Extent
	for i := 0; i < len(m); {
		if !m[i] {
			i++
			continue
		}
		j := i
		for j < len(m) && m[j] {
			j++
		}
		out = append(out, Extent{uint64(i), uint64(j - i)})
		i = j
	}
	return out
}

// run drives l with the operations encoded in data over an address space of
// size bytes that starts free, checking after each one that the list is
// exactly the free bytes of the model (no overlap, no loss, full coalescing)
// and that Take chose what its policy says.
func run(t *testing.T, l *List, size int, data []byte) {
	t.Helper()
	m := make(model, size)
	for i := range m {
		m[i] = true
	}
	l.Put(0, uint64(size))
	var used []Extent
	for len(data) >= 2 {
		a, b := data[0], data[1]
		data = data[2:]
		if a%2 == 0 || len(used) == 0 {
			n := uint64(b)%uint64(size/4) + 1
			want, wantOK := expectFit(l.Policy, m.extents(), n)
			off, ok := l.Take(n)
			if ok != wantOK || ok && off != want {
				t.Fatalf("%v: Take(%d) = %d, %v; want %d, %v (free %v)", l.Policy, n, off, ok, want, wantOK, m.extents())
			}
			if ok {
				for i := off; i < off+n; i++ {
					if !m[i] {
						t.Fatalf("Take(%d) = %d overlaps byte %d in use", n, off, i)
					}
					m[i] = false
				}
				used = append(used, Extent{off, n})
			}
		} else {
			i := int(b) % len(used)
			e := used[i]
			used = append(used[:i], used[i+1:]...)
			l.Put(e.Off, e.Size)
			for j := e.Off; j < e.End(); j++ {
				m[j] = true
			}
		}
		if err := check(l); err != nil {
			t.Fatal(err)
		}
		if got, want := l.AppendTo(nil), m.extents(); !slices.Equal(got, want) {
			t.Fatalf("free list %v, free bytes %v", got, want)
		}
	}
	for _, e := range used {
		l.Put(e.Off, e.Size)
	}
	if got := l.AppendTo(nil); !slices.Equal(got, []Extent{{0, uint64(size)}}) {
		t.Fatalf("after every put: %v, want one extent of the whole space", got)
	}
}

// expectFit is the policy's choice, computed from scratch.
func expectFit(p Policy, free []Extent, n uint64) (uint64, bool) {
	var best *Extent
	for i := range free {
		e := &free[i]
		if e.Size < n {
			continue
		}
		if p == FirstFit {
			return e.Off, true
		}
		if best == nil || e.Size < best.Size {
			best = e
		}
	}
	if best == nil {
		return 0, false
	}
	return best.Off, true
}

func TestRandomized(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, p := range []Policy{FirstFit, BestFit} {
		for round := 0; round < 200; round++ {
			data := make([]byte, 400)
			rng.Read(data)
			run(t, &List{Policy: p}, 64+rng.Intn(256), data)
		}
	}
}

func FuzzList(f *testing.F) {
	f.Add(false, []byte{0, 10, 0, 20, 1, 0, 0, 5, 1, 1})
	f.Add(true, []byte{0, 3, 0, 3, 0, 3, 1, 1, 0, 1, 1, 0})
	f.Fuzz(func(t *testing.T, best bool, data []byte) {
		p := FirstFit
		if best {
			p = BestFit
		}
		run(t, &List{Policy: p}, 128, data)
	})
}

// The host arena and the disk store each kept a free list of their own
// before this package; these are those lists, as they were, and the test
// checks that a List of the matching policy makes the same choices.

type oldExtent struct{ off, size uint64 }

// oldBestFit is the arena's carve: the smallest extent that holds need.
func oldBestFit(free []oldExtent, need uint64) ([]oldExtent, uint64, bool) {
	bi := -1
	for i, e := range free {
		if e.size >= need && (bi < 0 || e.size < free[bi].size) {
			bi = i
		}
	}
	if bi < 0 {
		return free, 0, false
	}
	e := free[bi]
	if e.size == need {
		free = append(free[:bi], free[bi+1:]...)
	} else {
		free[bi] = oldExtent{e.off + need, e.size - need}
	}
	return free, e.off, true
}

// oldFirstFit is the disk store's carve: the first extent that holds size.
func oldFirstFit(free []oldExtent, size uint64) ([]oldExtent, uint64, bool) {
	for i, e := range free {
		if e.size >= size {
			if e.size == size {
				free = append(free[:i], free[i+1:]...)
			} else {
				free[i] = oldExtent{e.off + size, e.size - size}
			}
			return free, e.off, true
		}
	}
	return free, 0, false
}

// oldRelease is the release both shared (sorted insert, then coalesce).
func oldRelease(free []oldExtent, x oldExtent) []oldExtent {
	i := 0
	for i < len(free) && free[i].off <= x.off {
		i++
	}
	free = append(free, oldExtent{})
	copy(free[i+1:], free[i:])
	free[i] = x
	if i+1 < len(free) && free[i].off+free[i].size == free[i+1].off {
		free[i].size += free[i+1].size
		free = append(free[:i+1], free[i+2:]...)
	}
	if i > 0 && free[i-1].off+free[i-1].size == free[i].off {
		free[i-1].size += free[i].size
		free = append(free[:i], free[i+1:]...)
	}
	return free
}

func TestSameAsFormerFreeLists(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for _, p := range []Policy{BestFit, FirstFit} {
		carve := oldBestFit
		if p == FirstFit {
			carve = oldFirstFit
		}
		for round := 0; round < 300; round++ {
			// An address space that grows at its end, as the disk file did
			// (the arena's slabs are the case of a fixed end: no growth, no
			// trim).
			grows := rng.Intn(2) == 0
			var oldEnd, end uint64 = 1 << 12, 1 << 12
			old := []oldExtent{{0, oldEnd}}
			l := &List{Policy: p}
			l.Put(0, end)
			var used []Extent
			for step := 0; step < 300; step++ {
				if rng.Intn(5) < 3 || len(used) == 0 {
					n := uint64(rng.Intn(300) + 1)
					var wantOff uint64
					var ok bool
					old, wantOff, ok = carve(old, n)
					off, gotOK := l.Take(n)
					if ok != gotOK || off != wantOff {
						t.Fatalf("%v round %d step %d: Take(%d) = %d, %v; the former list: %d, %v", p, round, step, n, off, gotOK, wantOff, ok)
					}
					if !ok && grows {
						off, ok = end, true
						end += n
						oldEnd += n
					}
					if ok {
						used = append(used, Extent{off, n})
					}
				} else {
					i := rng.Intn(len(used))
					e := used[i]
					used = append(used[:i], used[i+1:]...)
					old = oldRelease(old, oldExtent{e.Off, e.Size})
					l.Put(e.Off, e.Size)
					if grows {
						if n := len(old); n > 0 && old[n-1].off+old[n-1].size == oldEnd {
							oldEnd = old[n-1].off
							old = old[:n-1]
						}
						if end = l.TrimTail(end); end != oldEnd {
							t.Fatalf("%v: TrimTail gave end %d, the former list %d", p, end, oldEnd)
						}
					}
				}
				var conv []Extent
				for _, e := range old {
					conv = append(conv, Extent{e.off, e.size})
				}
				if got := l.AppendTo(nil); !reflect.DeepEqual(got, conv) {
					t.Fatalf("%v round %d step %d: list %v, the former list %v", p, round, step, got, conv)
				}
			}
		}
	}
}
