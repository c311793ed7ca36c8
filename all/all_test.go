package all_test

import (
	"slices"
	"testing"

	"github.com/gpumem/gpumem"
	_ "github.com/gpumem/gpumem/all"
)

func TestEveryBackendRegistered(t *testing.T) {
	got := gpumem.Registered()
	for _, want := range []string{"cuda", "hip", "sim"} {
		if !slices.Contains(got, want) {
			t.Errorf("backend %q not registered (have %v)", want, got)
		}
	}
}
