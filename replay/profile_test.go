package replay

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
)

func TestProfilerCountsTheLoop(t *testing.T) {
	g := newFakeGPU(1 << 30)
	p, err := NewProfiler(g)
	if err != nil {
		t.Fatal(err)
	}
	// A Malloc before the replay is not part of its loop.
	if _, err := p.Malloc(0, 512); err != nil {
		t.Fatal(err)
	}
	a := newPassAlloc(p)
	res, err := Run(p, mustTrace(t, small), a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Backend != "fake" {
		t.Errorf("backend %q: the profiler must report the wrapped backend's name", res.Backend)
	}
	byOp := map[string]OpProfile{}
	for _, o := range res.Profile {
		byOp[o.Op] = o
	}
	// The pass-through allocator mallocs each allocation and frees each free
	// within the loop; Close frees the rest after it.
	if m := byOp["Malloc"]; m.Calls != int64(res.Pairs) || m.TotalNs < m.MaxNs || m.MaxNs < 0 {
		t.Errorf("Malloc %+v, want %d calls", m, res.Pairs)
	}
	if f := byOp["Free"]; f.Calls != int64(res.Pairs-res.LiveAtEnd) {
		t.Errorf("Free %+v, want %d calls", f, res.Pairs-res.LiveAtEnd)
	}
	if len(res.Profile) != 2 {
		t.Errorf("profile %+v: only Malloc and Free were called", res.Profile)
	}
	var buf bytes.Buffer
	WriteProfile(&buf, res.Profile, 1e6)
	if out := buf.String(); !strings.Contains(out, "Malloc") || !strings.Contains(out, "backend total") || !strings.Contains(out, "%") {
		t.Errorf("table:\n%s", out)
	}
	p.Reset()
	if got := p.Profile(); len(got) != 0 {
		t.Errorf("after Reset: %+v", got)
	}
}

func TestRunWithoutProfilerHasNoProfile(t *testing.T) {
	g := newFakeGPU(1 << 30)
	res, err := Run(g, mustTrace(t, small), newPassAlloc(g), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Profile != nil {
		t.Errorf("profile %+v without a profiler", res.Profile)
	}
}

func TestNewProfilerNil(t *testing.T) {
	if _, err := NewProfiler(nil); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("err %v", err)
	}
}
