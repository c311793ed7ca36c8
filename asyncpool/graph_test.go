package asyncpool_test

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/sim"
)

// graphRun instantiates g, launches it `launches` times on s, waits, and
// destroys both the executable graph and g.
func (r *rig) graphRun(g gpumem.Graph, s gpumem.Stream, launches int) {
	r.t.Helper()
	ge, err := r.g.GraphInstantiate(g)
	if err != nil {
		r.t.Fatalf("GraphInstantiate: %v", err)
	}
	for i := 0; i < launches; i++ {
		if err := r.g.GraphLaunch(ge, s); err != nil {
			r.t.Fatalf("GraphLaunch %d: %v", i, err)
		}
	}
	r.graphDestroy(ge, g, s)
}

// graphDestroy waits for s, then destroys the executable graph ge and g.
func (r *rig) graphDestroy(ge gpumem.GraphExec, g gpumem.Graph, s gpumem.Stream) {
	r.t.Helper()
	if err := r.g.StreamSynchronize(s); err != nil {
		r.t.Fatalf("StreamSynchronize: %v", err)
	}
	if err := r.g.GraphExecDestroy(ge); err != nil {
		r.t.Fatalf("GraphExecDestroy: %v", err)
	}
	if err := r.g.GraphDestroy(g); err != nil {
		r.t.Fatalf("GraphDestroy: %v", err)
	}
}

func (r *rig) begin(s gpumem.Stream) {
	r.t.Helper()
	if err := r.a.BeginCapture(s, gpumem.CaptureModeGlobal); err != nil {
		r.t.Fatalf("BeginCapture: %v", err)
	}
}

func (r *rig) end(s gpumem.Stream) gpumem.Graph {
	r.t.Helper()
	g, err := r.a.EndCapture(s)
	if err != nil {
		r.t.Fatalf("EndCapture: %v", err)
	}
	return g
}

func (r *rig) kernel(s gpumem.Stream, p gpumem.Ptr, n uint64) {
	r.t.Helper()
	if err := r.g.Launch(s, p, n, func(mem []byte) { mem[0]++; mem[len(mem)-1]++ }); err != nil {
		r.t.Fatalf("Launch: %v", err)
	}
}

// poke makes the allocator run its housekeeping (a tiny allocation and free).
func (r *rig) poke(s gpumem.Stream) {
	r.t.Helper()
	r.free(r.alloc(256, s), s)
}

// launchedAlloc captures on s a graph that allocates size bytes and writes
// them, instantiates it and launches it once: the memory is the graph's.
func (r *rig) launchedAlloc(size uint64, s gpumem.Stream) (gpumem.Ptr, gpumem.Graph, gpumem.GraphExec) {
	r.t.Helper()
	r.begin(s)
	p := r.alloc(size, s)
	r.kernel(s, p, size)
	g := r.end(s)
	ge, err := r.g.GraphInstantiate(g)
	if err != nil {
		r.t.Fatalf("GraphInstantiate: %v", err)
	}
	if err := r.g.GraphLaunch(ge, s); err != nil {
		r.t.Fatalf("GraphLaunch: %v", err)
	}
	return p, g, ge
}

// Case 1: allocated and freed inside one capture: a free node of the graph.
func TestGraphAllocAndFreeInside(t *testing.T) {
	r := newRig(t, sim.Config{}, asyncpool.DefaultOptions(), 1)
	defer r.finish()
	s := r.ss[0]
	r.begin(s)
	p := r.alloc(8*mib, s)
	r.kernel(s, p, 8*mib)
	before := r.calls("FreeAsync")
	r.free(p, s)
	if r.delta(before, "FreeAsync") != 1 {
		t.Errorf("the free inside the capture should be one captured FreeAsync")
	}
	g := r.end(s)
	r.graphRun(g, s, 3) // freed in the graph: relaunching is fine
	r.poke(s)
	c := r.a.Counters(0)
	if c.GraphFreedInCapture != 1 || c.LiveAllocations != 0 || c.GraphReleased != 0 {
		t.Errorf("counters = %+v", c)
	}
}

// Case 2: allocated inside, freed outside: the graph owns it and it is freed
// once the graph is destroyed, exactly once, after the graph ran.
func TestGraphAllocInsideFreeOutside(t *testing.T) {
	r := newRig(t, sim.Config{}, asyncpool.DefaultOptions(), 2)
	defer r.finish()
	s, u := r.ss[0], r.ss[1]
	p, g, ge := r.launchedAlloc(8*mib, s)
	r.kernel(s, p, 8*mib) // stream work after the graph reads its output
	if err := r.a.RecordStream(p, u); err != nil {
		t.Fatal(err)
	}
	before := r.calls("FreeAsync")
	r.free(p, s)
	if r.delta(before, "FreeAsync") != 0 {
		t.Errorf("the graph owns the memory: nothing may be freed while it exists")
	}
	if c := r.a.Counters(0); c.GraphOwned != 1 || c.LiveAllocations != 1 {
		t.Errorf("counters after the free = %+v", c)
	}
	if err := r.a.Deallocate(p, s); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("second free of a graph-owned pointer: %v", err)
	}
	r.poke(s)
	if r.a.Counters(0).GraphReleased != 0 {
		t.Errorf("freed while the graph exists")
	}
	r.graphDestroy(ge, g, s)
	before = r.calls("FreeAsync")
	r.poke(s)
	if n := r.delta(before, "FreeAsync"); n != 2 { // the graph's memory and the poke's
		t.Errorf("FreeAsync calls after the graph went = %d, want 2", n)
	}
	r.poke(s)
	c := r.a.Counters(0)
	if c.GraphReleased != 1 || c.LiveAllocations != 0 || c.GraphDropped != 0 {
		t.Errorf("counters = %+v", c)
	}
	if st := r.a.Stats(0); st.Active[gpumem.StatAll].Current != 0 {
		t.Errorf("active after release = %+v", st.Active[gpumem.StatAll])
	}
}

// Case 2, never launched: the allocation never existed; nothing is freed.
func TestGraphAllocInsideNeverLaunched(t *testing.T) {
	r := newRig(t, sim.Config{}, asyncpool.DefaultOptions(), 1)
	defer r.finish()
	s := r.ss[0]
	r.begin(s)
	p := r.alloc(mib, s)
	r.kernel(s, p, mib)
	q := r.alloc(mib, s)
	g := r.end(s)
	r.free(p, s) // outside: to the graph
	if err := r.g.GraphDestroy(g); err != nil {
		t.Fatal(err)
	}
	before := r.calls("FreeAsync")
	r.poke(s)
	r.free(q, s)                                   // after the graph went: dropped too
	if n := r.delta(before, "FreeAsync"); n != 1 { // the poke's only
		t.Errorf("FreeAsync calls = %d, want 1", n)
	}
	if c := r.a.Counters(0); c.GraphDropped != 2 || c.LiveAllocations != 0 {
		t.Errorf("counters = %+v", c)
	}
}

// Case 3: allocated outside, freed inside: held until the graph that may use
// it is destroyed, then freed once.
func TestGraphAllocOutsideFreeInside(t *testing.T) {
	r := newRig(t, sim.Config{}, asyncpool.DefaultOptions(), 1)
	defer r.finish()
	s := r.ss[0]
	p := r.alloc(4*mib, s)
	r.begin(s)
	r.kernel(s, p, 4*mib)
	before := r.calls("FreeAsync")
	r.free(p, s)
	g := r.end(s)
	if r.delta(before, "FreeAsync") != 0 {
		t.Errorf("freed during or at the end of the capture; the graph may still run")
	}
	if c := r.a.Counters(0); c.DeferredFrees != 1 {
		t.Errorf("counters = %+v", c)
	}
	// The graph runs after the capture: the memory must still be there.
	ge, err := r.g.GraphInstantiate(g)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := r.g.GraphLaunch(ge, s); err != nil {
			t.Fatal(err)
		}
	}
	r.poke(s)
	if r.a.Counters(0).GraphReleased != 0 {
		t.Errorf("freed while the graph exists")
	}
	r.graphDestroy(ge, g, s)
	r.poke(s)
	r.poke(s)
	c := r.a.Counters(0)
	if c.GraphReleased != 1 || c.LiveAllocations != 0 {
		t.Errorf("counters = %+v", c)
	}
	if st := r.a.Stats(0); st.PendingReleaseBytes != 0 || st.Active[gpumem.StatAll].Current != 0 {
		t.Errorf("pending %d active %d", st.PendingReleaseBytes, st.Active[gpumem.StatAll].Current)
	}
}

// Capture detected without the hooks (CaptureCheckEveryCall), trim refused
// during capture, throttle off during capture.
func TestCaptureWithoutHooks(t *testing.T) {
	opts := asyncpool.DefaultOptions()
	opts.ThrottleRatio = 0.01
	r := newRig(t, sim.Config{}, opts, 2)
	defer r.finish()
	s, u := r.ss[0], r.ss[1]
	x := r.alloc(64*mib, u)
	if err := r.a.RecordStream(x, s); err != nil {
		t.Fatal(err)
	}
	r.free(x, u) // pending on the free stream; utilisation over 1 %
	if err := r.g.StreamBeginCapture(s, gpumem.CaptureModeRelaxed); err != nil {
		t.Fatal(err)
	}
	jb := r.a.Counters(0).ThrottleJoins
	p := r.alloc(mib, s)
	if r.a.Counters(0).ThrottleJoins != jb {
		t.Errorf("throttled during capture")
	}
	if err := r.a.EmptyCache(); !errors.Is(err, asyncpool.ErrCaptureActive) || !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("EmptyCache during capture: %v", err)
	}
	r.kernel(s, p, mib)
	r.free(p, s)
	g, err := r.g.StreamEndCapture(s)
	if err != nil {
		t.Fatal(err)
	}
	r.graphRun(g, s, 1)
	if err := r.a.EmptyCache(); err != nil {
		t.Errorf("EmptyCache after capture: %v", err)
	}
	if c := r.a.Counters(0); c.GraphFreedInCapture != 1 {
		t.Errorf("counters = %+v", c)
	}
}

// Close with a graph still holding memory says so, and the rest is released.
func TestCloseLeavesGraphMemory(t *testing.T) {
	g, a, s := closeRig(t)
	if err := a.BeginCapture(s, gpumem.CaptureModeGlobal); err != nil {
		t.Fatal(err)
	}
	p, err := a.Allocate(mib, s)
	if err != nil {
		t.Fatal(err)
	}
	graph, err := a.EndCapture(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Deallocate(p, s); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); !errors.Is(err, asyncpool.ErrGraphOwned) {
		t.Errorf("Close with a live graph owning memory: %v", err)
	}
	if err := g.GraphDestroy(graph); err != nil {
		t.Fatal(err)
	}
	if err := g.StreamDestroy(s); err != nil {
		t.Fatal(err)
	}
	if v := g.Violations(); len(v) != 0 {
		t.Errorf("violations: %v", v)
	}
}

// Close during an open capture is refused and changes nothing: the capture
// ends valid, its graph owns its allocation, and Close then works.
func TestCloseDuringCapture(t *testing.T) {
	g, a, s := closeRig(t)
	defer g.Close()
	if err := a.BeginCapture(s, gpumem.CaptureModeRelaxed); err != nil {
		t.Fatal(err)
	}
	p, err := a.Allocate(4096, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); !errors.Is(err, asyncpool.ErrCaptureActive) || !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Fatalf("Close during a capture: %v, want ErrCaptureActive", err)
	}
	graph, err := a.EndCapture(s)
	if err != nil {
		t.Fatalf("the capture after a refused Close: %v", err)
	}
	if err := a.Deallocate(p, s); err != nil {
		t.Fatal(err)
	}
	if err := g.GraphDestroy(graph); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close after the capture ended and its graph was destroyed: %v", err)
	}
	if err := g.StreamDestroy(s); err != nil {
		t.Fatal(err)
	}
	if l := g.Leaks(); len(l) != 0 {
		t.Errorf("leaks: %v", l)
	}
	if v := g.Violations(); len(v) != 0 {
		t.Errorf("violations: %v", v)
	}
}

// Statistics read during a global-mode capture leave it valid: the driver
// refuses pool queries then, so the pool figures are those read last.
func TestStatsDuringCapture(t *testing.T) {
	r := newRig(t, sim.Config{}, asyncpool.DefaultOptions(), 1)
	defer r.finish()
	s := r.ss[0]
	x := r.alloc(mib, s)
	pre := r.a.Stats(0).ReservedBytes[gpumem.StatAll].Current
	r.begin(s)
	p := r.alloc(mib, s)
	st := r.a.Stats(0)
	r.kernel(s, p, mib)
	r.free(p, s)
	g := r.end(s)
	if got := st.ReservedBytes[gpumem.StatAll].Current; pre <= 0 || got != pre {
		t.Errorf("reserved during the capture = %d, before it %d", got, pre)
	}
	r.graphRun(g, s, 1)
	r.free(x, s)
}

// closeRig is a 1 GiB simulator, an asyncpool allocator over it and a
// stream, for the Close tests above (which close all three themselves).
func closeRig(t *testing.T) (*sim.GPU, *asyncpool.Allocator, gpumem.Stream) {
	t.Helper()
	return simPool(t, sim.Config{Devices: []sim.DeviceConfig{{Name: "d", Capacity: gib}}}, asyncpool.DefaultOptions())
}

// A request larger than the device during a global-mode capture fails as
// exhaustion and leaves the capture valid: the error goes without the
// device's and the pool's figures, whose queries would invalidate it.
func TestTooLargeDuringCaptureKeepsCapture(t *testing.T) {
	r := newRig(t, sim.Config{}, asyncpool.DefaultOptions(), 1)
	defer r.finish()
	s := r.ss[0]
	r.begin(s)
	var oom *gpumem.OutOfMemoryError
	if _, err := r.a.Allocate(9*gib, s); !errors.As(err, &oom) {
		t.Errorf("9 GiB on an 8 GiB device during a capture: %v, want an *OutOfMemoryError", err)
	}
	g := r.end(s)
	if err := r.g.GraphDestroy(g); err != nil {
		t.Fatal(err)
	}
}

// A failed EndCapture (a stream that is not capturing, or one ended twice)
// ends no capture: one that BeginCapture began on another stream is still
// seen, so that EmptyCache is refused instead of invalidating it.
func TestFailedEndCaptureKeepsCaptureSeen(t *testing.T) {
	r := newRig(t, sim.Config{}, asyncpool.DefaultOptions(), 3)
	defer r.finish()
	s0, s1, s2 := r.ss[0], r.ss[1], r.ss[2]
	r.begin(s0)
	if _, err := r.a.EndCapture(s1); err == nil {
		t.Fatal("EndCapture of a stream that is not capturing succeeded")
	}
	r.begin(s2)
	g2 := r.end(s2)
	if _, err := r.a.EndCapture(s2); err == nil {
		t.Fatal("a second EndCapture of one capture succeeded")
	}
	if err := r.a.EmptyCache(); !errors.Is(err, asyncpool.ErrCaptureActive) {
		t.Errorf("EmptyCache while the capture on s0 is open: %v, want ErrCaptureActive", err)
	}
	g0 := r.end(s0)
	for _, g := range []gpumem.Graph{g0, g2} {
		if err := r.g.GraphDestroy(g); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.a.EmptyCache(); err != nil {
		t.Errorf("EmptyCache after every capture ended: %v", err)
	}
}

// tempStream makes a stream that the test destroys itself.
func (r *rig) tempStream() gpumem.Stream {
	r.t.Helper()
	s, err := r.g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		r.t.Fatalf("StreamCreate: %v", err)
	}
	return s
}

func (r *rig) destroyStream(s gpumem.Stream) {
	r.t.Helper()
	if err := r.g.StreamDestroy(s); err != nil {
		r.t.Fatalf("StreamDestroy: %v", err)
	}
}

// A graph captured on a stream destroyed once the capture ended (by the
// backend's calls, so that the allocator hands the graph its user object
// later) still tells the allocator when it is destroyed: the memory it owns
// is freed, and EmptyCache and Stats work meanwhile.
func TestGraphOutlivesCaptureStream(t *testing.T) {
	r := newRig(t, sim.Config{}, asyncpool.DefaultOptions(), 1)
	defer r.finish()
	u := r.ss[0]
	s := r.tempStream()
	if err := r.g.StreamBeginCapture(s, gpumem.CaptureModeRelaxed); err != nil {
		t.Fatal(err)
	}
	p := r.alloc(mib, s)
	g, err := r.g.StreamEndCapture(s)
	if err != nil {
		t.Fatal(err)
	}
	r.destroyStream(s)
	r.free(p, u) // case 2: the graph owns it
	if err := r.a.EmptyCache(); err != nil {
		t.Errorf("EmptyCache with the capture stream destroyed: %v", err)
	}
	x := r.alloc(64*mib, u)
	if got := r.a.Stats(0).ReservedBytes[gpumem.StatAll].Current; got < int64(64*mib) {
		t.Errorf("reserved bytes = %d with 64 MiB allocated: the pool's figures are stale", got)
	}
	r.free(x, u)
	r.graphRun(g, u, 1)
	r.poke(u)
	c := r.a.Counters(0)
	if st := r.a.Stats(0); c.GraphReleased != 1 || c.LiveAllocations != 0 || st.PendingReleaseBytes != 0 {
		t.Errorf("after the graph was destroyed: counters %+v, pending release %d", c, st.PendingReleaseBytes)
	}
}

// Memory a graph owns, freed by the user on a stream destroyed before the
// graph, is freed when the graph goes: a destroyed stream has no work to
// wait for.
func TestGraphMemoryFreedOnDestroyedStream(t *testing.T) {
	r := newRig(t, sim.Config{}, asyncpool.DefaultOptions(), 1)
	defer r.finish()
	s := r.ss[0]
	r.begin(s)
	p := r.alloc(mib, s)
	g := r.end(s)
	f := r.tempStream()
	r.free(p, f) // case 2, freed on f
	if err := r.g.StreamSynchronize(f); err != nil {
		t.Fatal(err)
	}
	r.destroyStream(f)
	r.graphRun(g, s, 1)
	r.poke(s)
	if err := r.a.EmptyCache(); err != nil {
		t.Errorf("EmptyCache: %v", err)
	}
	c := r.a.Counters(0)
	if st := r.a.Stats(0); c.GraphReleased != 1 || c.LiveAllocations != 0 || st.PendingReleaseBytes != 0 {
		t.Errorf("after the graph was destroyed: counters %+v, pending release %d", c, st.PendingReleaseBytes)
	}
}

// An allocation on another stream that runs out of memory while a capture
// is open on the device fails without waiting for the device, trimming the
// pool or querying it, any of which would invalidate the capture.
func TestOutOfMemoryBesideCaptureKeepsCapture(t *testing.T) {
	cfg := sim.Config{Devices: []sim.DeviceConfig{{Name: "small", Capacity: gib}}}
	r := newRig(t, cfg, asyncpool.DefaultOptions(), 2)
	defer r.finish()
	s, u := r.ss[0], r.ss[1]
	x := r.alloc(600*mib, u)
	r.begin(s)
	p := r.alloc(mib, s)
	var oom *gpumem.OutOfMemoryError
	if _, err := r.a.Allocate(600*mib, u); !errors.As(err, &oom) {
		t.Errorf("600 MiB more on a 1 GiB device: %v, want an *OutOfMemoryError", err)
	}
	if _, err := r.a.Allocate(2*gib, u); !errors.As(err, &oom) {
		t.Errorf("2 GiB on a 1 GiB device: %v, want an *OutOfMemoryError", err)
	}
	r.free(p, s)
	g := r.end(s)
	r.graphRun(g, s, 1)
	r.free(x, u)
}

// The throttle holds on the fast path too. Memory that a graph owns is
// pending release while the free stream is idle, so an allocation may take
// the guarded fast path; over the throttle ratio it must still join the
// free stream (which has queued a free since the stream last joined it)
// into its stream, as the full path does.
func TestThrottleWithGraphOwnedMemory(t *testing.T) {
	opts := asyncpool.DefaultOptions()
	opts.ThrottleRatio = 0.5
	r := newRig(t, sim.Config{Devices: []sim.DeviceConfig{{Name: "small", Capacity: gib}}}, opts, 2)
	defer r.finish()
	s, u := r.ss[0], r.ss[1]
	// A free through the free stream, completed and retired.
	q := r.alloc(mib, s)
	if err := r.a.RecordStream(q, u); err != nil {
		t.Fatal(err)
	}
	r.free(q, s)
	if err := r.g.DeviceSynchronize(0); err != nil {
		t.Fatal(err)
	}
	r.poke(s)
	// 300 MiB owned by a graph that ran and still exists: pending release.
	p, g, ge := r.launchedAlloc(300*mib, s)
	r.free(p, s)
	r.poke(s)
	if c := r.a.Counters(0); c.ThrottleJoins != 0 || c.GraphOwned != 1 {
		t.Fatalf("counters before the throttled allocation = %+v", c)
	}
	if st := r.a.Stats(0); st.PendingReleaseBytes != int64(300*mib) {
		t.Fatalf("pending release = %d, want the graph's 300 MiB", st.PendingReleaseBytes)
	}
	// 300 MiB more: 600 MiB of 1 GiB, over the ratio of 0.5.
	x := r.alloc(300*mib, u)
	if c := r.a.Counters(0); c.ThrottleJoins != 1 {
		t.Errorf("throttle joins = %d after an allocation over the ratio, want 1", c.ThrottleJoins)
	}
	// Under the ratio again (x is live, the graph's memory still pending):
	// a small allocation joins nothing more, the free stream having queued
	// nothing since.
	r.free(r.alloc(mib, u), u)
	if c := r.a.Counters(0); c.ThrottleJoins != 1 {
		t.Errorf("throttle joins = %d, want 1", c.ThrottleJoins)
	}
	r.free(x, u)
	r.graphDestroy(ge, g, s)
	r.poke(s)
}
