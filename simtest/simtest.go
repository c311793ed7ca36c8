// Package simtest makes tests fail when they leave simulated device objects
// alive: memory, streams, events, pools, graphs and the rest that
// (*sim.GPU).Leaks reports, each named with the stack that created it.
//
// A test builds its simulator with New instead of sim.New; when the test and
// its own cleanups are done, every object still alive on that simulator is
// reported through t.Errorf with where it was created. A package's TestMain
// calls Main so that, after all its tests, any tracked simulator that still
// holds objects fails the run with a report on standard error:
//
//	func TestMain(m *testing.M) { os.Exit(simtest.Main(m)) }
//
// Creation stacks are recorded unless the configuration sets NoStacks; with
// NoStacks the reports still name each object, without its creation site.
package simtest

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/gpumem/gpumem/sim"
)

// registry holds the tracked simulators that have not yet been found clean,
// each with a label saying who made it.
var registry struct {
	mu   sync.Mutex
	gpus map[*sim.GPU]string
}

func track(g *sim.GPU, label string) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.gpus == nil {
		registry.gpus = map[*sim.GPU]string{}
	}
	registry.gpus[g] = label
}

func untrack(g *sim.GPU) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	delete(registry.gpus, g)
}

// New returns a simulator built from cfg whose leaks fail t. It calls
// t.Fatal when cfg is rejected. When t and all cleanups registered after
// this call have finished, New's cleanup waits for the simulator's queued
// work (Drain) and reports each object still alive with t.Errorf, naming
// where it was created. A simulator found leaking stays tracked, so Main
// reports it again if it still holds objects when every test has run.
func New(t testing.TB, cfg sim.Config) *sim.GPU {
	t.Helper()
	g, err := sim.New(cfg)
	if err != nil {
		t.Fatalf("simtest: sim.New: %v", err)
		return nil
	}
	track(g, "test "+t.Name())
	t.Cleanup(func() {
		t.Helper()
		if Check(t, g) {
			untrack(g)
		}
	})
	return g
}

// Tracked returns a simulator built from cfg that Main checks after every
// test has run, for code that has no testing.TB at hand (Example functions,
// package-level fixtures). The label Main prints names the caller of Tracked.
func Tracked(cfg sim.Config) (*sim.GPU, error) {
	g, err := sim.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("simtest: %w", err)
	}
	label := "simulator"
	if _, file, line, ok := runtime.Caller(1); ok {
		label = fmt.Sprintf("simulator made at %s:%d", file, line)
	}
	track(g, label)
	return g, nil
}

// Check waits for g's queued work and reports through t.Errorf each object
// still alive on g, with the stack that created it. It reports true when
// nothing leaked. Check works on any simulator, tracked or not.
func Check(t testing.TB, g *sim.GPU) bool {
	t.Helper()
	leaks := leaksOf(g)
	for _, l := range leaks {
		t.Errorf("simtest: leaked %s", l)
	}
	return len(leaks) == 0
}

// leaksOf lets queued work finish, when the simulator still runs, and then
// lists what is alive.
func leaksOf(g *sim.GPU) []string {
	_ = g.Drain() // a closed simulator refuses; what it holds is reported as is
	return g.Leaks()
}

// Main runs the tests of m and then checks every simulator made by New or
// Tracked that has not been found clean. It returns m.Run's exit code, or 1
// when the tests passed but a simulator still holds objects; each such
// object is written to standard error with where it was created. Use it
// from TestMain: os.Exit(simtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if report(os.Stderr) && code == 0 {
		code = 1
	}
	return code
}

// report writes every leak of the tracked simulators to w and says whether
// there was one. Clean simulators are dropped from the registry.
func report(w io.Writer) bool {
	registry.mu.Lock()
	type entry struct {
		g     *sim.GPU
		label string
	}
	var all []entry
	for g, label := range registry.gpus {
		all = append(all, entry{g, label})
	}
	registry.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].label < all[j].label })
	leaked := false
	for _, e := range all {
		leaks := leaksOf(e.g)
		if len(leaks) == 0 {
			untrack(e.g)
			continue
		}
		leaked = true
		fmt.Fprintf(w, "simtest: %s still holds %d objects after all tests:\n", e.label, len(leaks))
		for _, l := range leaks {
			fmt.Fprintf(w, "  %s\n", strings.ReplaceAll(l, "\n", "\n  "))
		}
	}
	return leaked
}
