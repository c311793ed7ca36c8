package managed

import (
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/allocatortest"
)

// After the backend is closed, a cached block is not handed out: every
// allocation is ErrClosed, as the backend's own calls are.
func TestBackendClosedIsClosed(t *testing.T) {
	allocatortest.BackendClosed(t, func(t *testing.T, b gpumem.Backend) gpumem.Allocator {
		o := DefaultOptions()
		o.Force = true
		a, err := New(b, o)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}, 1<<20)
}
