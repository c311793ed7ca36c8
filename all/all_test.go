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

// The registrations carry what Open and the command-line tool used to know
// by name: each vendor's library variable, auto's order (CUDA, then HIP,
// never the simulator) and the symbol reports.
func TestRegistrations(t *testing.T) {
	var auto []string
	for _, r := range gpumem.AutoOrder() {
		auto = append(auto, r.Name)
	}
	if !slices.Equal(auto, []string{"cuda", "hip"}) {
		t.Errorf("auto order %v, want [cuda hip]", auto)
	}
	for name, env := range map[string]string{"cuda": "GPUMEM_CUDA_LIBRARY", "hip": "GPUMEM_HIP_LIBRARY", "sim": ""} {
		r, ok := gpumem.Lookup(name)
		if !ok {
			t.Fatalf("%s not registered", name)
		}
		if r.LibraryEnv != env {
			t.Errorf("%s: library variable %q, want %q", name, r.LibraryEnv, env)
		}
		if (r.Symbols != nil) != (name != "sim") {
			t.Errorf("%s: has a symbol report: %v", name, r.Symbols != nil)
		}
	}
}
