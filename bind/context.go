package bind

import (
	"fmt"
	"sync/atomic"

	"github.com/gpumem/gpumem"
)

// Context is a device of a backend, as a call needs it current: the
// backend's make-current function (cuCtxSetCurrent with the device's
// primary context, or hipSetDevice with its ordinal) and its argument. The
// zero Context has no device.
type Context struct {
	fn, arg uintptr
	backend string
	dev     int
	closed  *atomic.Bool
}

// Device returns the device's ordinal.
func (c Context) Device() int { return c.dev }

// Backend returns the name of the backend the context came from.
func (c Context) Backend() string { return c.backend }

// currentFuncer is what a vendor backend answers for ContextOf.
type currentFuncer interface {
	// CurrentFunc returns the make-current function of device dev and its
	// argument, and the flag the backend sets when it is closed.
	CurrentFunc(dev int) (fn, arg uintptr, closed *atomic.Bool, err error)
}

// ContextOf returns device dev of backend b as a Context for CallOn and
// CheckOn. It fails with an error matching gpumem.ErrNotSupported for a
// backend that runs no C library (the simulator: its bindings are written
// in Go), and with one matching gpumem.ErrInvalidValue for a device out of
// range.
func ContextOf(b gpumem.Backend, dev int) (Context, error) {
	if b == nil {
		return Context{}, fmt.Errorf("gpumem: bind: nil backend: %w", gpumem.ErrInvalidValue)
	}
	cf, ok := b.(currentFuncer)
	if !ok {
		return Context{}, &gpumem.NotSupportedError{Backend: b.Name(), Op: "bind.ContextOf", Reason: "the backend calls no C library"}
	}
	fn, arg, closed, err := cf.CurrentFunc(dev)
	if err != nil {
		return Context{}, err
	}
	return Context{fn: fn, arg: arg, backend: b.Name(), dev: dev, closed: closed}, nil
}

// failed is the error for a make-current function that returned status r.
func (c Context) failed(r uintptr) error {
	if c.closed != nil && c.closed.Load() {
		return fmt.Errorf("gpumem: %s: backend is closed: %w", c.backend, gpumem.ErrClosed)
	}
	return fmt.Errorf("gpumem: %s: making device %d current failed with status %d: %w", c.backend, c.dev, int32(r), gpumem.ErrInvalidValue)
}
