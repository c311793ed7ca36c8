package sim_test

import (
	"strings"
	"testing"

	"github.com/gpumem/gpumem/sim"
)

// The creation stack of a leaked object starts at the code that created it.
func TestLeakStackNamesTheCreator(t *testing.T) {
	g := sim.NewDefault()
	p, err := g.Malloc(0, 100)
	if err != nil {
		t.Fatal(err)
	}
	s, err := g.StreamCreate(0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	q, err := g.MallocAsync(100, s)
	if err != nil {
		t.Fatal(err)
	}
	leaks := g.Leaks()
	if len(leaks) != 3 {
		t.Fatalf("%d leaks, want 3: %q", len(leaks), leaks)
	}
	for _, l := range leaks {
		lines := strings.Split(l, "\n")
		if len(lines) < 2 || !strings.Contains(lines[1], "TestLeakStackNamesTheCreator") {
			t.Errorf("leak report does not start at the creating test function:\n%s", l)
		}
	}
	_ = g.FreeAsync(q, s)
	_ = g.StreamDestroy(s)
	_ = g.Free(0, p)
	if l := g.Leaks(); len(l) != 0 {
		t.Errorf("leaks after freeing everything: %q", l)
	}
}
