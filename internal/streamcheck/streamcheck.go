// Package streamcheck is the allocators' one way to ask whether a stream
// handle is live: in process when the backend is a gpumem.StreamChecker (the
// native backends and the simulator are, and they never hand a handle they
// know is dead to the vendor library), else by asking the backend.
package streamcheck

import (
	"errors"

	"github.com/gpumem/gpumem"
)

// Check returns nil when s is a live stream of its device and b is open, an
// error matching gpumem.ErrInvalidValue for a handle that is not a live
// stream, and one matching gpumem.ErrClosed for a closed backend. A backend
// that is not a StreamChecker is asked s's capture status, the cheapest
// question of a vendor library.
func Check(b gpumem.Backend, s gpumem.Stream) error {
	if sc, ok := b.(gpumem.StreamChecker); ok {
		return sc.CheckStream(s)
	}
	_, err := b.StreamCaptureInfo(s)
	return err
}

// Gone reports whether s is no longer a stream b knows (destroyed, or never
// made): it then has no pending work that a free must wait for.
func Gone(b gpumem.Backend, s gpumem.Stream) bool {
	var err error
	if sc, ok := b.(gpumem.StreamChecker); ok {
		err = sc.CheckStream(s)
	} else {
		_, err = b.StreamQuery(s)
	}
	return errors.Is(err, gpumem.ErrInvalidValue)
}
