// Package ptrmap is a hash map from non-zero addresses to values, made for
// the allocators' hot paths: one probe sequence to insert a new key or to
// remove one and get its value back (a Go map needs two for each: a lookup
// and the change), values stored inline, no allocation except when the
// table grows or shrinks.
//
// The table uses open addressing with linear probing over a power-of-two
// array, a multiplicative (Fibonacci) hash that spreads aligned addresses,
// a load factor of at most one half, and deletion by backward shifting, so
// that no tombstones build up under the allocate-free churn of a
// workload. The zero key marks an empty slot: address 0 is never stored.
//
// It is the one pointer map of the project: asyncpool's table of
// recorded allocations (values inline) and the caching allocator's table of
// live blocks (pointer values; a value that is a pointer reads back nil when
// absent, so Get serves as a lookup).
//
// A Map is not safe for concurrent use; its owner locks around it.
package ptrmap

const (
	minSlots = 16
	// golden is 2^64 divided by the golden ratio: multiplying by it and
	// keeping the high bits spreads keys that differ only in high bits
	// (addresses aligned to large powers of two) over the whole table.
	golden = 0x9E3779B97F4A7C15
)

type slot[V any] struct {
	key uint64
	val V
}

// Map maps non-zero uint64 keys to values of type V. The zero Map is
// empty and ready to use.
type Map[V any] struct {
	slots []slot[V]
	n     int
	shift uint // 64 - log2(len(slots))
}

// Len is the number of keys held.
func (m *Map[V]) Len() int { return m.n }

func (m *Map[V]) home(k uint64) int { return int((k * golden) >> m.shift) }

// find is the slot holding k, or the empty slot where k would go.
func (m *Map[V]) find(k uint64) (i int, found bool) {
	mask := len(m.slots) - 1
	for i = m.home(k); ; i = (i + 1) & mask {
		switch m.slots[i].key {
		case k:
			return i, true
		case 0:
			return i, false
		}
	}
}

// Get returns the value of k and whether k is present.
func (m *Map[V]) Get(k uint64) (V, bool) {
	if k == 0 || m.n == 0 {
		var zero V
		return zero, false
	}
	i, ok := m.find(k)
	return m.slots[i].val, ok
}

// Ref returns a pointer to the value of k, or nil if k is absent. The
// pointer is valid until the next Insert, Set or Delete.
func (m *Map[V]) Ref(k uint64) *V {
	if k == 0 || m.n == 0 {
		return nil
	}
	if i, ok := m.find(k); ok {
		return &m.slots[i].val
	}
	return nil
}

// Insert adds k with value v if k is absent and reports whether it did.
// A present key keeps its value; the zero key is never inserted.
func (m *Map[V]) Insert(k uint64, v V) bool {
	if k == 0 {
		return false
	}
	if (m.n+1)*2 > len(m.slots) {
		m.resize(max(minSlots, len(m.slots)*2))
	}
	i, ok := m.find(k)
	if ok {
		return false
	}
	m.slots[i] = slot[V]{key: k, val: v}
	m.n++
	return true
}

// Set gives k the value v, adding k if it is absent. It reports false
// (and does nothing) for the zero key.
func (m *Map[V]) Set(k uint64, v V) bool {
	if k == 0 {
		return false
	}
	if p := m.Ref(k); p != nil {
		*p = v
		return true
	}
	return m.Insert(k, v)
}

// Delete removes k and returns the value it had, if it was present.
func (m *Map[V]) Delete(k uint64) (V, bool) {
	var zero V
	if k == 0 || m.n == 0 {
		return zero, false
	}
	i, ok := m.find(k)
	if !ok {
		return zero, false
	}
	v := m.slots[i].val
	// Backward shift: move up every later entry of the run that may not
	// stay behind the hole (its home is not in the cyclic range (i, j]).
	mask := len(m.slots) - 1
	for j := (i + 1) & mask; m.slots[j].key != 0; j = (j + 1) & mask {
		h := m.home(m.slots[j].key)
		if i <= j {
			if i < h && h <= j {
				continue
			}
		} else if i < h || h <= j {
			continue
		}
		m.slots[i] = m.slots[j]
		i = j
	}
	m.slots[i] = slot[V]{}
	m.n--
	if len(m.slots) > 4*minSlots && m.n*8 < len(m.slots) {
		m.resize(len(m.slots) / 2)
	}
	return v, true
}

// Range calls f for each key and value, in no particular order, until f
// returns false. f must not change the map: collect the keys to change
// and change them after the walk.
func (m *Map[V]) Range(f func(k uint64, v V) bool) {
	for i := range m.slots {
		if s := &m.slots[i]; s.key != 0 && !f(s.key, s.val) {
			return
		}
	}
}

// resize rehashes into n slots (a power of two, at least twice Len).
func (m *Map[V]) resize(n int) {
	old := m.slots
	m.slots = make([]slot[V], n)
	m.shift = 64
	for s := n; s > 1; s >>= 1 {
		m.shift--
	}
	mask := n - 1
	for _, s := range old {
		if s.key == 0 {
			continue
		}
		i := m.home(s.key)
		for m.slots[i].key != 0 {
			i = (i + 1) & mask
		}
		m.slots[i] = s
	}
}
