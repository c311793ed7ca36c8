package simtest

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// fakeTB records what a test would report, so a deliberate leak can be
// checked without failing the real run.
type fakeTB struct {
	testing.TB
	name     string
	errs     []string
	cleanups []func()
}

func (f *fakeTB) Helper()      {}
func (f *fakeTB) Name() string { return f.name }
func (f *fakeTB) Errorf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

// finish runs the cleanups as the testing package does: last registered first.
func (f *fakeTB) finish() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

func isTracked(g *sim.GPU) bool {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	_, ok := registry.gpus[g]
	return ok
}

// leakOne allocates device memory and never frees it; its name is the
// allocation site the reports must show.
func leakOne(g *sim.GPU) (gpumem.Ptr, error) {
	return g.Malloc(0, 4096)
}

func TestLeakReportedWithAllocationSite(t *testing.T) {
	f := &fakeTB{TB: t, name: "TestFake"}
	g := New(f, sim.Config{})
	p, err := leakOne(g)
	if err != nil {
		t.Fatal(err)
	}
	f.finish()
	if len(f.errs) != 1 {
		t.Fatalf("got %d reports, want 1: %q", len(f.errs), f.errs)
	}
	msg := f.errs[0]
	for _, want := range []string{"simtest.leakOne", "simtest_test.go:", fmt.Sprintf("%#x", uint64(p))} {
		if !strings.Contains(msg, want) {
			t.Errorf("report lacks %q:\n%s", want, msg)
		}
	}
	if !isTracked(g) {
		t.Fatal("a leaking simulator was dropped before the final check")
	}

	// The final check names the test that made the simulator and the site.
	var buf bytes.Buffer
	if !report(&buf) {
		t.Fatalf("final check found nothing; wrote %q", buf.String())
	}
	out := buf.String()
	for _, want := range []string{"test TestFake", "simtest.leakOne", "simtest_test.go:"} {
		if !strings.Contains(out, want) {
			t.Errorf("final report lacks %q:\n%s", want, out)
		}
	}

	// Freed, the simulator is clean and leaves the registry.
	if err := g.Free(0, p); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if report(&buf) {
		t.Errorf("clean simulator reported: %s", buf.String())
	}
	if isTracked(g) {
		t.Error("clean simulator still tracked")
	}
}

func TestCleanSimulatorPasses(t *testing.T) {
	f := &fakeTB{TB: t, name: "TestClean"}
	g := New(f, sim.Config{})
	p, err := g.Malloc(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The test's own cleanups run before the leak check.
	f.Cleanup(func() {
		_ = g.Free(0, p)
		_ = g.StreamDestroy(s)
	})
	f.finish()
	if len(f.errs) != 0 {
		t.Errorf("clean test reported: %q", f.errs)
	}
	if isTracked(g) {
		t.Error("clean simulator still tracked")
	}
}

func TestStreamLeakReported(t *testing.T) {
	g, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0); err != nil {
		t.Fatal(err)
	}
	f := &fakeTB{TB: t, name: "TestStream"}
	if Check(f, g) || len(f.errs) != 1 || !strings.Contains(f.errs[0], "stream") {
		t.Errorf("stream leak not reported: %q", f.errs)
	}
}

func TestTracked(t *testing.T) {
	g, err := Tracked(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := g.Malloc(0, 512)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if !report(&buf) || !strings.Contains(buf.String(), "simtest_test.go:") {
		t.Errorf("tracked leak not reported with its maker: %q", buf.String())
	}
	if err := g.Free(0, p); err != nil {
		t.Fatal(err)
	}
	if _, err := Tracked(sim.Config{Devices: []sim.DeviceConfig{{Granularity: 3}}}); err == nil {
		t.Error("bad configuration accepted")
	}
}
