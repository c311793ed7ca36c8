package caching_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/sim"
)

// The README's embedding example, run on the simulator: what it prints is
// what the README says it prints.
func TestREADMEEmbeddingExample(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "alloc.Allocate(64<<20, s)") || !strings.Contains(string(readme), "caching.New(b, caching.DefaultOptions())") {
		t.Fatal("the README's example changed: update this test")
	}
	b := sim.NewDefault()
	defer b.Close()
	alloc, err := caching.New(b, caching.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer alloc.Close()
	s, err := b.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.StreamDestroy(s)
	p, err := alloc.Allocate(64<<20, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := alloc.Deallocate(p, s); err != nil {
		t.Fatal(err)
	}
	st := alloc.Stats(0)
	got := fmt.Sprintln("reserved", gpumem.FormatBytes(uint64(st.ReservedBytes[gpumem.StatAll].Current)),
		"peak allocated", gpumem.FormatBytes(uint64(st.AllocatedBytes[gpumem.StatAll].Peak)))
	if claim := "It prints `" + strings.TrimSpace(got) + "`"; !strings.Contains(string(readme), claim) {
		t.Errorf("the example prints %q; the README does not say %q", strings.TrimSpace(got), claim)
	}
}
