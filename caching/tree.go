package caching

// tree is an ordered set of free blocks keyed by (size, addr): a treap whose
// nodes are the blocks themselves, so inserting and removing allocate
// nothing. An inserted block's priority is a hash of its key, which keeps
// the shape random without a generator; a block put in another's place
// (replace) inherits that block's priority. Every operation is O(log n)
// expected.
type tree struct {
	root *block
	n    int
}

func prioOf(b *block) uint32 {
	h := (uint64(b.addr) ^ b.size*0x9E3779B97F4A7C15) * 0xBF58476D1CE4E5B9
	return uint32(h >> 32)
}

// keyLess reports whether block a orders before the key (size, addr).
func keyLess(a *block, size uint64, addr uintptr) bool {
	if a.size != size {
		return a.size < size
	}
	return uintptr(a.addr) < addr
}

func (t *tree) insert(b *block) {
	b.prio = prioOf(b)
	b.inTree = true
	t.n++
	// Descend to where b's priority places it, then split that subtree
	// around b's key into b's children. Iterative: this is the hot path.
	link := &t.root
	for n := *link; n != nil && n.prio >= b.prio; n = *link {
		if keyLess(b, n.size, uintptr(n.addr)) {
			link = &n.left
		} else {
			link = &n.right
		}
	}
	b.left, b.right = treeSplit(*link, b.size, uintptr(b.addr))
	*link = b
}

// treeSplit splits t into the nodes ordering before (size, addr) and the rest.
func treeSplit(t *block, size uint64, addr uintptr) (l, r *block) {
	ll, rl := &l, &r // where the next node of each side hangs
	for t != nil {
		if keyLess(t, size, addr) {
			*ll = t
			ll = &t.right
			t = t.right
		} else {
			*rl = t
			rl = &t.left
			t = t.left
		}
	}
	*ll, *rl = nil, nil
	return l, r
}

// treeMerge joins l and r, every key of l ordering before every key of r.
func treeMerge(l, r *block) *block {
	var root *block
	link := &root
	for l != nil && r != nil {
		if l.prio > r.prio {
			*link = l
			link = &l.right
			l = l.right
		} else {
			*link = r
			link = &r.left
			r = r.left
		}
	}
	if l != nil {
		*link = l
	} else {
		*link = r
	}
	return root
}

func (t *tree) remove(b *block) {
	link := &t.root
	for n := *link; n != b; n = *link {
		if n == nil {
			// Not reachable while the tree's invariants hold.
			panic("caching: internal error: block missing from its free tree")
		}
		if keyLess(b, n.size, uintptr(n.addr)) {
			link = &n.left
		} else {
			link = &n.right
		}
	}
	t.removeAt(link, b)
}

// removeAt removes b, at which link points.
func (t *tree) removeAt(link **block, b *block) {
	*link = treeMerge(b.left, b.right)
	b.left, b.right = nil, nil
	b.inTree = false
	t.n--
}

// lowerBound returns the first block with size >= size (lowest address among
// equal sizes), or nil.
func (t *tree) lowerBound(size uint64) *block {
	var best *block
	for n := t.root; n != nil; {
		if n.size >= size {
			best = n
			n = n.left
		} else {
			n = n.right
		}
	}
	return best
}

// lowerBoundAt is lowerBound that also returns the link that points at the
// block found and the block's predecessor in key order (nil if none).
func (t *tree) lowerBoundAt(size uint64) (best *block, link **block, pred *block) {
	l := &t.root
	for n := *l; n != nil; n = *l {
		if n.size >= size {
			best, link = n, l
			l = &n.left
		} else {
			pred = n // the last right turn is the predecessor of the result
			l = &n.right
		}
	}
	return best, link, pred
}

// replace puts r in b's place (link points at b): the caller has checked
// that r orders exactly where b did, between b's neighbours in key order.
// r keeps b's priority, so the treap's shape stays valid; no descent.
func (t *tree) replace(link **block, b, r *block) {
	r.left, r.right, r.prio, r.inTree = b.left, b.right, b.prio, true
	*link = r
	b.left, b.right, b.inTree = nil, nil, false
}

// findAt returns the link that points at b (which is in the tree) and b's
// successor in key order (nil if none), in one descent.
func (t *tree) findAt(b *block) (link **block, succ *block) {
	link = &t.root
	for n := *link; n != b; n = *link {
		if n == nil {
			// Not reachable while the tree's invariants hold.
			panic("caching: internal error: block missing from its free tree")
		}
		if keyLess(b, n.size, uintptr(n.addr)) {
			succ = n // the last left turn above b
			link = &n.left
		} else {
			link = &n.right
		}
	}
	if n := b.right; n != nil {
		for n.left != nil {
			n = n.left
		}
		succ = n
	}
	return link, succ
}

// max returns the largest block, or nil.
func (t *tree) max() *block {
	n := t.root
	if n == nil {
		return nil
	}
	for n.right != nil {
		n = n.right
	}
	return n
}

// each calls fn for every block in key order; fn must not change the tree.
func (t *tree) each(fn func(*block)) { treeEach(t.root, fn) }

func treeEach(n *block, fn func(*block)) {
	for n != nil {
		treeEach(n.left, fn)
		fn(n)
		n = n.right
	}
}

// collect returns the blocks in key order, for callers that change the tree.
func (t *tree) collect() []*block {
	out := make([]*block, 0, t.n)
	t.each(func(b *block) { out = append(out, b) })
	return out
}

// ascendFrom calls fn for the blocks with size >= size in key order (size,
// then address) until fn returns false; fn must not change the tree.
func (t *tree) ascendFrom(size uint64, fn func(*block) bool) {
	treeAscend(t.root, size, fn)
}

func treeAscend(n *block, size uint64, fn func(*block) bool) bool {
	for n != nil {
		if n.size >= size {
			if !treeAscend(n.left, size, fn) || !fn(n) {
				return false
			}
		}
		n = n.right
	}
	return true
}
