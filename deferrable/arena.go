package deferrable

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/extent"
)

// hostAlign is the alignment of every block of the pinned arena: a page, so
// that DMA into one block never shares a page with another.
const hostAlign = 4096

// hostArena is the host tier: page-locked memory from MallocHost, taken in
// slabs and carved into blocks (best fit over the free extents of every slab,
// coalesced on free). Pinning is expensive (milliseconds per tens of MiB), so
// slabs are kept when their blocks are freed and reused by later spills; they
// are given back by trim (empty slabs only) or close. Growth stops at limit
// (0: none): a slab that would pass it is not made, after empty slabs have
// been given back to make room.
//
// mu is a leaf lock: the arena never calls the manager, and MallocHost and
// FreeHost run with mu released.
type hostArena struct {
	b        gpumem.Backend
	slabSize uint64
	limit    uint64

	mu      sync.Mutex
	slabs   []*slab
	total   uint64 // pinned bytes in slabs
	growing uint64 // pinned bytes being allocated outside mu
	peak    uint64
	closed  bool
}

// slab is one MallocHost allocation.
type slab struct {
	ptr  gpumem.Ptr
	size uint64
	mem  []byte      // the pinned memory as a slice; nil when the backend does not expose it
	free extent.List // best fit, page-aligned extents of [0, size)
}

func newSlab(p gpumem.Ptr, size uint64, mem []byte) *slab {
	s := &slab{ptr: p, size: size, mem: mem, free: extent.List{Policy: extent.BestFit}}
	s.free.Put(0, size)
	return s
}

// empty reports whether no block of the slab is in use.
func (s *slab) empty() bool { return s.free.Bytes() == s.size }

// hostBlock is a block of the arena: size bytes at offset off of slab s.
type hostBlock struct {
	s         *slab
	off, size uint64
}

func (h hostBlock) ptr() gpumem.Ptr { return h.s.ptr.Add(h.off) }

// bytes is the block as a slice, or nil when the backend does not expose it.
func (h hostBlock) bytes() []byte {
	if h.s == nil || h.s.mem == nil {
		return nil
	}
	return h.s.mem[h.off : h.off+h.size : h.off+h.size]
}

func newHostArena(b gpumem.Backend, slabSize, limit uint64) *hostArena {
	return &hostArena{b: b, slabSize: slabSize, limit: limit}
}

func roundUp(n, to uint64) uint64 { return (n + to - 1) / to * to }

// alloc returns a block of size bytes, making a new slab when no free extent
// fits. It fails with ErrOutOfMemory when the limit forbids the slab, and with
// the backend's error when pinning fails.
func (a *hostArena) alloc(size uint64) (hostBlock, error) {
	need := roundUp(size, hostAlign)
	for {
		a.mu.Lock()
		if a.closed {
			a.mu.Unlock()
			return hostBlock{}, fmt.Errorf("deferrable: host arena: %w", gpumem.ErrClosed)
		}
		if blk, ok := a.bestFitLocked(need); ok {
			blk.size = size
			a.mu.Unlock()
			return blk, nil
		}
		grow := max(a.slabSize, need)
		if a.limit > 0 && a.total+a.growing+grow > a.limit {
			grow = need // a smaller slab may still fit
		}
		var drop []*slab
		if a.limit > 0 && a.total+a.growing+grow > a.limit {
			// Empty slabs give room back.
			drop = a.takeEmptyLocked(a.total + a.growing + grow - a.limit)
			if a.total+a.growing+grow > a.limit {
				a.restoreLocked(drop)
				inUse := a.total
				a.mu.Unlock()
				return hostBlock{}, fmt.Errorf("deferrable: host arena: %s pinned of a limit of %s, %s more asked: %w",
					gpumem.FormatBytes(inUse), gpumem.FormatBytes(a.limit), gpumem.FormatBytes(need), gpumem.ErrOutOfMemory)
			}
		}
		a.growing += grow
		a.mu.Unlock()
		if kept, err := a.freeSlabs(drop); err != nil {
			// The room was not made: the slabs refused stay in the arena
			// (empty, pinned, reusable) and nothing new is pinned.
			a.mu.Lock()
			a.growing -= grow
			a.restoreLocked(kept)
			a.mu.Unlock()
			return hostBlock{}, fmt.Errorf("deferrable: host arena: give back an empty slab: %w", err)
		}
		p, err := a.b.MallocHost(grow)
		a.mu.Lock()
		a.growing -= grow
		if err == nil && a.closed {
			a.mu.Unlock()
			if ferr := a.b.FreeHost(p); ferr != nil {
				return hostBlock{}, fmt.Errorf("deferrable: host arena: %w (freeing a slab pinned during Close: %w)", gpumem.ErrClosed, ferr)
			}
			return hostBlock{}, fmt.Errorf("deferrable: host arena: %w", gpumem.ErrClosed)
		}
		if err != nil {
			a.mu.Unlock()
			return hostBlock{}, fmt.Errorf("deferrable: host arena: pin %s: %w", gpumem.FormatBytes(grow), err)
		}
		s := newSlab(p, grow, pinnedView(a.b, p, grow))
		a.slabs = append(a.slabs, s)
		a.total += grow
		a.peak = max(a.peak, a.total)
		a.mu.Unlock()
	}
}

// freeSlabs gives slabs back to the backend, with mu not held, and returns
// those it refused (still pinned) with the errors.
func (a *hostArena) freeSlabs(ss []*slab) ([]*slab, error) {
	var kept []*slab
	var errs []error
	for _, s := range ss {
		if err := a.b.FreeHost(s.ptr); err != nil {
			kept = append(kept, s)
			errs = append(errs, err)
		}
	}
	return kept, errors.Join(errs...)
}

// bestFitLocked carves need bytes from the smallest free extent of any slab
// that holds them (the first slab's, among equals).
func (a *hostArena) bestFitLocked(need uint64) (hostBlock, bool) {
	var best *slab
	var fit extent.Extent
	for _, s := range a.slabs {
		if e, ok := s.free.Fit(need); ok && (best == nil || e.Size < fit.Size) {
			best, fit = s, e
		}
	}
	if best == nil {
		return hostBlock{}, false
	}
	off, _ := best.free.Take(need) // carves from fit
	return hostBlock{s: best, off: off, size: need}, true
}

// takeEmptyLocked removes empty slabs (largest first) until want bytes are
// taken or none is left, and returns them for FreeHost.
func (a *hostArena) takeEmptyLocked(want uint64) []*slab {
	var empty []*slab
	for _, s := range a.slabs {
		if s.empty() {
			empty = append(empty, s)
		}
	}
	sort.Slice(empty, func(i, j int) bool { return empty[i].size > empty[j].size })
	var out []*slab
	var got uint64
	for _, s := range empty {
		if got >= want {
			break
		}
		out = append(out, s)
		got += s.size
		a.removeLocked(s)
	}
	return out
}

func (a *hostArena) removeLocked(s *slab) {
	for i, t := range a.slabs {
		if t == s {
			a.slabs = append(a.slabs[:i], a.slabs[i+1:]...)
			a.total -= s.size
			return
		}
	}
}

// restoreLocked puts slabs taken out back into the arena: those trim, a
// growth or close could not give back stay counted, and a later trim or
// growth tries again.
func (a *hostArena) restoreLocked(ss []*slab) {
	for _, s := range ss {
		a.slabs = append(a.slabs, s)
		a.total += s.size
	}
}

// release returns a block to its slab (which stays pinned for reuse).
func (a *hostArena) release(h hostBlock) {
	if h.s == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	h.s.free.Put(h.off, roundUp(h.size, hostAlign))
}

// trim gives every empty slab back and returns the bytes unpinned.
func (a *hostArena) trim() (uint64, error) {
	a.mu.Lock()
	drop := a.takeEmptyLocked(^uint64(0))
	a.mu.Unlock()
	kept, err := a.freeSlabs(drop)
	var n uint64
	for _, s := range drop {
		n += s.size
	}
	for _, s := range kept {
		n -= s.size
	}
	if err != nil {
		a.mu.Lock()
		a.restoreLocked(kept)
		a.mu.Unlock()
		return n, fmt.Errorf("deferrable: host arena: trim (%d slabs kept pinned): %w", len(kept), err)
	}
	return n, nil
}

// stats returns the pinned bytes, the slabs and the peak of pinned bytes.
func (a *hostArena) stats() (pinned uint64, slabs int, peak uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.total, len(a.slabs), a.peak
}

// close gives every slab back, whatever is in it.
func (a *hostArena) close() error {
	a.mu.Lock()
	a.closed = true
	slabs := a.slabs
	a.slabs, a.total = nil, 0
	a.mu.Unlock()
	if kept, err := a.freeSlabs(slabs); err != nil {
		// Still pinned: counted, so that the statistics say so.
		a.mu.Lock()
		a.restoreLocked(kept)
		a.mu.Unlock()
		return fmt.Errorf("deferrable: host arena: close: %w", err)
	}
	return nil
}

// readBlock copies the block's bytes [off, off+len(p)) into p.
func (a *hostArena) readBlock(h hostBlock, off uint64, p []byte) error {
	if mem := h.bytes(); mem != nil {
		parallelCopy(p, mem[off:])
		return nil
	}
	if err := a.b.CopyFromDevice(p, h.ptr().Add(off)); err != nil {
		return fmt.Errorf("deferrable: host arena: read: %w", err)
	}
	return nil
}

// writeBlock copies p into the block's bytes [off, off+len(p)).
func (a *hostArena) writeBlock(h hostBlock, off uint64, p []byte) error {
	if mem := h.bytes(); mem != nil {
		parallelCopy(mem[off:], p)
		return nil
	}
	if err := a.b.CopyToDevice(h.ptr().Add(off), p); err != nil {
		return fmt.Errorf("deferrable: host arena: write: %w", err)
	}
	return nil
}
