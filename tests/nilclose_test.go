package tests

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/blas"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/collective"
	"github.com/gpumem/gpumem/deferrable"
	"github.com/gpumem/gpumem/kernel"
	"github.com/gpumem/gpumem/managed"
	"github.com/gpumem/gpumem/rtc"
	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/telemetry"
)

// Close on the nil result of a failed constructor (a deferred Close after
// an error not checked in time) is an error matching ErrInvalidValue, for
// every allocator and binding, never a panic.
func TestCloseOfNil(t *testing.T) {
	for name, c := range map[string]interface{ Close() error }{
		"caching":    (*caching.Allocator)(nil),
		"asyncpool":  (*asyncpool.Allocator)(nil),
		"managed":    (*managed.Allocator)(nil),
		"deferrable": (*deferrable.Manager)(nil),
		"blas":       (*blas.Handle)(nil),
		"collective": (*collective.Comm)(nil),
		"kernel":     (*kernel.Launcher)(nil),
		"rtc":        (*rtc.Compiler)(nil),
		"telemetry":  (*telemetry.Telemetry)(nil),
		"sim":        (*sim.GPU)(nil),
	} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: Close of nil panicked: %v", name, r)
				}
			}()
			if err := c.Close(); !errors.Is(err, gpumem.ErrInvalidValue) {
				t.Errorf("%s: Close of nil: %v, want ErrInvalidValue", name, err)
			}
		}()
	}
}
