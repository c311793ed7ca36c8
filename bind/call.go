package bind

import (
	"fmt"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/ccall"
)

// Call calls row op's function with args and returns its raw result (the
// whole return register: a C function returning a 32-bit status leaves
// the upper half undefined, so read it as int32(r)). err is set only when
// no call was made: the library is closed, op is not a row, the function
// did not resolve (matching gpumem.ErrNotSupported) or len(args) is not the
// number of words the row's Args declares for the vendor (matching
// gpumem.ErrInvalidValue). It allocates nothing when
// the call is made.
//
//go:nosplit
func (l *Lib) Call(op Op, args ...uintptr) (uintptr, error) {
	fn, bad := l.target(op, len(args))
	if bad != 0 {
		return 0, l.refuse(op, len(args), bad)
	}
	r, _, _ := ccall.CallN(0, 0, fn, args)
	return r, nil
}

// Check calls row op's function, which returns the library's status, and
// returns nil on success or an *Error naming the symbol and the status. It
// allocates nothing on success.
//
//go:nosplit
func (l *Lib) Check(op Op, args ...uintptr) error {
	fn, bad := l.target(op, len(args))
	if bad != 0 {
		return l.refuse(op, len(args), bad)
	}
	r, _, _ := ccall.CallN(0, 0, fn, args)
	if int32(r) == int32(l.lib.Status.Success) {
		return nil
	}
	return l.Err(op, int(int32(r)))
}

// CallOn is Call with c's device made current first, on the same thread
// in the same transition into C. When making it current fails, the call is
// not made and the error is the backend's.
//
//go:nosplit
func (l *Lib) CallOn(c Context, op Op, args ...uintptr) (uintptr, error) {
	fn, bad := l.target(op, len(args))
	if bad == 0 {
		bad = c.check()
	}
	if bad != 0 {
		return 0, l.refuse(op, len(args), bad)
	}
	r, preFailed, _ := ccall.CallN(c.fn, c.arg, fn, args)
	if preFailed {
		return 0, c.failed(r)
	}
	return r, nil
}

// CheckOn is Check with c's device made current first.
//
//go:nosplit
func (l *Lib) CheckOn(c Context, op Op, args ...uintptr) error {
	fn, bad := l.target(op, len(args))
	if bad == 0 {
		bad = c.check()
	}
	if bad != 0 {
		return l.refuse(op, len(args), bad)
	}
	r, preFailed, _ := ccall.CallN(c.fn, c.arg, fn, args)
	if preFailed {
		return c.failed(r)
	}
	if int32(r) == int32(l.lib.Status.Success) {
		return nil
	}
	return l.Err(op, int(int32(r)))
}

// Reasons target refuses a call.
const (
	refuseNone = iota
	refuseClosed
	refuseOp
	refuseMissing
	refuseArgs
	refuseContext
	refuseBackendClosed
)

// check is why c cannot make its device current, or refuseNone.
//
//go:nosplit
func (c *Context) check() int {
	if c.fn == 0 {
		return refuseContext
	}
	if c.closed != nil && c.closed.Load() {
		return refuseBackendClosed
	}
	return refuseNone
}

// target is the function of op for a call of n arguments, or why no call
// can be made. It is small and calls nothing, so that the nosplit callers
// keep their arguments' stack addresses valid.
//
//go:nosplit
func (l *Lib) target(op Op, n int) (uintptr, int) {
	if l == nil || l.closed.Load() {
		return 0, refuseClosed
	}
	if uint(op) >= uint(len(l.fns)) {
		return 0, refuseOp
	}
	fn := l.fns[op]
	if fn == 0 {
		return 0, refuseMissing
	}
	// The row's Arity, read inline: 0 is undeclared, NoArgs is none.
	want := l.lib.Table.Rows[op].Args[l.vendor]
	if want == NoArgs {
		want = 0
	} else if want == 0 {
		want = n
	}
	if n > MaxArgs || n != want {
		return 0, refuseArgs
	}
	return fn, refuseNone
}

// refuse builds the error for a call target refused.
func (l *Lib) refuse(op Op, n, why int) error {
	if l == nil {
		return fmt.Errorf("gpumem: bind: call on a nil library: %w", gpumem.ErrInvalidValue)
	}
	switch why {
	case refuseClosed:
		return l.closedErr()
	case refuseOp:
		return l.badOp(op)
	case refuseMissing:
		return l.notSupported(op)
	case refuseContext:
		return fmt.Errorf("gpumem: %s: %s: the zero Context has no device (get one with bind.ContextOf): %w", l.lib.Name, l.lib.Table.Rows[op].Op, gpumem.ErrInvalidValue)
	case refuseBackendClosed:
		return fmt.Errorf("gpumem: %s: %s: the context's backend is closed: %w", l.lib.Name, l.lib.Table.Rows[op].Op, gpumem.ErrClosed)
	}
	r := &l.lib.Table.Rows[op]
	if n > MaxArgs {
		return fmt.Errorf("gpumem: %s: %s: %d arguments; at most %d can be passed: %w", l.lib.Name, r.Symbol[l.vendor], n, MaxArgs, gpumem.ErrInvalidValue)
	}
	want, _ := r.Args.Words(l.vendor)
	return fmt.Errorf("gpumem: %s: %s takes %d arguments, called with %d: %w", l.lib.Name, r.Symbol[l.vendor], want, n, gpumem.ErrInvalidValue)
}

// Err turns status code of row op into an error: nil for the library's
// success value, else an *Error with the status's name. On a nil Lib it is
// an error matching gpumem.ErrInvalidValue.
func (l *Lib) Err(op Op, code int) error {
	if l == nil {
		return fmt.Errorf("gpumem: bind: status %d of a nil library: %w", code, gpumem.ErrInvalidValue)
	}
	if code == l.lib.Status.Success {
		return nil
	}
	e := &Error{Library: l.lib.Name, Code: code, Name: l.StatusName(code)}
	if uint(op) < uint(len(l.lib.Table.Rows)) {
		e.Op = l.lib.Table.Rows[op].Symbol[l.vendor]
		if e.Op == "" {
			e.Op = l.lib.Table.Rows[op].Op
		}
	}
	if l.lib.Status.Sentinel != nil {
		e.Err = l.lib.Status.Sentinel(code)
	}
	return e
}

// StatusName returns the library's name for a status ("" if it has none),
// asked of the library once per code.
func (l *Lib) StatusName(code int) string {
	if l == nil || l.lib.Status.Name == nil || l.closed.Load() {
		return ""
	}
	if v, ok := l.names.Load(code); ok {
		return v.(string)
	}
	n := l.lib.Status.Name(l, code)
	l.names.Store(code, n)
	return n
}

// Error is a failed status of a bound library.
type Error struct {
	Library string // the Library's Name
	Op      string // the symbol called
	Code    int    // the status
	Name    string // the library's name for it, "" if unknown
	Err     error  // the gpumem sentinel it means, or nil
}

// Error formats the error.
func (e *Error) Error() string {
	name := e.Name
	if name == "" {
		name = "unknown status"
	}
	return fmt.Sprintf("gpumem: %s: %s failed: %s (%d)", e.Library, e.Op, name, e.Code)
}

// Unwrap returns the sentinel the status means, if any.
func (e *Error) Unwrap() error { return e.Err }

// CString copies the NUL-terminated C string at p, as C functions return
// them (a version or a name), at most 1 MiB of it; 0 gives "".
func CString(p uintptr) string { return ccall.GoString(p) }

func addrOf[T any](p *T) uintptr { return uintptr(unsafe.Pointer(p)) }

var never bool

//lint:ignore U1000 written (never, in fact) so that escape's argument escapes
var sink any

// escape moves x to the heap: a uintptr conversion alone does not make the
// compiler keep an out-parameter off the stack.
func escape(x any) {
	if never {
		sink = x
	}
}
