package native

import (
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/symtab"
)

// Memcpy copies between unified addresses and returns when done.
func (b *Backend) Memcpy(dst, src gpumem.Ptr, size uint64) error {
	dev := b.pointerDevice(uintptr(dst))
	if dev == 0 {
		dev = b.pointerDevice(uintptr(src))
	}
	return b.memcpy(dev, uintptr(dst), uintptr(src), size)
}

// memcpy copies in device dev's context (see pointerDevice).
func (b *Backend) memcpy(dev int, dst, src uintptr, size uint64) error {
	if b.d.MemcpyKind {
		return b.call(dev, symtab.Memcpy, dst, src, uintptr(size), MemcpyDefault, 0, 0)
	}
	return b.call(dev, symtab.Memcpy, dst, src, uintptr(size), 0, 0, 0)
}

// pointerAttrDeviceOrdinal is CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL and
// HIP_POINTER_ATTRIBUTE_DEVICE_ORDINAL: 9 in both headers.
const pointerAttrDeviceOrdinal = 9

// pointerDevice is the device whose context a synchronous operation on the
// unified address p must run in: the device that owns p, or 0 when p is not
// a device's memory (host memory, Go memory), the library cannot say, or
// there is only one device; 0 also after Close, when the library is not
// called. Memory of a stream-ordered pool or of a virtual
// memory mapping is reachable only from the devices granted access, so the
// owner's context matters for cuMemcpy and cuMemsetD8 on machines with
// several devices.
func (b *Backend) pointerDevice(p uintptr) int {
	fn := b.fns[symtab.PointerDevice]
	if b.nDev <= 1 || fn == 0 || p == 0 || b.closed.Load() {
		return 0
	}
	c := getCell()
	defer putCell(c)
	r, _ := ccall.CallPre6(b.pre, b.cur[0], fn, c.addr(0), pointerAttrDeviceOrdinal, p, 0, 0, 0)
	if int32(r) != 0 {
		return 0
	}
	if d := int(c.i32(0)); d > 0 && d < b.nDev {
		return d
	}
	return 0
}

// MemcpyAsync copies between unified addresses, ordered on s.
func (b *Backend) MemcpyAsync(dst, src gpumem.Ptr, size uint64, s gpumem.Stream) error {
	if err := b.deadStream(s); err != nil {
		return err
	}
	if b.d.MemcpyKind {
		return b.call(s.Device, symtab.MemcpyAsync, uintptr(dst), uintptr(src), uintptr(size), MemcpyDefault, s.Handle, 0)
	}
	return b.call(s.Device, symtab.MemcpyAsync, uintptr(dst), uintptr(src), uintptr(size), s.Handle, 0, 0)
}

// MemcpyPeerAsync copies between two devices' memory, ordered on s.
func (b *Backend) MemcpyPeerAsync(dst gpumem.Ptr, dstDev int, src gpumem.Ptr, srcDev int, size uint64, s gpumem.Stream) error {
	if err := b.deadStream(s); err != nil {
		return err
	}
	if uint(dstDev) >= uint(b.nDev) {
		return b.badDevice(dstDev)
	}
	if uint(srcDev) >= uint(b.nDev) {
		return b.badDevice(srcDev)
	}
	return b.call(s.Device, symtab.MemcpyPeerAsync, uintptr(dst), b.cur[dstDev], uintptr(src), b.cur[srcDev], uintptr(size), s.Handle)
}

// Memset sets size bytes at p to value.
func (b *Backend) Memset(p gpumem.Ptr, value byte, size uint64) error {
	return b.call(b.pointerDevice(uintptr(p)), symtab.Memset, uintptr(p), uintptr(value), uintptr(size), 0, 0, 0)
}

// MemsetAsync sets size bytes at p to value, ordered on s.
func (b *Backend) MemsetAsync(p gpumem.Ptr, value byte, size uint64, s gpumem.Stream) error {
	if err := b.deadStream(s); err != nil {
		return err
	}
	return b.call(s.Device, symtab.MemsetAsync, uintptr(p), uintptr(value), uintptr(size), s.Handle, 0, 0)
}

// CopyToDevice copies src to dst and returns when done. A synchronous copy
// from pageable memory to the device returns once the source is staged,
// possibly before its last transfer has landed (CUDA's "API
// synchronization behavior"), and it runs on the legacy default stream,
// which a non-blocking stream does not wait for: a kernel launched on such
// a stream right after could read the old contents. So the default stream
// is synchronized after the copy, on the device that owns dst.
func (b *Backend) CopyToDevice(dst gpumem.Ptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	dev := b.pointerDevice(uintptr(dst)) // Go memory is no device's
	if err := b.copyGo(dev, uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uint64(len(src))); err != nil {
		return err
	}
	return b.call(dev, symtab.StreamSynchronize, 0, 0, 0, 0, 0, 0)
}

// CopyFromDevice copies src into dst and returns when done.
func (b *Backend) CopyFromDevice(dst []byte, src gpumem.Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	return b.copyGo(b.pointerDevice(uintptr(src)), uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uint64(len(dst)))
}

// copyGo copies with Go memory on one side. uintptrescapes keeps the Go
// memory alive and on the heap (where it cannot move) for the call.
//
//go:uintptrescapes
//go:noinline
func (b *Backend) copyGo(dev int, dst, src uintptr, n uint64) error {
	return b.memcpy(dev, dst, src, n)
}
