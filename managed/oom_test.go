package managed

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/oomhooks"
	"github.com/gpumem/gpumem/sim"
)

// A handler that frees nothing but always asks for another attempt is
// asked oomhooks.MaxAttempts times (attempts 0 to MaxAttempts-1), then the
// allocation fails and observers are told once, in the managed allocator's
// terms.
func TestOOMHandlerBounded(t *testing.T) {
	_, a := setup(t, sim.Config{}, Options{})
	var attempts []int
	a.SetOOMHandler(func(dev int, n uint64, attempt int) bool {
		attempts = append(attempts, attempt)
		return true
	})
	var seen []*gpumem.OutOfMemoryError
	a.AddOOMObserver(func(e *gpumem.OutOfMemoryError) { seen = append(seen, e) })
	if _, err := a.Allocate(200<<30, s0); !errors.Is(err, gpumem.ErrOutOfMemory) {
		t.Fatalf("huge allocation: %v, want out of memory", err)
	}
	if err := oomhooks.CheckAttempts(attempts); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0].Allocator != "managed" {
		t.Errorf("observers saw %v", seen)
	}
	// Without a handler the allocation fails at once.
	a.SetOOMHandler(nil)
	attempts = nil
	if _, err := a.Allocate(200<<30, s0); !errors.Is(err, gpumem.ErrOutOfMemory) || len(attempts) != 0 {
		t.Fatalf("without a handler: %v, %d attempts", err, len(attempts))
	}
}
