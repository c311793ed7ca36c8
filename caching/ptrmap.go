package caching

import "github.com/gpumem/gpumem"

// ptrMap maps the address of each live block to the block: open addressing
// with linear probing and backward-shift deletion, so that lookups, inserts
// and deletes on the hot path are a hash and a short scan, and nothing is
// allocated once the table has grown to the program's working set.
type ptrMap struct {
	keys []gpumem.Ptr
	vals []*block
	mask uint64
	n    int
}

func newPtrMap() ptrMap {
	const initial = 64
	return ptrMap{keys: make([]gpumem.Ptr, initial), vals: make([]*block, initial), mask: initial - 1}
}

func (m *ptrMap) slot(p gpumem.Ptr) uint64 {
	// Blocks are 512-byte aligned: drop the zero bits before mixing.
	return ((uint64(p) >> 9) * 0x9E3779B97F4A7C15 >> 20) & m.mask
}

func (m *ptrMap) get(p gpumem.Ptr) *block {
	for i := m.slot(p); ; i = (i + 1) & m.mask {
		k := m.keys[i]
		if k == p {
			return m.vals[i]
		}
		if k == 0 {
			return nil
		}
	}
}

func (m *ptrMap) put(p gpumem.Ptr, b *block) {
	if uint64(m.n+1)*4 > (m.mask+1)*3 {
		m.grow()
	}
	for i := m.slot(p); ; i = (i + 1) & m.mask {
		k := m.keys[i]
		if k == p {
			m.vals[i] = b
			return
		}
		if k == 0 {
			m.keys[i], m.vals[i] = p, b
			m.n++
			return
		}
	}
}

func (m *ptrMap) del(p gpumem.Ptr) {
	i := m.slot(p)
	for ; ; i = (i + 1) & m.mask {
		k := m.keys[i]
		if k == 0 {
			return
		}
		if k == p {
			break
		}
	}
	m.delAt(i)
}

// delAt deletes the entry in slot i.
func (m *ptrMap) delAt(i uint64) {
	// Backward-shift the entries that follow so that no probe chain breaks.
	for j := (i + 1) & m.mask; ; j = (j + 1) & m.mask {
		k := m.keys[j]
		if k == 0 {
			break
		}
		h := m.slot(k)
		// Move k into the hole at i if its home slot h is not within (i, j].
		if (j > i && (h <= i || h > j)) || (j < i && (h <= i && h > j)) {
			m.keys[i], m.vals[i] = k, m.vals[j]
			i = j
		}
	}
	m.keys[i], m.vals[i] = 0, nil
	m.n--
}

func (m *ptrMap) grow() {
	old := *m
	size := (m.mask + 1) * 2
	*m = ptrMap{keys: make([]gpumem.Ptr, size), vals: make([]*block, size), mask: size - 1}
	for i, k := range old.keys {
		if k != 0 {
			m.put(k, old.vals[i])
		}
	}
}

func (m *ptrMap) each(fn func(*block)) {
	for i, k := range m.keys {
		if k != 0 {
			fn(m.vals[i])
		}
	}
}
