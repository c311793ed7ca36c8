package managed

// See doc.go for an overview.

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gpumem/gpumem"
)

// unit is the granule of chunk carving: every segment size the caching
// pools ask for is a multiple of it.
const unit = 2 << 20

// upstream is the caching.Upstream of one pool kind (device-preferred or
// host-preferred): it takes managed memory from the backend, under the
// oversubscription guard, and applies the kind's initial hints to each new
// segment. Its lock guards only the chunk tables; it is taken when a pool
// grows or shrinks, never on the cache-hit path.
type upstream struct {
	a    *Allocator
	host bool

	mu     sync.Mutex
	chunks []map[gpumem.Ptr]*chunk // per device, by base
	pieces map[gpumem.Ptr]*chunk   // segment base -> its chunk
	segs   map[gpumem.Ptr]segInfo  // every live segment
}

// segInfo is a live segment's size and device.
type segInfo struct {
	size uint64
	dev  int
}

// chunk is one managed allocation of Options.SegmentSize carved into
// segments in units of 2 MiB.
type chunk struct {
	base gpumem.Ptr
	used []bool // per unit
	n    int    // segments carved from it
}

func newUpstream(a *Allocator, host bool, ndev int) *upstream {
	u := &upstream{a: a, host: host, pieces: map[gpumem.Ptr]*chunk{}, segs: map[gpumem.Ptr]segInfo{}}
	u.chunks = make([]map[gpumem.Ptr]*chunk, ndev)
	for i := range u.chunks {
		u.chunks[i] = map[gpumem.Ptr]*chunk{}
	}
	return u
}

// Alloc takes a segment of size bytes for device dev and applies the initial
// hints. On any failure nothing is left allocated.
func (u *upstream) Alloc(dev int, size uint64) (gpumem.Ptr, error) {
	a := u.a
	if dev < 0 || dev >= len(u.chunks) {
		return 0, fmt.Errorf("managed: device %d out of range: %w", dev, gpumem.ErrInvalidValue)
	}
	var p gpumem.Ptr
	var err error
	if cs := a.opts.SegmentSize; cs != 0 && size <= cs && size%unit == 0 {
		p, err = u.carve(dev, size)
	} else {
		p, err = u.malloc(dev, size)
	}
	if err != nil {
		return 0, err
	}
	u.mu.Lock()
	u.segs[p] = segInfo{size, dev}
	u.mu.Unlock()
	if err := a.initialHints(p, size, u.host, dev); err != nil {
		if ferr := u.Free(dev, p); ferr != nil {
			err = errors.Join(err, ferr)
		}
		return 0, err
	}
	return p, nil
}

// malloc takes size bytes of managed memory from the backend under the guard.
func (u *upstream) malloc(dev int, size uint64) (gpumem.Ptr, error) {
	a := u.a
	if err := a.reserve(dev, size); err != nil {
		return 0, err
	}
	p, err := a.b.MallocManaged(dev, size)
	if err != nil {
		a.unreserve(size)
		return 0, fmt.Errorf("managed: MallocManaged of %s on device %d: %w", gpumem.FormatBytes(size), dev, err)
	}
	return p, nil
}

// carve finds room for size bytes in a chunk of dev, taking a new chunk from
// the backend when none has it.
func (u *upstream) carve(dev int, size uint64) (gpumem.Ptr, error) {
	need := int(size / unit)
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, c := range u.chunks[dev] {
		if i := c.find(need); i >= 0 {
			return u.takeLocked(c, i, need), nil
		}
	}
	cs := u.a.opts.SegmentSize
	base, err := u.malloc(dev, cs)
	if err != nil {
		return 0, err
	}
	c := &chunk{base: base, used: make([]bool, cs/unit)}
	u.chunks[dev][base] = c
	return u.takeLocked(c, 0, need), nil
}

// find returns the first unit of a free run of need units, or -1.
func (c *chunk) find(need int) int {
	run := 0
	for i, used := range c.used {
		if used {
			run = 0
			continue
		}
		run++
		if run == need {
			return i - need + 1
		}
	}
	return -1
}

// takeLocked marks need units from first used and returns the segment's
// address. u.mu must be held.
func (u *upstream) takeLocked(c *chunk, first, need int) gpumem.Ptr {
	for i := first; i < first+need; i++ {
		c.used[i] = true
	}
	c.n++
	p := c.base.Add(uint64(first) * unit)
	u.pieces[p] = c
	return p
}

// Free returns a segment: a carved one to its chunk (the chunk to the backend
// when it empties), any other to the backend.
func (u *upstream) Free(dev int, p gpumem.Ptr) error {
	a := u.a
	u.mu.Lock()
	defer u.mu.Unlock()
	seg, ok := u.segs[p]
	if !ok {
		return fmt.Errorf("managed: %#x is not a segment of this allocator: %w", uintptr(p), gpumem.ErrInvalidValue)
	}
	size := seg.size
	c, carved := u.pieces[p]
	if !carved {
		if err := a.b.Free(dev, p); err != nil {
			return fmt.Errorf("managed: freeing segment %#x: %w", uintptr(p), err)
		}
		delete(u.segs, p)
		a.unreserve(size)
		return nil
	}
	if c.n == 1 {
		// Last segment: the whole chunk goes back.
		if err := a.b.Free(dev, c.base); err != nil {
			return fmt.Errorf("managed: freeing chunk %#x: %w", uintptr(c.base), err)
		}
		delete(u.chunks[dev], c.base)
		a.unreserve(uint64(len(c.used)) * unit)
	} else {
		first := int(uint64(p-c.base) / unit)
		for i := first; i < first+int(size/unit); i++ {
			c.used[i] = false
		}
	}
	c.n--
	delete(u.pieces, p)
	delete(u.segs, p)
	return nil
}

// leftovers frees what the closed pools left: every chunk, and every
// segment of its own whose free the backend refused. What it refuses again
// stays, counted in Reserved, for a later Close to retry.
func (u *upstream) leftovers() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	var errs []error
	for p, seg := range u.segs {
		if _, carved := u.pieces[p]; carved {
			continue // goes back with its chunk
		}
		if err := u.a.b.Free(seg.dev, p); err != nil {
			errs = append(errs, fmt.Errorf("managed: freeing segment %#x: %w", uintptr(p), err))
			continue
		}
		u.a.unreserve(seg.size)
		delete(u.segs, p)
	}
	gone := map[*chunk]bool{}
	for dev, m := range u.chunks {
		for base, c := range m {
			if err := u.a.b.Free(dev, base); err != nil {
				errs = append(errs, fmt.Errorf("managed: freeing chunk %#x: %w", uintptr(base), err))
				continue
			}
			u.a.unreserve(uint64(len(c.used)) * unit)
			delete(m, base)
			gone[c] = true
		}
	}
	for p, c := range u.pieces {
		if gone[c] {
			delete(u.pieces, p)
			delete(u.segs, p)
		}
	}
	return errors.Join(errs...)
}
