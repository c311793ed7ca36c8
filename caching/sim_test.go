package caching

import (
	"errors"
	"math/rand"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/simtest"
)

func newSim(t testing.TB, capacity uint64, manual bool) (*sim.GPU, [4]gpumem.Stream) {
	t.Helper()
	g := simtest.New(t, sim.Config{Devices: []sim.DeviceConfig{{Capacity: capacity}}, Manual: manual, NoStacks: !testing.Verbose()})
	var ss [4]gpumem.Stream
	for i := range ss {
		s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
		if err != nil {
			t.Fatal(err)
		}
		ss[i] = s
	}
	return g, ss
}

// closeSim destroys the streams and checks that nothing leaked and that no
// stream touched memory unsafely.
func closeSim(t testing.TB, g *sim.GPU, ss [4]gpumem.Stream) {
	t.Helper()
	_ = g.Drain()
	for _, s := range ss {
		if err := g.StreamDestroy(s); err != nil {
			t.Error(err)
		}
	}
	if v := g.Violations(); len(v) != 0 {
		t.Errorf("violations: %v", v)
	}
	if l := g.Leaks(); len(l) != 0 {
		t.Errorf("leaks: %v", l)
	}
}

func TestRulesSim(t *testing.T) {
	for _, c := range ruleCases {
		t.Run(c.name, func(t *testing.T) {
			g, ss := newSim(t, 1<<34, false)
			runRule(t, c, g, ss)
			closeSim(t, g, ss)
		})
	}
}

// A block used on stream B is not reused until B passes the event recorded
// at its free (sim Manual mode: nothing runs until stepped).
func TestDeferredFreeRecordStream(t *testing.T) {
	g, ss := newSim(t, 1<<30, true)
	a, err := New(g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	A, B := ss[0], ss[1]
	p, _ := a.Allocate(4096, A)
	if err := g.Launch(B, p, 4096, func(mem []byte) { mem[0] = 1 }); err != nil {
		t.Fatal(err)
	}
	if err := a.RecordStream(p, B); err != nil {
		t.Fatal(err)
	}
	if err := a.Deallocate(p, A); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(0); st.PendingReleaseBytes != 4096 || st.Active[0].Current != 1 || st.Allocation[0].Current != 0 {
		t.Errorf("pending %d active %d allocation %d", st.PendingReleaseBytes, st.Active[0].Current, st.Allocation[0].Current)
	}
	q, _ := a.Allocate(4096, A)
	if q == p {
		t.Fatal("memory reused while stream B may still use it")
	}
	checkInvariants(t, a)
	for g.Step(B) {
	}
	r, _ := a.Allocate(4096, A)
	if r != p {
		t.Errorf("after B passed its event: got %#x, want the freed %#x", r, p)
	}
	checkInvariants(t, a)
	_ = a.Deallocate(q, A)
	_ = a.Deallocate(r, A)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	closeSim(t, g, ss)
}

// Cross-stream reuse: a block freed on A is reused on B after B waits for A.
func TestCrossStreamReuseSim(t *testing.T) {
	g, ss := newSim(t, 1<<30, true)
	a, err := New(g, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	A, B := ss[0], ss[1]
	p, _ := a.Allocate(5<<20, A)
	_ = g.Launch(A, p, 5<<20, func(mem []byte) { mem[0] = 1 })
	_ = a.Deallocate(p, A)
	q, err := a.Allocate(5<<20, B)
	if err != nil || q != p {
		t.Fatalf("got %#x (%v), want A's cached %#x", q, err, p)
	}
	_ = g.Launch(B, q, 5<<20, func(mem []byte) { mem[1] = 2 })
	if st := a.Stats(0); st.CrossStreamReuses != 1 || st.Segment[0].Current != 1 {
		t.Errorf("reuses %d segments %d", st.CrossStreamReuses, st.Segment[0].Current)
	}
	_ = a.Deallocate(q, B)       // returns to A's pool once B passes its event
	r, _ := a.Allocate(5<<20, A) // not yet: B has not run
	if r == p {
		t.Fatal("A reused the block before B finished with it")
	}
	if err := g.Drain(); err != nil {
		t.Fatal(err)
	}
	_ = a.Deallocate(r, A)
	checkInvariants(t, a)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	closeSim(t, g, ss)
}

func TestOutOfMemorySim(t *testing.T) {
	g, ss := newSim(t, 64<<20, false)
	a, err := New(g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := ss[0]
	var ps []gpumem.Ptr
	for i := 0; i < 3; i++ {
		p, err := a.Allocate(12<<20, s)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	for _, p := range ps {
		_ = a.Deallocate(p, s)
	}
	p, err := a.Allocate(40<<20, s) // needs the cached 12 MiB segments returned
	if err != nil || a.Stats(0).NumAllocRetries != 1 {
		t.Fatalf("retry: %v, %d retries", err, a.Stats(0).NumAllocRetries)
	}
	_, err = a.Allocate(40<<20, s)
	var oom *gpumem.OutOfMemoryError
	if !errors.As(err, &oom) || !errors.Is(err, gpumem.ErrOutOfMemory) || oom.Capacity != 64<<20 {
		t.Fatalf("want an OOM error, got %v", err)
	}
	t.Log(oom)
	_ = a.Deallocate(p, s)
	_ = a.Close()
	closeSim(t, g, ss)
}

func TestExpandableSim(t *testing.T) {
	g, ss := newSim(t, 1<<30, false)
	a, err := New(g, Options{ExpandableSegments: true})
	if err != nil {
		t.Fatal(err)
	}
	if on, why := a.ExpandableActive(); !on {
		t.Fatal(why)
	}
	s := ss[0]
	p1, err := a.Allocate(30<<20, s)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := a.Allocate(30<<20, s)
	if err != nil {
		t.Fatal(err)
	}
	if p2 != p1+30<<20 {
		t.Errorf("segment did not grow in place")
	}
	_ = g.Launch(s, p2, 30<<20, func(mem []byte) { mem[len(mem)-1] = 1 })
	_ = a.Deallocate(p1, s)
	_ = a.EmptyCache()
	if r := a.Stats(0).ReservedBytes[0].Current; r != 40<<20 {
		t.Errorf("reserved %d after unmapping, want 40 MiB", r)
	}
	checkInvariants(t, a)
	_ = a.Deallocate(p2, s)
	_ = a.Close()
	closeSim(t, g, ss)

	g2, ss2 := newSim(t, 1<<30, false)
	_ = g2
	gNo := simtest.New(t, sim.Config{Devices: []sim.DeviceConfig{{Capacity: 1 << 30, NoVMM: true}}})
	var msgs int
	b, _ := New(gNo, Options{ExpandableSegments: true, Logf: func(string, ...any) { msgs++ }})
	if on, why := b.ExpandableActive(); on || msgs != 1 {
		t.Errorf("no VMM: active %v (%s), %d messages", on, why, msgs)
	}
	if p, err := b.Allocate(1<<20, gpumem.Stream{}); err != nil {
		t.Error(err)
	} else {
		_ = b.Deallocate(p, gpumem.Stream{})
	}
	_ = b.Close()
	if l := gNo.Leaks(); len(l) != 0 {
		t.Error(l)
	}
	closeSim(t, g2, ss2)
}

func TestCaptureSim(t *testing.T) {
	g, ss := newSim(t, 1<<30, false)
	a, err := New(g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, other := ss[0], ss[1]
	warm, _ := a.Allocate(4096, other)
	_ = a.Deallocate(warm, other)
	if err := g.StreamBeginCapture(s, gpumem.CaptureModeRelaxed); err != nil {
		t.Fatal(err)
	}
	id, err := a.BeginCapture(s, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := a.Allocate(4096, s)
	if p == warm {
		t.Fatal("capture allocation came from the default pool")
	}
	q, _ := a.Allocate(4096, other) // not captured: default pool
	if q != warm {
		t.Errorf("uncaptured stream got %#x, want the default pool's %#x", q, warm)
	}
	_ = a.Deallocate(p, s)
	graph, err := g.StreamEndCapture(s)
	if err != nil {
		t.Fatal(err)
	}
	_ = a.EndCapture(s)
	segs := a.Stats(0).Segment[0].Current
	_ = g.GraphDestroy(graph)
	_ = a.ReleasePool(id)
	if got := a.Stats(0).Segment[0].Current; got != segs-1 {
		t.Errorf("segments %d after releasing the pool, want %d", got, segs-1)
	}
	_ = a.Deallocate(q, other)
	checkInvariants(t, a)
	_ = a.Close()
	closeSim(t, g, ss)
}

// TestRandomSim: random operations with kernels touching the memory and
// injected backend failures; invariants after every operation; no leak and
// no violation on the simulator.
func TestRandomSim(t *testing.T) {
	for _, c := range []struct {
		name string
		opts Options
	}{{"default", DefaultOptions()}, {"expandable", expandableOptions()}, {"pytorch", Options{}}} {
		t.Run(c.name, func(t *testing.T) {
			g, ss := newSim(t, 256<<20, false)
			g.InjectFault("Malloc", 5, nil)
			g.InjectFault("EventRecord", 2, nil)
			g.InjectFault("MemCreate", 4, nil)
			g.InjectFault("MemMap", 6, nil)
			a, err := New(g, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewSource(3))
			type liveAlloc struct {
				p gpumem.Ptr
				n uint64
				s gpumem.Stream
			}
			var live []liveAlloc
			n := 600
			if raceOn {
				n = 150
			}
			for i := 0; i < n; i++ {
				if r := rng.Intn(10); r < 5 || len(live) == 0 {
					n := uint64(rng.Intn(3<<20) + 1)
					s := ss[rng.Intn(4)]
					p, err := a.Allocate(n, s)
					if err != nil {
						continue
					}
					_ = g.Launch(s, p, n, func(mem []byte) { mem[0]++ })
					live = append(live, liveAlloc{p, n, s})
				} else {
					k := rng.Intn(len(live))
					l := live[k]
					live = append(live[:k], live[k+1:]...)
					if rng.Intn(3) == 0 {
						u := ss[rng.Intn(4)]
						_ = g.Launch(u, l.p, l.n, func(mem []byte) { mem[0]++ })
						_ = a.RecordStream(l.p, u)
					}
					_ = a.Deallocate(l.p, l.s)
				}
				checkInvariants(t, a)
			}
			g.ClearFaults()
			for _, l := range live {
				_ = a.Deallocate(l.p, l.s)
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			closeSim(t, g, ss)
		})
	}
}

// replayBackend returns the simulator traces replay on (140 GiB, as an
// H200) and four non-blocking streams, as the GPU anchor uses.
func replayBackend(t testing.TB) (gpumem.Backend, [4]gpumem.Stream) {
	g, ss := newSim(t, sim.DefaultCapacity, false)
	t.Cleanup(func() { closeSim(t, g, ss) })
	return g, ss
}
