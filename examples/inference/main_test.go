package main

import (
	"bytes"
	"encoding/json"
	"expvar"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/simtest"
)

func TestMain(m *testing.M) { os.Exit(simtest.Main(m)) }

type result struct {
	served, reduced, shed, ooms int
	stdout, stderr              string
}

// runSim runs the program on a simulator that fails the test if anything
// (memory, streams, events) is left alive or used after free.
func runSim(t *testing.T, args ...string) result {
	t.Helper()
	var gpus []*sim.GPU
	old := newSim
	newSim = func(cfg sim.Config) (*sim.GPU, error) {
		g := simtest.New(t, cfg)
		gpus = append(gpus, g)
		return g, nil
	}
	t.Cleanup(func() { newSim = old })
	t.Setenv("GPUMEM_ALLOC_CONF", "")
	var stdout, stderr bytes.Buffer
	if err := run(append([]string{"-sim"}, args...), &stdout, &stderr); err != nil {
		t.Fatalf("run %v: %v\n%s", args, err, stderr.String())
	}
	if len(gpus) != 1 {
		t.Fatalf("%d simulators made", len(gpus))
	}
	if v := gpus[0].Violations(); len(v) != 0 {
		t.Errorf("the simulator saw %d violations: %v", len(v), v)
	}
	var r result
	line, _, _ := strings.Cut(stdout.String(), "\n")
	if _, err := fmt.Sscanf(line, "requests: %d served (%d at half batch), %d shed, %d out-of-memory errors",
		&r.served, &r.reduced, &r.shed, &r.ooms); err != nil {
		t.Fatalf("first line %q: %v", line, err)
	}
	for _, want := range []string{"requested", "allocated", "reserved", "device allocations"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("statistics table lacks %q:\n%s", want, stdout.String())
		}
	}
	r.stdout, r.stderr = stdout.String(), stderr.String()
	if !strings.Contains(r.stderr, "running on the simulator") {
		t.Errorf("the simulator is not announced: %q", r.stderr)
	}
	if got := strings.Count(r.stderr, "out of memory on device 0"); got != r.ooms {
		t.Errorf("the OOM observer logged %d failures, the summary counts %d", got, r.ooms)
	}
	return r
}

func TestServesAll(t *testing.T) {
	r := runSim(t, "-requests", "6")
	if r.served != 6 || r.shed != 0 || r.reduced != 0 || r.ooms != 0 {
		t.Errorf("plenty of memory: %+v", r)
	}
	// The allocator was published through expvar while the program ran.
	v := expvar.Get("gpumem")
	if v == nil {
		t.Fatal("no expvar gpumem")
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(v.String()), &m); err != nil {
		t.Errorf("expvar gpumem: %v", err)
	}
}

// A device too small for a full batch (32 MiB of KV cache and the
// activations' 20 MiB segment) but big enough for half: every request fails
// once, empties the cache and is served at half batch.
func TestOutOfMemoryRetriesSmaller(t *testing.T) {
	const n = 3
	r := runSim(t, "-capacity-mib", "48", "-concurrency", "1", "-requests", fmt.Sprint(n))
	if r.served != n || r.reduced != n || r.shed != 0 || r.ooms < n {
		t.Errorf("48 MiB device: %+v", r)
	}
	if !strings.Contains(r.stdout, "PyTorch CUDA memory summary, device ID 0") || !strings.Contains(r.stdout, "CUDA OOMs: "+fmt.Sprint(r.ooms)) {
		t.Errorf("no memory summary after out-of-memory errors:\n%s", r.stdout)
	}
}

// -summary prints the memory summary; without it and without an
// out-of-memory error there is none.
func TestSummaryOnDemand(t *testing.T) {
	if r := runSim(t, "-requests", "1"); strings.Contains(r.stdout, "memory summary") {
		t.Errorf("summary printed unasked:\n%s", r.stdout)
	}
	r := runSim(t, "-requests", "1", "-summary")
	if !strings.Contains(r.stdout, "| Allocated memory      |") || !strings.Contains(r.stdout, "from small pool") {
		t.Errorf("-summary printed no summary:\n%s", r.stdout)
	}
}

// The same through the memory fraction on a large device.
func TestFractionCapsMemory(t *testing.T) {
	r := runSim(t, "-fraction", "0.0003", "-concurrency", "1", "-requests", "2") // about 43 MiB of 140 GiB
	if r.served != 2 || r.reduced != 2 || r.ooms < 2 || !strings.Contains(r.stderr, "limit: 43") {
		t.Errorf("fraction 0.0003: %+v", r)
	}
}

// A device smaller than even half a batch sheds every request.
func TestShedsWhenNothingFits(t *testing.T) {
	r := runSim(t, "-capacity-mib", "8", "-requests", "4")
	if r.served != 0 || r.shed != 4 || r.ooms < 8 {
		t.Errorf("8 MiB device: %+v", r)
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-requests", "0"}, {"-batch", "-1"}, {"-nosuch"}} {
		var out, errb bytes.Buffer
		if err := run(append([]string{"-sim"}, args...), &out, &errb); err == nil {
			t.Errorf("run %v: no error", args)
		}
	}
}

// An -http address that cannot be listened on fails the run at once
// instead of blocking forever at the end.
func TestHTTPCannotListen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip("no loopback:", err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		var out, errb bytes.Buffer
		done <- run([]string{"-sim", "-capacity-mib", "2048", "-requests", "1", "-http", ln.Addr().String()}, &out, &errb)
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "-http") {
			t.Fatalf("run: %v, want an -http error", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run with an address in use did not return")
	}
}
