package sim_test

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
	_ "github.com/gpumem/gpumem/sim"
)

// TestOpenFromEnvRefusal checks that gpumem.Open of the simulator, refused
// by its environment, returns a nil Backend with its error (not a nil
// *GPU inside a non-nil interface, whose Close would panic).
func TestOpenFromEnvRefusal(t *testing.T) {
	t.Setenv("GPUMEM_SIM_DEVICES", "1")
	t.Setenv("GPUMEM_SIM_CAPACITY", "18446744073709551615")
	b, err := gpumem.Open(gpumem.Options{Backend: "sim"})
	if !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Fatalf("Open with a capacity over the simulator's limit: %v, want ErrInvalidValue", err)
	}
	if b != nil {
		t.Errorf("Open failed but returned a non-nil Backend %T", b)
	}
}

// TestOpenWithALibrary: the simulator loads no library, and a path given
// for it is refused rather than ignored.
func TestOpenWithALibrary(t *testing.T) {
	b, err := gpumem.Open(gpumem.Options{Backend: "sim", Library: "/nonexistent.so"})
	if !errors.Is(err, gpumem.ErrInvalidValue) || b != nil {
		t.Errorf("Open of the simulator with a library: %v, %v; want ErrInvalidValue", b, err)
	}
}
