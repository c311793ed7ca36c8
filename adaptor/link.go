package adaptor

// See doc.go for an overview.

import (
	"fmt"
	"sync/atomic"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/nilcheck"
)

// link is what every adaptor shares: its upstream and whether it is closed.
type link struct {
	up     gpumem.Allocator
	name   string // "adaptor.Limit", ... for messages
	closed atomic.Bool
}

// checkUpstream refuses a nil upstream.
func checkUpstream(up gpumem.Allocator, name string) error {
	if nilcheck.Is(up) {
		return fmt.Errorf("%s: nil upstream: %w", name, gpumem.ErrInvalidValue)
	}
	return nil
}

// errClosed is the error of every call after Close.
func (l *link) errClosed() error {
	return fmt.Errorf("%s: closed: %w", l.name, gpumem.ErrClosed)
}

// errForeign is the error of a pointer the adaptor did not hand out.
func (l *link) errForeign(op string, p gpumem.Ptr) error {
	return fmt.Errorf("%s: %s of %#x: not allocated through this adaptor, or already freed: %w",
		l.name, op, uintptr(p), gpumem.ErrInvalidValue)
}

// errZero is the error of a zero-byte allocation, refused before the
// upstream is asked so that every adaptor reports it alike.
func (l *link) errZero() error {
	return fmt.Errorf("%s: zero-byte allocation: %w", l.name, gpumem.ErrInvalidValue)
}

// Upstream returns the allocator the adaptor wraps.
func (l *link) Upstream() gpumem.Allocator { return l.up }

// EmptyCache asks the upstream to return its unused cached memory; the
// adaptor caches nothing itself.
func (l *link) EmptyCache() error {
	if l.closed.Load() {
		return l.errClosed()
	}
	return l.up.EmptyCache()
}

// close marks the adaptor closed and closes the upstream, once: a second
// call returns nil.
func (l *link) close() error {
	if l.closed.Swap(true) {
		return nil
	}
	return l.up.Close()
}
