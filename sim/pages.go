package sim

// pageStore backs memory lazily with host memory: 64 KiB pages in a map,
// created on the first write; reads of pages never written give zeros. Keys
// are offsets (absolute addresses for device memory, offsets into the
// physical allocation for the virtual memory API).
type pageStore struct {
	pages map[uint64]*page
}

const (
	pageShift = 16
	pageSize  = 1 << pageShift
)

type page [pageSize]byte

func newPageStore() *pageStore { return &pageStore{pages: map[uint64]*page{}} }

func (ps *pageStore) read(off uint64, dst []byte) {
	for len(dst) > 0 {
		in := off & (pageSize - 1)
		n := uint64(len(dst))
		if n > pageSize-in {
			n = pageSize - in
		}
		if p, ok := ps.pages[off>>pageShift]; ok {
			copy(dst[:n], p[in:in+n])
		} else {
			clear(dst[:n])
		}
		dst = dst[n:]
		off += n
	}
}

func (ps *pageStore) write(off uint64, src []byte) {
	for len(src) > 0 {
		in := off & (pageSize - 1)
		n := uint64(len(src))
		if n > pageSize-in {
			n = pageSize - in
		}
		p := ps.pages[off>>pageShift]
		if p == nil {
			if allZero(src[:n]) {
				src = src[n:]
				off += n
				continue
			}
			p = new(page)
			ps.pages[off>>pageShift] = p
		}
		copy(p[in:in+n], src[:n])
		src = src[n:]
		off += n
	}
}

func (ps *pageStore) fill(off, size uint64, v byte) {
	for size > 0 {
		in := off & (pageSize - 1)
		n := size
		if n > pageSize-in {
			n = pageSize - in
		}
		p := ps.pages[off>>pageShift]
		if p == nil {
			if v == 0 {
				size -= n
				off += n
				continue
			}
			p = new(page)
			ps.pages[off>>pageShift] = p
		}
		b := p[in : in+n]
		for i := range b {
			b[i] = v
		}
		size -= n
		off += n
	}
}

// drop forgets the pages wholly inside [off, off+size) and zeroes the parts of
// the pages at its ends, so that the memory reads as zeros when reused. Its
// cost is bounded by the smaller of the range's page count and the store's.
func (ps *pageStore) drop(off, size uint64) {
	if size == 0 || len(ps.pages) == 0 {
		return
	}
	first, last := off>>pageShift, (off+size-1)>>pageShift
	if last-first+1 > uint64(len(ps.pages)) {
		for k := range ps.pages {
			if k >= first && k <= last {
				ps.dropPage(k, off, size)
			}
		}
		return
	}
	for k := first; k <= last; k++ {
		if _, ok := ps.pages[k]; ok {
			ps.dropPage(k, off, size)
		}
	}
}

func (ps *pageStore) dropPage(k, off, size uint64) {
	ps0 := k << pageShift
	if ps0 >= off && ps0+pageSize <= off+size {
		delete(ps.pages, k)
		return
	}
	p := ps.pages[k]
	lo, hi := max(ps0, off), min(ps0+pageSize, off+size)
	clear(p[lo-ps0 : hi-ps0])
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
