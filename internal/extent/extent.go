// Package extent is a free list over one address space (the bytes of a
// pinned slab, the offsets of a file): the free extents [Off, Off+Size),
// from which allocations are carved and to which they return.
//
// # Policy
//
// Take carves an allocation from the low end of one free extent that holds
// it, chosen by the list's Policy:
//
//	FirstFit  the free extent of lowest offset that holds the size.
//	BestFit   the smallest free extent that holds the size; among equals,
//	          the one of lowest offset.
//
// Put returns an extent and coalesces it with the free extents it touches on
// either side. TrimTail lets an address space that grows at its end (a file)
// shrink again when its last extent is free.
//
// # Invariants
//
// Between calls, the free extents:
//
//   - are sorted by offset and have sizes above zero;
//   - never overlap: Put panics, with an "extent: " prefix, when asked to
//     free bytes that are already free (a double free, or corruption);
//   - never touch: a free extent's end is strictly below the next one's
//     offset, so that two free neighbours are always one extent (full
//     coalescing), and whether a request fits does not depend on the order
//     of earlier frees;
//   - add up to Bytes.
//
// Both operations cost O(n) in the number of free extents at worst (Take scans
// them; Put finds its place by binary search, then shifts the slice).
//
// A List is not safe for concurrent use: its owner holds its own lock around
// it, as it does around the memory the extents describe.
package extent

import (
	"fmt"
	"sort"
)

// Extent is the range [Off, Off+Size) of an address space.
type Extent struct {
	Off  uint64 // first offset
	Size uint64 // bytes
}

// End is the first offset past the extent.
func (e Extent) End() uint64 { return e.Off + e.Size }

// String formats the extent as [Off, End).
func (e Extent) String() string { return fmt.Sprintf("[%d, %d)", e.Off, e.End()) }

// Policy chooses the free extent that Take carves from.
type Policy uint8

// Policies; see the package documentation.
const (
	FirstFit Policy = iota // the lowest free extent that holds the size
	BestFit                // the smallest free extent that holds the size, the lowest of equals
)

// String names the policy ("first fit", "best fit").
func (p Policy) String() string {
	switch p {
	case FirstFit:
		return "first fit"
	case BestFit:
		return "best fit"
	}
	return fmt.Sprintf("policy(%d)", uint8(p))
}

// List is a free list of extents. The zero List is empty and first fit; set
// Policy before the first Take to choose another.
type List struct {
	Policy Policy // how Take chooses; see the package documentation

	free  []Extent // sorted by Off, coalesced; see the invariants
	bytes uint64   // sum of free[i].Size
}

// Len is the number of free extents.
func (l *List) Len() int { return len(l.free) }

// Bytes is the number of free bytes.
func (l *List) Bytes() uint64 { return l.bytes }

// AppendTo appends the free extents, lowest first, to dst.
func (l *List) AppendTo(dst []Extent) []Extent { return append(dst, l.free...) }

// fit returns the index of the free extent the policy chooses for size, or -1.
func (l *List) fit(size uint64) int {
	if size == 0 {
		return -1
	}
	best := -1
	for i, e := range l.free {
		if e.Size < size {
			continue
		}
		if l.Policy == FirstFit {
			return i
		}
		if best < 0 || e.Size < l.free[best].Size {
			best = i
			if e.Size == size {
				break // nothing smaller can hold it
			}
		}
	}
	return best
}

// Fit returns the free extent that Take(size) would carve from, without
// taking anything; false when none holds size bytes (or size is 0).
func (l *List) Fit(size uint64) (Extent, bool) {
	i := l.fit(size)
	if i < 0 {
		return Extent{}, false
	}
	return l.free[i], true
}

// Take allocates size bytes from the low end of the free extent the policy
// chooses and returns their offset; false when no free extent holds size
// bytes (or size is 0), and then the list is unchanged.
func (l *List) Take(size uint64) (off uint64, ok bool) {
	i := l.fit(size)
	if i < 0 {
		return 0, false
	}
	e := l.free[i]
	if e.Size == size {
		l.free = append(l.free[:i], l.free[i+1:]...)
	} else {
		l.free[i] = Extent{e.Off + size, e.Size - size}
	}
	l.bytes -= size
	return e.Off, true
}

// Put frees [off, off+size), merging it with the free extents it touches. A
// size of 0 does nothing. It panics if any of the bytes is already free.
func (l *List) Put(off, size uint64) {
	if size == 0 {
		return
	}
	x := Extent{off, size}
	if x.End() < off {
		panic(fmt.Sprintf("extent: put %d bytes at %d: past the end of the address space", size, off))
	}
	i := sort.Search(len(l.free), func(i int) bool { return l.free[i].Off > off })
	prev := i > 0 && l.free[i-1].End() >= off
	next := i < len(l.free) && x.End() >= l.free[i].Off
	if prev && l.free[i-1].End() > off {
		panic(fmt.Sprintf("extent: put %v overlaps free %v", x, l.free[i-1]))
	}
	if next && x.End() > l.free[i].Off {
		panic(fmt.Sprintf("extent: put %v overlaps free %v", x, l.free[i]))
	}
	l.bytes += size
	switch {
	case prev && next:
		l.free[i-1].Size += size + l.free[i].Size
		l.free = append(l.free[:i], l.free[i+1:]...)
	case prev:
		l.free[i-1].Size += size
	case next:
		l.free[i] = Extent{off, size + l.free[i].Size}
	default:
		l.free = append(l.free, Extent{})
		copy(l.free[i+1:], l.free[i:])
		l.free[i] = x
	}
}

// TrimTail is for an address space that ends at end and grows there: when
// its last free extent reaches end, TrimTail removes that extent and returns
// its offset, the new end; otherwise it returns end.
func (l *List) TrimTail(end uint64) uint64 {
	n := len(l.free)
	if n == 0 || l.free[n-1].End() != end {
		return end
	}
	last := l.free[n-1]
	l.free = l.free[:n-1]
	l.bytes -= last.Size
	return last.Off
}
