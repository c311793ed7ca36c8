package sim

import (
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// This file is how a Go kernel touches device memory. Each access takes the
// GPU's lock, so kernels on several streams run concurrently with each
// other and with the program, and see memory as copies and memsets leave
// it. An access resolves its address to a window: the innermost owner of
// the address (a tag, a stream-ordered allocation, the allocation itself),
// bounded by the size the owner was asked for, and the backing of that
// range. A kernel keeps its last few windows; a window whose owner was
// freed since is a use after free (a Violation) and is resolved again. An
// address in no live allocation stops the kernel with
// CUDA_ERROR_ILLEGAL_ADDRESS.

// Scalar is a type a kernel loads from and stores to device memory. Values
// are little-endian in memory, as on every GPU the package drives.
type Scalar interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

// window is a range of memory a kernel may touch and where its bytes are.
type window struct {
	owner   *object
	lo, hi  uint64
	host    []byte     // the backing from lo, or nil
	ps      *pageStore // or the page store holding it at offset off
	off     uint64
	managed bool // managed memory: accesses fault pages to the device
}

// live reports whether the window's owner is still allocated; lock held.
func (w *window) live() bool {
	return !w.owner.freed && (w.owner.kind != objGraphAlloc || w.owner.live)
}

const maxWindows = 8

// limitOf is the size of o a kernel may touch: the size asked for, not the
// rounded one, so that running one element past the end of a buffer is
// caught as a sanitizer would.
func limitOf(o *object) uint64 {
	switch o.kind {
	case objPoolChunk, objMapping, objReserve:
		return o.size
	}
	if o.req > 0 && o.req <= o.size {
		return o.req
	}
	return o.size
}

// fail releases the lock and stops the kernel with an illegal address.
func (k *KernelCall) fail(format string, args ...any) {
	k.g.mu.Unlock()
	k.abort(symtab.CUDAIllegalAddress, format, args...)
}

// window returns the window holding address a; lock held (released if it
// stops the kernel).
func (k *KernelCall) window(a uint64) *window {
	g := k.g
	for i := range k.wins {
		w := &k.wins[i]
		if a >= w.lo && a < w.hi {
			if w.live() {
				return w
			}
			g.violate(k.st, k.o, a, 1, "use after free: kernel %s touched %s after it was freed (allocated at\n%s)", k.Name, w.owner.describe(), w.owner.stack.String())
			k.wins = append(k.wins[:i], k.wins[i+1:]...)
			break
		}
	}
	if a == 0 {
		k.fail("access through a null pointer")
	}
	span := g.spanAt(a)
	if span == nil {
		if why := g.unmappedWhy(a); why != "" {
			k.fail("address %s", why)
		}
		k.fail("address %#x is in no allocation", a)
	}
	uses, err := g.resolve(symtab.LaunchKernel, a, 1, k.dev, true)
	if err != nil {
		k.fail("address %#x: %v", a, err)
	}
	o := uses[0].obj
	if o.kind == objGraphAlloc && !o.live {
		k.fail("address %#x: %s is not allocated", a, o.describe())
	}
	lo, hi := max(o.start, span.start), min(o.start+limitOf(o), span.start+limitOf(span))
	if a >= hi {
		k.fail("address %#x is %d bytes past the end of %s", a, a-hi, o.describe())
	}
	host, ps, off, _, ok := g.segment(lo)
	if !ok {
		k.fail("address %#x: the memory of %s is gone", a, o.describe())
	}
	if len(k.wins) == maxWindows {
		k.wins = append(k.wins[:0], k.wins[1:]...)
	}
	k.wins = append(k.wins, window{owner: o, lo: lo, hi: hi, host: host, ps: ps, off: off, managed: span.kind == objManaged})
	return &k.wins[len(k.wins)-1]
}

// accessLocked reads (or writes) b at address a; lock held (released if it
// stops the kernel).
//
// One access stays in one allocation: running from one into the next (a
// vector or a matrix longer than its buffer, whose end happens to lie in
// the allocation after it) stops the kernel, as the access would corrupt
// that allocation. The mappings of one virtual reservation (an expandable
// segment's chunks) are one range to an access.
func (k *KernelCall) accessLocked(a uint64, b []byte, write bool) {
	start, total := a, len(b)
	var first *object
	for len(b) > 0 {
		w := k.window(a)
		if first == nil {
			first = w.owner
		} else if w.owner != first && (w.owner.kind != objMapping || first.kind != objMapping) {
			k.fail("an access of %d bytes at %#x runs past the end of %s into %s", total, start, first.describe(), w.owner.describe())
		}
		n := min(uint64(len(b)), w.hi-a)
		if w.managed {
			k.g.touchRange(a, n, k.dev)
		}
		off := a - w.lo
		switch {
		case w.host != nil && write:
			copy(w.host[off:off+n], b[:n])
		case w.host != nil:
			copy(b[:n], w.host[off:off+n])
		case write:
			w.ps.write(w.off+off, b[:n])
		default:
			w.ps.read(w.off+off, b[:n])
		}
		b = b[n:]
		a += n
	}
}

func (k *KernelCall) access(a uint64, b []byte, write bool) {
	k.g.mu.Lock()
	k.accessLocked(a, b, write)
	k.g.mu.Unlock()
}

// elem is the address of element i of size n of the array at p.
func (k *KernelCall) elem(p gpumem.Ptr, i, n int) uint64 {
	if i < 0 {
		k.abort(symtab.CUDAIllegalAddress, "negative index %d of the array at %#x", i, uint64(p))
	}
	a := uint64(p) + uint64(i)*uint64(n)
	if a < uint64(p) || uint64(i) > 1<<56 {
		k.abort(symtab.CUDAIllegalAddress, "index %d of the array at %#x is beyond the address space", i, uint64(p))
	}
	return a
}

// Read copies len(dst) bytes of device memory at p into dst.
func (k *KernelCall) Read(p gpumem.Ptr, dst []byte) { k.access(uint64(p), dst, false) }

// Write copies src to device memory at p.
func (k *KernelCall) Write(p gpumem.Ptr, src []byte) { k.access(uint64(p), src, true) }

// bytesOf is the first n bytes of *v.
func bytesOf(v *uint64, n uintptr) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(v)), n)[:n:n] }

// Load reads element i of the array of T at p (CUDA's p[i]).
func Load[T Scalar](k *KernelCall, p gpumem.Ptr, i int) T {
	var zero T
	n := unsafe.Sizeof(zero)
	var b uint64
	k.access(k.elem(p, i, int(n)), bytesOf(&b, n), false)
	return *(*T)(unsafe.Pointer(&b))
}

// Store writes v to element i of the array of T at p (CUDA's p[i] = v).
func Store[T Scalar](k *KernelCall, p gpumem.Ptr, i int, v T) {
	var b uint64
	*(*T)(unsafe.Pointer(&b)) = v
	k.access(k.elem(p, i, int(unsafe.Sizeof(v))), bytesOf(&b, unsafe.Sizeof(v)), true)
}

// AtomicAdd adds v to element i of the array of T at p and returns the old
// value, atomically with respect to every other kernel and copy (CUDA's
// atomicAdd).
func AtomicAdd[T Scalar](k *KernelCall, p gpumem.Ptr, i int, v T) (old T) {
	n := unsafe.Sizeof(v)
	a := k.elem(p, i, int(n))
	var b uint64
	buf := bytesOf(&b, n)
	k.g.mu.Lock()
	k.accessLocked(a, buf, false)
	old = *(*T)(unsafe.Pointer(&b))
	*(*T)(unsafe.Pointer(&b)) = old + v
	k.accessLocked(a, buf, true)
	k.g.mu.Unlock()
	return old
}

// Shared returns the block's shared memory (KernelCall.Shared) as a slice
// of T, len(k.Shared)/sizeof(T) long; nil when the block has none.
func Shared[T Scalar](k *KernelCall) []T {
	var zero T
	n := len(k.Shared) / int(unsafe.Sizeof(zero))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&k.shared[0])), n)
}
