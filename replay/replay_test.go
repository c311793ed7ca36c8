package replay

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/fakegpu"
	"github.com/gpumem/gpumem/trace"
)

func mustTrace(t *testing.T, s string) *trace.Trace {
	t.Helper()
	tr, err := trace.Read(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	tr.Name = "test"
	return tr
}

const small = `a 1 1000 0
a 2 3000 1
f 1 0
a 3 500 0
f 2 0
a 4 7000 2
a 5 100 5
f 4 2
f 3 1
`

func TestRunPeaksAndCounts(t *testing.T) {
	for name, mk := range map[string]func(g *fakegpu.GPU) gpumem.Allocator{
		"pass": func(g *fakegpu.GPU) gpumem.Allocator { return newPassAlloc(g) },
	} {
		t.Run(name, func(t *testing.T) {
			g := newFakeGPU(1 << 30)
			tr := mustTrace(t, small)
			a := mk(g)
			res, err := Run(g, tr, a, Options{Allocator: "pass", Conf: "x:y"})
			if err != nil {
				t.Fatal(err)
			}
			if res.Pairs != 5 || res.Events != 9 || res.PeakRequested != 7600 || res.PeakReserved != 7600 ||
				res.Overhead != 1 || res.DeviceAllocs != 5 || res.LiveAtEnd != 1 || res.OOMs != 0 {
				t.Fatalf("result %+v", res)
			}
			if res.PeakRequested != tr.Stats().PeakRequested {
				t.Fatalf("peak requested %d, trace says %d", res.PeakRequested, tr.Stats().PeakRequested)
			}
			if res.Trace != "test" || res.Allocator != "pass" || res.Backend != "fake" || res.Conf != "x:y" || res.Device != "Fake GPU 0" {
				t.Fatalf("labels %+v", res)
			}
			if res.NsPerPair < 0 {
				t.Fatalf("ns_per_pair %v", res.NsPerPair)
			}
			// Close released the live allocation, and the streams are gone.
			if g.Allocations() != 0 || g.Streams() != 0 {
				t.Fatalf("left %d allocations and %d streams", g.Allocations(), g.Streams())
			}
			last := res.Timeline[len(res.Timeline)-1]
			if res.Timeline[0].Event != 0 || last.Event != 9 {
				t.Fatalf("timeline %+v", res.Timeline)
			}
		})
	}
}

// Frees on another stream than the allocation's are recorded on the free's
// stream, then deallocated on the allocation's stream (fakegpu.Pass rejects any
// other stream).
func TestRunCrossStream(t *testing.T) {
	g := newFakeGPU(1 << 30)
	a := newPassAlloc(g)
	if _, err := Run(g, mustTrace(t, small), a, Options{}); err != nil {
		t.Fatal(err)
	}
	// f 1 0 same; f 2 0 cross (1→0); f 4 2 same; f 3 1 cross (0→1).
	if a.Records() != 2 {
		t.Fatalf("%d RecordStream calls, want 2", a.Records())
	}
}

func TestRunStreamsWrap(t *testing.T) {
	g := newFakeGPU(1 << 30)
	a := newPassAlloc(g)
	// Stream 4 is stream 0 modulo 4: no record.
	if _, err := Run(g, mustTrace(t, "a 1 10 0\nf 1 4\n"), a, Options{}); err != nil {
		t.Fatal(err)
	}
	if a.Records() != 0 {
		t.Fatalf("%d records", a.Records())
	}
}

func TestRunOOMContinues(t *testing.T) {
	g := newFakeGPU(10000)
	a := newPassAlloc(g)
	tr := mustTrace(t, "a 1 6000 0\na 2 6000 0\na 3 3000 0\nf 2 0\nf 1 0\na 4 9000 1\nf 4 1\nf 3 0\n")
	res, err := Run(g, tr, a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.OOMs != 2 || res.Pairs != 4 || res.PeakReserved != 9000 {
		t.Fatalf("result %+v", res)
	}
	if res.PeakRequested != 9000 {
		t.Fatalf("peak requested counts only what was granted: %d", res.PeakRequested)
	}
	// A point after every event (eight here) and one before them: an
	// allocation that fails is sampled like any other event.
	if len(res.Timeline) != 9 {
		t.Fatalf("%d timeline points, want 9: %+v", len(res.Timeline), res.Timeline)
	}
}

type failAlloc struct {
	*fakegpu.Pass
	err error
}

func (f failAlloc) Deallocate(p gpumem.Ptr, s gpumem.Stream) error { return f.err }

func TestRunStopsOnOtherErrors(t *testing.T) {
	g := newFakeGPU(1 << 30)
	boom := errors.New("boom")
	_, err := Run(g, mustTrace(t, small), failAlloc{newPassAlloc(g), boom}, Options{})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "event 3") {
		t.Fatalf("err = %v", err)
	}
	if g.Streams() != 0 {
		t.Fatal("streams leaked after a failed replay")
	}
}

func TestRunBadInputs(t *testing.T) {
	g := newFakeGPU(1 << 30)
	if _, err := Run(nil, mustTrace(t, small), newPassAlloc(g), Options{}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("nil backend: %v", err)
	}
	if _, err := Run(g, nil, newPassAlloc(g), Options{}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("nil trace: %v", err)
	}
	if _, err := Run(g, mustTrace(t, small), nil, Options{}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("nil allocator: %v", err)
	}
	a := newPassAlloc(g)
	if _, err := Run(g, mustTrace(t, small), a, Options{Device: 3}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("bad device: %v", err)
	}
	if !a.Closed() {
		t.Error("allocator not closed after a refused replay")
	}
	bad := &trace.Trace{Name: "bad", Events: []trace.Event{{ID: 9}}}
	if _, err := Run(g, bad, newPassAlloc(g), Options{}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("invalid trace: %v", err)
	}
}

func TestTimelineBound(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 5000; i++ {
		b.WriteString("a " + itoa(i) + " 4096 0\n")
		if i%3 == 0 {
			b.WriteString("f " + itoa(i) + " 0\n")
		}
	}
	tr := mustTrace(t, b.String())
	for _, n := range []int{0, 100, 2, -1} {
		g := newFakeGPU(1 << 40)
		res, err := Run(g, tr, newPassAlloc(g), Options{TimelinePoints: n})
		if err != nil {
			t.Fatal(err)
		}
		limit := n
		if n == 0 {
			limit = DefaultTimelinePoints
		}
		if n < 0 {
			if len(res.Timeline) != 0 {
				t.Fatalf("TimelinePoints %d: %d points", n, len(res.Timeline))
			}
		} else if len(res.Timeline) > limit || len(res.Timeline) < limit/2 {
			t.Fatalf("TimelinePoints %d: %d points", n, len(res.Timeline))
		}
		var peak uint64
		for _, p := range res.Timeline {
			peak = max(peak, p.Reserved)
		}
		if n >= 0 && peak != res.PeakReserved {
			t.Fatalf("TimelinePoints %d: timeline peak %d, result %d", n, peak, res.PeakReserved)
		}
		if res.PeakReserved != tr.Stats().PeakRequested {
			t.Fatalf("peak %d, floor %d", res.PeakReserved, tr.Stats().PeakRequested)
		}
	}
}

func itoa(i int) string {
	var buf [20]byte
	n := len(buf)
	for {
		n--
		buf[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			return string(buf[n:])
		}
	}
}

// The shared gpt2 trace through the pass-through allocator: peak reserved is
// the README's floor, to the byte.
func TestSharedTraceFloor(t *testing.T) {
	p := filepath.Join("..", "..", "shared", "traces", "gpt2.trace.gz")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("the shared traces are not beside the repository (%v); CI provides them", err)
	}
	tr, err := trace.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	g := newFakeGPU(140 << 30)
	res, err := Run(g, tr, newPassAlloc(g), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.PeakRequested != 13271941480 || res.PeakReserved != 13271941480 || res.Pairs != 34219 {
		t.Fatalf("result %+v", res)
	}
}

// setupAlloc records when Setup is called: the replay sets the device up
// before its first allocation, and a failed setup fails the replay.
type setupAlloc struct {
	*fakegpu.Pass
	setups    []int
	allocated bool // an allocation came before Setup
	fail      error
}

func (a *setupAlloc) Setup(dev int) error {
	a.setups = append(a.setups, dev)
	a.allocated = a.Live() > 0 || a.Stats(dev).NumDeviceAlloc > 0
	return a.fail
}

func TestRunSetsUpBeforeTheLoop(t *testing.T) {
	tr := &trace.Trace{Name: "t", Events: []trace.Event{
		{Alloc: true, ID: 1, Size: 4096}, {ID: 1},
	}}
	g := newFakeGPU(1 << 30)
	a := &setupAlloc{Pass: newPassAlloc(g)}
	if _, err := Run(g, tr, a, Options{}); err != nil {
		t.Fatal(err)
	}
	if len(a.setups) != 1 || a.setups[0] != 0 || a.allocated {
		t.Fatalf("Setup calls %v (after an allocation: %v); want one, for device 0, before the loop", a.setups, a.allocated)
	}
	g = newFakeGPU(1 << 30)
	a = &setupAlloc{Pass: newPassAlloc(g), fail: gpumem.ErrNoDevice}
	if _, err := Run(g, tr, a, Options{}); !errors.Is(err, gpumem.ErrNoDevice) {
		t.Fatalf("Run with a failing Setup: %v", err)
	}
	if n := a.Stats(0).NumDeviceAlloc; n != 0 {
		t.Fatalf("%d allocations after a failed Setup", n)
	}
}
