package native

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/symtab"
)

// Fn returns the resolved address of op (0 if missing).
func (b *Backend) Fn(op symtab.Op) uintptr { return b.fns[op] }

// SetFn replaces the address of op (dialects refining their resolution).
func (b *Backend) SetFn(op symtab.Op, addr uintptr) {
	if addr != 0 {
		b.fns[op], b.missing[op] = addr, nil
	}
}

// SetDevices records the device count, the make-current function and, per
// device, its argument and vendor handle.
func (b *Backend) SetDevices(pre uintptr, cur []uintptr, handles []int32) {
	b.pre, b.cur, b.handle, b.nDev = pre, cur, handles, len(cur)
}

// NumDevices returns the device count set by SetDevices.
func (b *Backend) NumDevices() int { return b.nDev }

// Handle returns device i's vendor handle.
func (b *Backend) Handle(i int) int32 { return b.handle[i] }

// Status turns a status code of op into an error (nil for 0).
func (b *Backend) Status(op symtab.Op, code uintptr) error {
	if int32(code) == 0 {
		return nil
	}
	return b.errorFor(symtab.Driver.Rows[op].Symbol[b.d.Vendor], int(int32(code)))
}

func (b *Backend) errorFor(sym string, code int) error {
	sentinel := symtab.Statuses[b.d.Vendor].Sentinel(code, b.closed.Load())
	return &gpumem.Error{Backend: b.d.Name, Op: sym, Code: code, Name: b.ErrorName(code), Err: sentinel}
}

// Raw calls op directly, without making a device current (Open-time and
// device-less calls that need no context). The number of arguments must
// be the row's Args for the vendor (at most six): a wrong count is an
// error matching gpumem.ErrInvalidValue, and nothing is called.
func (b *Backend) Raw(op symtab.Op, a ...uintptr) (uintptr, error) {
	fn := b.fns[op]
	if fn == 0 {
		return 0, b.notSupported(op)
	}
	if n, ok := symtab.Driver.Rows[op].Args.Words(b.d.Vendor); (ok && n != len(a)) || len(a) > 6 {
		return 0, fmt.Errorf("gpumem: %s: %s takes %v arguments, called with %d (at most 6 here): %w",
			b.d.Name, symtab.Driver.Rows[op].Symbol[b.d.Vendor], symtab.Driver.Rows[op].Args, len(a), gpumem.ErrInvalidValue)
	}
	var r uintptr
	switch len(a) {
	case 0:
		r = ccall.Call0(fn)
	case 1:
		r = ccall.Call1(fn, a[0])
	case 2:
		r = ccall.Call2(fn, a[0], a[1])
	case 3:
		r = ccall.Call3(fn, a[0], a[1], a[2])
	case 4:
		r = ccall.Call4(fn, a[0], a[1], a[2], a[3])
	case 5:
		r = ccall.Call5(fn, a[0], a[1], a[2], a[3], a[4])
	default:
		r = ccall.Call6(fn, a[0], a[1], a[2], a[3], a[4], a[5])
	}
	return r, nil
}

// Int32 calls op, a device-less function whose only argument is an int32
// out-parameter (version and device-count queries), and returns the value.
func (b *Backend) Int32(op symtab.Op) (int, error) {
	v := new(int32)
	r, err := b.Raw(op, uintptr(unsafe.Pointer(v)))
	runtime.KeepAlive(v)
	if err != nil {
		return 0, err
	}
	if err := b.Status(op, r); err != nil {
		return 0, err
	}
	return int(*v), nil
}

func (b *Backend) notSupported(op symtab.Op) error {
	reason := "not resolved"
	if b.missing[op] != nil {
		reason = b.missing[op].Error()
	}
	return &gpumem.NotSupportedError{Backend: b.d.Name, Op: symtab.Driver.Rows[op].Op, Reason: reason}
}

func (b *Backend) closedErr() error {
	return fmt.Errorf("gpumem: %s: backend is closed: %w", b.d.Name, gpumem.ErrClosed)
}

func (b *Backend) badDevice(dev int) error {
	return fmt.Errorf("gpumem: %s: device %d out of range (have %d): %w", b.d.Name, dev, b.nDev, gpumem.ErrInvalidValue)
}

// call runs op on device dev: the device is made current and op called in
// one transition into C, a short one for a row marked symtab.Row.Short
// (internal/ccall.ShortPre6). It allocates nothing when op succeeds.
func (b *Backend) call(dev int, op symtab.Op, a1, a2, a3, a4, a5, a6 uintptr) error {
	fn := b.fnFor(dev, op)
	if fn == 0 {
		return b.refuse(dev, op)
	}
	var r uintptr
	var preFailed bool
	if b.short(op) {
		r, preFailed = ccall.ShortPre6(b.pre, b.cur[dev], fn, a1, a2, a3, a4, a5, a6)
	} else {
		r, preFailed = ccall.CallPre6(b.pre, b.cur[dev], fn, a1, a2, a3, a4, a5, a6)
	}
	if int32(r) == 0 {
		return nil
	}
	return b.failed(op, r, preFailed)
}

// maxSpecialStream is the largest stream handle that is not a stream of its
// own: 0 (the legacy default stream), 1 (CU_STREAM_LEGACY, hipStreamLegacy)
// and 2 (CU_STREAM_PER_THREAD, hipStreamPerThread), which stand for the
// current context's default streams.
const maxSpecialStream = 2

// callOnStream is call for op ordered on s. An op that takes its context
// from its arguments (symtab.Row.StreamContext) on an explicit stream is
// called directly, a foreign call less than making s's device current
// first (Dialect.DirectCalls). If that call fails for any reason but a lack
// of memory, it is made again through call, with the context current: a
// failed call did nothing, and a driver that wants a current context after
// all (CUDA_ERROR_INVALID_CONTEXT with none current, or a refusal while
// another device's context is current) then gets one. Running out of memory
// does not depend on the context, and its callers retry it themselves.
func (b *Backend) callOnStream(s gpumem.Stream, op symtab.Op, a1, a2, a3, a4, a5, a6 uintptr) error {
	if err := b.deadStream(s); err != nil {
		return err
	}
	if b.direct(s, op) {
		fn := b.fnFor(s.Device, op)
		if fn == 0 {
			return b.refuse(s.Device, op)
		}
		var r uintptr
		if b.short(op) {
			r = ccall.Short6(fn, a1, a2, a3, a4, a5, a6)
		} else {
			r = ccall.Call6(fn, a1, a2, a3, a4, a5, a6)
		}
		if int32(r) == 0 {
			return nil
		}
		if err := b.directFailed(op, r); err != nil {
			return err
		}
	}
	return b.call(s.Device, op, a1, a2, a3, a4, a5, a6)
}

// direct reports whether op on s is called without making a context
// current (callOnStream).
func (b *Backend) direct(s gpumem.Stream, op symtab.Op) bool {
	return s.Handle > maxSpecialStream && b.how[op]&howDirect != 0
}

// How a call of an op is made on a backend's vendor (Backend.how).
const (
	howDirect = 1 << iota // on an explicit stream, without making a context current (Row.StreamContext, Dialect.DirectCalls)
	howShort              // as a short call (Row.Short)
)

// howOf is how ops of row r are called through dialect d.
func howOf(r *symtab.Row, d *Dialect) uint8 {
	var h uint8
	if d.DirectCalls && r.StreamContext[d.Vendor] {
		h |= howDirect
	}
	if r.Short[d.Vendor] {
		h |= howShort
	}
	return h
}

// short reports whether op is a short call on this vendor (symtab.Row.Short).
func (b *Backend) short(op symtab.Op) bool { return b.how[op]&howShort != 0 }

// directFailed is what a direct call of op that answered the non-zero
// status r returns: its error if it ran out of memory (which does not
// depend on the context, and whose callers retry it themselves), else nil,
// and the call is made again with the context current.
func (b *Backend) directFailed(op symtab.Op, r uintptr) error {
	if err := b.Status(op, r); errors.Is(err, gpumem.ErrOutOfMemory) {
		return err
	}
	return nil
}

// ShortCalls reports whether this backend's vendor has rows made as short
// calls (has), and whether a short call made now would take the short path
// (on: internal/ccall.ShortEnabled), for gpumem info.
func (b *Backend) ShortCalls() (on, has bool) {
	for _, h := range b.how {
		if h&howShort != 0 {
			return ccall.ShortEnabled(), true
		}
	}
	return false, false
}

// invoke is call without the translation of a failed status: r is the raw
// status, of the make-current function when preFailed. err is set only when
// nothing was called.
func (b *Backend) invoke(dev int, op symtab.Op, a1, a2, a3, a4, a5, a6 uintptr) (r uintptr, preFailed bool, err error) {
	fn := b.fnFor(dev, op)
	if fn == 0 {
		return 0, false, b.refuse(dev, op)
	}
	r, preFailed = ccall.CallPre6(b.pre, b.cur[dev], fn, a1, a2, a3, a4, a5, a6)
	return r, preFailed, nil
}

// target is the address of op for a call on device dev, or why no call can
// be made: the backend is closed, dev is out of range or op did not resolve.
func (b *Backend) target(dev int, op symtab.Op) (uintptr, error) {
	if fn := b.fnFor(dev, op); fn != 0 {
		return fn, nil
	}
	return 0, b.refuse(dev, op)
}

// fnFor is the address of op for a call on device dev, or 0 when none can
// be made (refuse says why). It inlines into every caller: every backend
// call comes through it, and a call level costs a few nanoseconds against a
// transition of about 40.
func (b *Backend) fnFor(dev int, op symtab.Op) uintptr {
	if b.closed.Load() || uint(dev) >= uint(b.nDev) {
		return 0
	}
	return b.fns[op]
}

// refuse is why target can make no call of op on device dev.
//
//go:noinline
func (b *Backend) refuse(dev int, op symtab.Op) error {
	if b.closed.Load() {
		return b.closedErr()
	}
	if uint(dev) >= uint(b.nDev) {
		return b.badDevice(dev)
	}
	return b.notSupported(op)
}

// failed turns the non-zero status r of invoke into an error.
func (b *Backend) failed(op symtab.Op, r uintptr, preFailed bool) error {
	if preFailed {
		return b.Status(symtab.SetCurrent, r)
	}
	return b.Status(op, r)
}

// CallCurrent calls op on dev with no arguments beyond a1 (benchmarks of the
// per-call cost).
func (b *Backend) CallCurrent(dev int, op symtab.Op, a1 uintptr) error {
	return b.call(dev, op, a1, 0, 0, 0, 0, 0)
}

// CurrentFunc returns the make-current function of device dev and its
// argument (cuCtxSetCurrent and the primary context, or hipSetDevice and
// the ordinal), for libraries bound through the public bind package, and
// the flag Close sets.
func (b *Backend) CurrentFunc(dev int) (fn, arg uintptr, closed *atomic.Bool, err error) {
	if b.closed.Load() {
		return 0, 0, nil, b.closedErr()
	}
	if uint(dev) >= uint(b.nDev) {
		return 0, 0, nil, b.badDevice(dev)
	}
	return b.pre, b.cur[dev], &b.closed, nil
}
