package native

import (
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/symtab"
)

// allocOut calls op(out, size, a3, a4) on on's device, ordered on on for
// the stream-ordered ops (callOnStream), and returns what it wrote to out.
// A size of 0 is refused before the call: HIP answers it with success and
// a NULL pointer, and zero is never a valid allocation (gpumem.Ptr).
//
// A direct short call (the stream-ordered pool allocation on CUDA) has out
// on the C stack (ccall.ShortOut6) and needs no cell; if it fails for want
// of anything but memory it is made again with the context current, as
// callOnStream does.
func (b *Backend) allocOut(on gpumem.Stream, op symtab.Op, size uint64, a3, a4 uintptr) (gpumem.Ptr, error) {
	if size == 0 {
		return 0, b.zeroSize(op)
	}
	if !b.direct(on, op) || !b.short(op) {
		return b.cellOut(on, op, size, a3, a4, false)
	}
	if err := b.deadStream(on); err != nil {
		return 0, err
	}
	fn := b.fnFor(on.Device, op)
	if fn == 0 {
		return 0, b.refuse(on.Device, op)
	}
	r, p := ccall.ShortOut6(fn, uintptr(size), a3, a4, 0, 0)
	if int32(r) == 0 {
		return gpumem.Ptr(p), nil
	}
	if err := b.directFailed(op, r); err != nil {
		return 0, err
	}
	return b.cellOut(on, op, size, a3, a4, true)
}

// cellOut is allocOut's call with out in a cell: through callOnStream, or
// with on's context made current (withContext: a direct call failed).
func (b *Backend) cellOut(on gpumem.Stream, op symtab.Op, size uint64, a3, a4 uintptr, withContext bool) (gpumem.Ptr, error) {
	c := getCell()
	var err error
	if withContext {
		err = b.call(on.Device, op, c.addr(0), uintptr(size), a3, a4, 0, 0)
	} else {
		err = b.callOnStream(on, op, c.addr(0), uintptr(size), a3, a4, 0, 0)
	}
	p := c[0]
	putCell(c)
	if err != nil {
		return 0, err
	}
	return gpumem.Ptr(p), nil
}

// zeroSize is why an allocation of 0 bytes through op is refused (after
// Close, as every call, for the backend being closed).
//
//go:noinline
func (b *Backend) zeroSize(op symtab.Op) error {
	if b.closed.Load() {
		return b.closedErr()
	}
	// The vendor's invalid-value status (CUDA_ERROR_INVALID_VALUE and
	// hipErrorInvalidValue are both 1), which is what CUDA and the
	// simulator answer: a caller that reads the code sees the same on
	// every backend.
	return fmt.Errorf("gpumem: %s: %s of 0 bytes refused: %w", b.d.Name, symtab.Driver.Rows[op].Op,
		b.errorFor(symtab.Driver.Rows[op].Symbol[b.d.Vendor], symtab.CUDAInvalidValue))
}

// Malloc allocates device memory.
func (b *Backend) Malloc(dev int, size uint64) (gpumem.Ptr, error) {
	return b.allocOut(gpumem.Stream{Device: dev}, symtab.Malloc, size, 0, 0)
}

// Free frees device memory.
func (b *Backend) Free(dev int, p gpumem.Ptr) error {
	return b.call(dev, symtab.Free, uintptr(p), 0, 0, 0, 0, 0)
}

// MallocHost allocates portable page-locked host memory.
func (b *Backend) MallocHost(size uint64) (gpumem.Ptr, error) {
	return b.allocOut(gpumem.Stream{}, symtab.MallocHost, size, HostAllocPortable, 0)
}

// FreeHost frees page-locked host memory.
func (b *Backend) FreeHost(p gpumem.Ptr) error {
	return b.call(0, symtab.FreeHost, uintptr(p), 0, 0, 0, 0, 0)
}

// MallocManaged allocates managed memory attached globally.
func (b *Backend) MallocManaged(dev int, size uint64) (gpumem.Ptr, error) {
	return b.allocOut(gpumem.Stream{Device: dev}, symtab.MallocManaged, size, MemAttachGlobal, 0)
}

// location encodes loc for the vendor: packed CUmemLocation (by value) or a
// device handle with -1 for the host. ok is false for an invalid location.
func (b *Backend) location(loc gpumem.Location) (arg uintptr, ctxDev int, ok bool) {
	switch loc.Kind {
	case gpumem.LocationHost:
		if b.locByVal {
			return uintptr(LocationTypeHost), 0, true
		}
		cpu := int64(DeviceCPU)
		return uintptr(cpu), 0, true
	case gpumem.LocationDevice:
		if uint(loc.Device) >= uint(b.nDev) {
			return 0, 0, false
		}
		h := b.handle[loc.Device]
		if b.locByVal {
			return uintptr(uint64(LocationTypeDevice) | uint64(uint32(h))<<32), loc.Device, true
		}
		return uintptr(int64(h)), loc.Device, true
	}
	return 0, 0, false
}

func (b *Backend) badLocation(loc gpumem.Location) error {
	return fmt.Errorf("gpumem: %s: %v is not a location of this machine: %w", b.d.Name, loc, gpumem.ErrInvalidValue)
}

// Advise sets a usage hint on a managed range.
func (b *Backend) Advise(p gpumem.Ptr, size uint64, advice gpumem.Advice, loc gpumem.Location) error {
	v, ok := b.d.Advice(advice)
	if !ok {
		return &gpumem.NotSupportedError{Backend: b.d.Name, Op: "Advise", Reason: fmt.Sprintf("advice %s has no %s equivalent", advice, b.d.Name)}
	}
	switch advice {
	case gpumem.AdviseSetReadMostly, gpumem.AdviseUnsetReadMostly, gpumem.AdviseSetCoarseGrain, gpumem.AdviseUnsetCoarseGrain:
		if loc.Kind == gpumem.LocationInvalid {
			loc = gpumem.DeviceLocation(0)
		}
	}
	arg, dev, ok := b.location(loc)
	if !ok {
		return b.badLocation(loc)
	}
	op := symtab.Advise
	if b.fns[op] == 0 && b.fns[symtab.AdviseLegacy] != 0 {
		op = symtab.AdviseLegacy
	}
	return b.call(dev, op, uintptr(p), uintptr(size), uintptr(v), arg, 0, 0)
}

// Prefetch migrates a managed range to loc, ordered on s.
func (b *Backend) Prefetch(p gpumem.Ptr, size uint64, loc gpumem.Location, s gpumem.Stream) error {
	if err := b.deadStream(s); err != nil {
		return err
	}
	arg, _, ok := b.location(loc)
	if !ok {
		return b.badLocation(loc)
	}
	if b.locByVal {
		return b.call(s.Device, symtab.Prefetch, uintptr(p), uintptr(size), arg, 0, s.Handle, 0)
	}
	// A device argument goes to the vendor's device form: CUDA's legacy
	// cuMemPrefetchAsync (never cuMemPrefetchAsync_v2, which takes a
	// location and flags before the stream, whenever a library without
	// cuMemAdvise_v2 has it), HIP's only one.
	op := symtab.Prefetch
	if symtab.Driver.Rows[symtab.PrefetchLegacy].Symbol[b.d.Vendor] != "" {
		op = symtab.PrefetchLegacy
	}
	return b.call(s.Device, op, uintptr(p), uintptr(size), arg, s.Handle, 0, 0)
}

// RangeLocation reads a location-valued attribute of a managed range.
func (b *Backend) RangeLocation(p gpumem.Ptr, size uint64, attr gpumem.RangeAttribute) (gpumem.Location, error) {
	var a uintptr
	switch attr {
	case gpumem.RangePreferredLocation:
		a = RangePreferredLocation
	case gpumem.RangeLastPrefetchLocation:
		a = RangeLastPrefetch
	default:
		return gpumem.Location{}, fmt.Errorf("gpumem: %s: unknown range attribute %d: %w", b.d.Name, attr, gpumem.ErrInvalidValue)
	}
	c := getCell()
	defer putCell(c)
	if err := b.call(0, symtab.RangeLocation, c.addr(0), 4, a, uintptr(p), uintptr(size), 0); err != nil {
		return gpumem.Location{}, err
	}
	v := c.i32(0)
	switch v {
	case DeviceCPU:
		return gpumem.HostLocation(), nil
	case DeviceInvalid:
		return gpumem.Location{}, nil
	}
	for i, h := range b.handle {
		if h == v {
			return gpumem.DeviceLocation(i), nil
		}
	}
	return gpumem.Location{}, nil
}
