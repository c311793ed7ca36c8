package replay

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/sim"
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

// A Profiler over a backend that checks streams in process is itself a
// StreamChecker, so that the caching allocator keeps its stream checks'
// answers and the profile shows no capture query per call; over one that
// cannot, each check is a timed StreamCaptureInfo, kept by nobody.
func TestProfilerPassesStreamChecks(t *testing.T) {
	g, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	p, err := NewProfiler(g)
	if err != nil {
		t.Fatal(err)
	}
	var sc gpumem.StreamChecker = p
	if sc.StreamEpoch() != g.StreamEpoch() {
		t.Error("the profiler's stream epoch is not the simulator's")
	}
	a, err := caching.New(p, caching.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		q, err := a.Allocate(1<<20, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Deallocate(q, s); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range p.Profile() {
		if o.Op == "StreamCaptureInfo" {
			t.Errorf("%d capture queries for 100 pairs on a backend that checks streams itself", o.Calls)
		}
	}

	f, err := NewProfiler(struct{ gpumem.Backend }{newFakeGPU(1 << 30)}) // no StreamChecker
	if err != nil {
		t.Fatal(err)
	}
	e0 := f.StreamEpoch().Load()
	for i := 0; i < 3; i++ {
		if err := f.CheckStream(gpumem.Stream{}); err != nil {
			t.Fatal(err)
		}
	}
	if f.StreamEpoch().Load() == e0 {
		t.Error("the stand-in epoch did not move: a cache would keep answers it cannot vouch for")
	}
	var asked int64
	for _, o := range f.Profile() {
		if o.Op == "StreamCaptureInfo" {
			asked = o.Calls
		}
	}
	if asked != 3 {
		t.Errorf("%d capture queries for 3 checks", asked)
	}
}
