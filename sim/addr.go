package sim

import "math/bits"

// This file holds the two address structures of the simulator:
//
//   - rangeSet: free address ranges, found by size in O(1) through
//     segregated size classes (a two-level bitmap as in TLSF) and coalesced
//     with their neighbours in O(1) through maps keyed by start and end.
//   - treap: live objects ordered by start address, for the "which
//     allocation contains this address" question that copies, memsets,
//     kernels and the use-after-free detector ask.

// rangeSet is a set of free address ranges. Ranges never merge across a
// boundary (the start of a pool chunk), so a pool can release whole chunks.
type rangeSet struct {
	byStart  map[uint64]*frange
	byEnd    map[uint64]*frange
	heads    [nClasses]*frange
	bitmap   [nClasses / 64]uint64
	boundary map[uint64]struct{} // addresses where ranges must not merge; nil: none
	free     uint64              // total free bytes
	spare    *frange             // recycled nodes
}

type frange struct {
	start, size uint64
	cls         int
	prev, next  *frange
}

const nClasses = 256 // 64 powers of two, 4 subdivisions each

// classOf returns the class whose ranges have sizes in [lo, hi) with size in it.
func classOf(size uint64) int {
	if size < 4 {
		return int(size)
	}
	top := bits.Len64(size) - 1
	sub := int(size>>(uint(top)-2)) & 3
	return top*4 + sub
}

// classAbove returns the lowest class all of whose ranges are >= size.
func classAbove(size uint64) int {
	c := classOf(size)
	if size >= 4 {
		top := bits.Len64(size) - 1
		if size&(1<<(uint(top)-2)-1) != 0 {
			c++
		}
	}
	return c
}

func newRangeSet() *rangeSet {
	return &rangeSet{byStart: map[uint64]*frange{}, byEnd: map[uint64]*frange{}}
}

// listAdd puts f on its size class's list.
func (r *rangeSet) listAdd(f *frange) {
	c := classOf(f.size)
	f.cls = c
	f.prev = nil
	f.next = r.heads[c]
	if f.next != nil {
		f.next.prev = f
	}
	r.heads[c] = f
	r.bitmap[c/64] |= 1 << uint(c%64)
}

// listRemove takes f off its size class's list.
func (r *rangeSet) listRemove(f *frange) {
	if f.prev != nil {
		f.prev.next = f.next
	} else {
		r.heads[f.cls] = f.next
		if f.next == nil {
			r.bitmap[f.cls/64] &^= 1 << uint(f.cls%64)
		}
	}
	if f.next != nil {
		f.next.prev = f.prev
	}
	f.prev, f.next = nil, nil
}

// reclass moves f to the right list after its size changed.
func (r *rangeSet) reclass(f *frange) {
	if classOf(f.size) != f.cls {
		r.listRemove(f)
		r.listAdd(f)
	}
}

func (r *rangeSet) link(f *frange) {
	r.listAdd(f)
	r.byStart[f.start] = f
	r.byEnd[f.start+f.size] = f
	r.free += f.size
}

func (r *rangeSet) unlink(f *frange) {
	r.listRemove(f)
	delete(r.byStart, f.start)
	delete(r.byEnd, f.start+f.size)
	r.free -= f.size
}

func (r *rangeSet) node(start, size uint64) *frange {
	f := r.spare
	if f != nil {
		r.spare = f.next
		f.next = nil
	} else {
		f = &frange{}
	}
	f.start, f.size = start, size
	return f
}

func (r *rangeSet) recycle(f *frange) {
	f.prev = nil
	f.next = r.spare
	r.spare = f
}

// firstClass returns the first non-empty class >= c, or -1.
func (r *rangeSet) firstClass(c int) int {
	for w := c / 64; w < len(r.bitmap); w++ {
		m := r.bitmap[w]
		if w == c/64 {
			m &= ^uint64(0) << uint(c%64)
		}
		if m != 0 {
			return w*64 + bits.TrailingZeros64(m)
		}
	}
	return -1
}

// alloc takes size bytes and returns their start. It looks for a good fit in
// the size's own class first, then takes the head of the first class whose
// ranges are all large enough.
func (r *rangeSet) alloc(size uint64) (uint64, bool) {
	if size == 0 {
		return 0, false
	}
	var f *frange
	c := classOf(size)
	n := 0
	for g := r.heads[c]; g != nil && n < 8; g = g.next {
		if g.size >= size && (f == nil || g.size < f.size) {
			f = g
		}
		n++
	}
	if f == nil {
		ca := classAbove(size)
		if ca < nClasses {
			if fc := r.firstClass(ca); fc >= 0 {
				f = r.heads[fc]
			}
		}
	}
	if f == nil {
		return 0, false
	}
	start := f.start
	if f.size > size {
		// Carve from the front: the end (and its map entry) stays.
		delete(r.byStart, f.start)
		f.start += size
		f.size -= size
		r.byStart[f.start] = f
		r.free -= size
		r.reclass(f)
	} else {
		r.unlink(f)
		r.recycle(f)
	}
	return start, true
}

// allocAt takes [start, start+size) which must lie inside one free range.
func (r *rangeSet) allocAt(start, size uint64) bool {
	f := r.containing(start)
	if f == nil || start+size > f.start+f.size {
		return false
	}
	r.unlink(f)
	fs, fe := f.start, f.start+f.size
	r.recycle(f)
	if start > fs {
		r.link(r.node(fs, start-fs))
	}
	if fe > start+size {
		r.link(r.node(start+size, fe-start-size))
	}
	return true
}

// containing finds the free range holding addr by walking the classes; it is
// used only on the rare paths (aligned reservations), so a linear walk is fine.
func (r *rangeSet) containing(addr uint64) *frange {
	for _, h := range r.heads {
		for f := h; f != nil; f = f.next {
			if addr >= f.start && addr < f.start+f.size {
				return f
			}
		}
	}
	return nil
}

// release returns [start, start+size) to the set, merging with free neighbours
// unless a boundary separates them.
func (r *rangeSet) release(start, size uint64) {
	if size == 0 {
		return
	}
	end := start + size
	l, lok := r.byEnd[start]
	if lok && r.isBoundary(start) {
		lok = false
	}
	rt, rok := r.byStart[end]
	if rok && r.isBoundary(end) {
		rok = false
	}
	switch {
	case lok && rok:
		// Bridge: the left range absorbs this one and the right one.
		delete(r.byEnd, start)
		r.unlink(rt)
		l.size += size + rt.size
		r.byEnd[l.start+l.size] = l
		r.free += size + rt.size
		r.recycle(rt)
		r.reclass(l)
	case lok:
		delete(r.byEnd, start)
		l.size += size
		r.byEnd[end] = l
		r.free += size
		r.reclass(l)
	case rok:
		delete(r.byStart, end)
		rt.start = start
		rt.size += size
		r.byStart[start] = rt
		r.free += size
		r.reclass(rt)
	default:
		r.link(r.node(start, size))
	}
}

func (r *rangeSet) isBoundary(a uint64) bool {
	if r.boundary == nil {
		return false
	}
	_, ok := r.boundary[a]
	return ok
}

// treap is a randomized balanced tree of objects keyed by start address.
// It is intrusive: the links live in the objects (an object is in at most
// one treap), so inserting allocates nothing.
type treap struct {
	root *object
	n    int
	rnd  uint64
}

// tlinks are an object's treap links.
type tlinks struct {
	tl, tr *object
	tprio  uint64
}

func (t *treap) nextPrio() uint64 {
	// xorshift64*: deterministic, cheap, good enough for balancing.
	if t.rnd == 0 {
		t.rnd = 0x9E3779B97F4A7C15
	}
	t.rnd ^= t.rnd >> 12
	t.rnd ^= t.rnd << 25
	t.rnd ^= t.rnd >> 27
	return t.rnd * 2685821657736338717
}

// tsplit splits n into keys < key and keys >= key.
func tsplit(n *object, key uint64) (l, r *object) {
	if n == nil {
		return nil, nil
	}
	if n.start < key {
		n.tr, r = tsplit(n.tr, key)
		return n, r
	}
	l, n.tl = tsplit(n.tl, key)
	return l, n
}

func tmerge(a, b *object) *object {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	if a.tprio > b.tprio {
		a.tr = tmerge(a.tr, b)
		return a
	}
	b.tl = tmerge(a, b.tl)
	return b
}

func (t *treap) insert(key uint64, o *object) {
	_ = key // the key is o.start
	o.tl, o.tr, o.tprio = nil, nil, t.nextPrio()
	link := &t.root
	for n := *link; n != nil && n.tprio >= o.tprio; n = *link {
		if o.start < n.start {
			link = &n.tl
		} else {
			link = &n.tr
		}
	}
	o.tl, o.tr = tsplit(*link, o.start)
	*link = o
	t.n++
}

// remove removes o (whose key is key) if it is in the treap.
func (t *treap) remove(key uint64, o *object) {
	link := &t.root
	for n := *link; n != nil; n = *link {
		switch {
		case n == o:
			*link = tmerge(n.tl, n.tr)
			o.tl, o.tr = nil, nil
			t.n--
			return
		case key < n.start:
			link = &n.tl
		default:
			link = &n.tr
		}
	}
}

// floor returns the object with the greatest key <= key.
func (t *treap) floor(key uint64) *object {
	var best *object
	for n := t.root; n != nil; {
		if n.start <= key {
			best = n
			n = n.tr
		} else {
			n = n.tl
		}
	}
	return best
}

// ceil returns the object with the smallest key >= key.
func (t *treap) ceil(key uint64) *object {
	var best *object
	for n := t.root; n != nil; {
		if n.start >= key {
			best = n
			n = n.tl
		} else {
			n = n.tr
		}
	}
	return best
}

// each visits objects in address order until f returns false.
func (t *treap) each(f func(*object) bool) {
	var walk func(n *object) bool
	walk = func(n *object) bool {
		if n == nil {
			return true
		}
		return walk(n.tl) && f(n) && walk(n.tr)
	}
	walk(t.root)
}
