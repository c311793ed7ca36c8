package sim_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

func TestCaptureIllegalCalls(t *testing.T) {
	g := sim.NewDefault()
	s, _ := g.StreamCreate(0, gpumem.StreamDefault, 0)
	other, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	e, _ := g.EventCreate(0, 0)
	p, _ := g.Malloc(0, 4096)
	status := func() gpumem.CaptureStatus {
		info, err := g.StreamCaptureInfo(s)
		ok(t, err)
		return info.Status
	}
	cases := []struct {
		name string
		mode gpumem.CaptureMode
		call func() error
		code int
	}{
		{"StreamSynchronize", gpumem.CaptureModeRelaxed, func() error { return g.StreamSynchronize(s) }, 900},
		{"StreamQuery", gpumem.CaptureModeRelaxed, func() error { _, err := g.StreamQuery(s); return err }, 900},
		{"DeviceSynchronize", gpumem.CaptureModeRelaxed, func() error { return g.DeviceSynchronize(0) }, 900},
		{"Free", gpumem.CaptureModeGlobal, func() error { return g.Free(0, 0x1) }, 900},
		{"Malloc", gpumem.CaptureModeGlobal, func() error { _, err := g.Malloc(0, 1); return err }, 900},
		{"MallocHost", gpumem.CaptureModeThreadLocal, func() error { _, err := g.MallocHost(1); return err }, 900},
		{"StreamSynchronize of another stream", gpumem.CaptureModeGlobal, func() error { return g.StreamSynchronize(other) }, 900},
		{"EventSynchronize", gpumem.CaptureModeGlobal, func() error { return g.EventSynchronize(e) }, 900},
		{"EventQuery of a captured event", gpumem.CaptureModeRelaxed, func() error {
			if err := g.EventRecord(e, s); err != nil {
				return err
			}
			_, err := g.EventQuery(e)
			return err
		}, 907},
		{"legacy stream work", gpumem.CaptureModeRelaxed, func() error { return g.MemsetAsync(p, 0, 1, gpumem.Stream{Device: 0}) }, 906},
		{"synchronous copy", gpumem.CaptureModeRelaxed, func() error { return g.Memset(p, 0, 1) }, 906},
		{"wait on an outside event", gpumem.CaptureModeRelaxed, func() error {
			if err := g.EventRecord(e, other); err != nil {
				return err
			}
			return g.StreamWaitEvent(s, e)
		}, 905},
	}
	for _, c := range cases {
		ok(t, g.StreamBeginCapture(s, c.mode))
		if st := status(); st != gpumem.CaptureActive {
			t.Fatalf("%s: status %v", c.name, st)
		}
		err := c.call()
		if code(err) != c.code {
			t.Errorf("%s during capture: %v, want code %d", c.name, err, c.code)
		}
		if st := status(); st != gpumem.CaptureInvalidated {
			t.Errorf("%s: capture not invalidated (%v)", c.name, st)
		}
		if err := g.MemsetAsync(p, 1, 1, s); code(err) != 901 {
			t.Errorf("%s: work on an invalidated capture: %v", c.name, err)
		}
		if _, err := g.StreamEndCapture(s); code(err) != 901 {
			t.Errorf("%s: ending an invalidated capture: %v", c.name, err)
		}
		if st := status(); st != gpumem.CaptureNone {
			t.Errorf("%s: status after end %v", c.name, st)
		}
	}
	// Allowed during a relaxed capture: Malloc, Free, synchronizing other streams.
	ok(t, g.StreamBeginCapture(s, gpumem.CaptureModeRelaxed))
	q, err := g.Malloc(0, 512)
	ok(t, err)
	ok(t, g.StreamSynchronize(other))
	ok(t, g.Free(0, 0))
	gr, err := g.StreamEndCapture(s)
	ok(t, err)
	ok(t, g.GraphDestroy(gr))
	if err := g.StreamBeginCapture(gpumem.Stream{Device: 0}, gpumem.CaptureModeRelaxed); code(err) != 900 {
		t.Errorf("capturing the legacy stream: %v", err)
	}
	for _, x := range []gpumem.Ptr{p, q} {
		ok(t, g.Free(0, x))
	}
	ok(t, g.EventDestroy(e))
	ok(t, g.StreamDestroy(s))
	ok(t, g.StreamDestroy(other))
	noLeaks(t, g)
}

func TestCaptureForkJoin(t *testing.T) {
	g := newSim(t, sim.Config{Manual: true})
	s1, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	s2, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	fork, _ := g.EventCreate(0, gpumem.EventDisableTiming)
	join, _ := g.EventCreate(0, gpumem.EventDisableTiming)
	x, _ := g.Malloc(0, 4096)
	y, _ := g.Malloc(0, 4096)
	capture := func(rejoin bool) (gpumem.Graph, error) {
		ok(t, g.StreamBeginCapture(s1, gpumem.CaptureModeGlobal))
		ok(t, g.MemsetAsync(x, 5, 4096, s1))
		ok(t, g.EventRecord(fork, s1))
		ok(t, g.StreamWaitEvent(s2, fork))
		info, _ := g.StreamCaptureInfo(s2)
		if info.Status != gpumem.CaptureActive {
			t.Fatalf("the forked stream is not capturing: %+v", info)
		}
		ok(t, g.MemcpyAsync(y, x, 4096, s2))
		if rejoin {
			ok(t, g.EventRecord(join, s2))
			ok(t, g.StreamWaitEvent(s1, join))
		}
		return g.StreamEndCapture(s1)
	}
	if _, err := capture(false); code(err) != 904 {
		t.Fatalf("unjoined capture: %v, want CUDA_ERROR_STREAM_CAPTURE_UNJOINED", err)
	}
	if info, _ := g.StreamCaptureInfo(s2); info.Status != gpumem.CaptureNone {
		t.Errorf("the forked stream still captures after the capture failed")
	}
	gr, err := capture(true)
	ok(t, err)
	ge, err := g.GraphInstantiate(gr)
	ok(t, err)
	ok(t, g.GraphLaunch(ge, s1))
	got := make([]byte, 4096)
	if g.Step(s2) {
		t.Error("the graph ran on a stream it was not launched on")
	}
	ok(t, g.StreamSynchronize(s1))
	ok(t, g.CopyFromDevice(got, y))
	if !bytes.Equal(got, bytes.Repeat([]byte{5}, 4096)) {
		t.Error("the forked branch's copy did not run")
	}
	ok(t, g.GraphExecDestroy(ge))
	ok(t, g.GraphDestroy(gr))
	for _, e := range []gpumem.Event{fork, join} {
		ok(t, g.EventDestroy(e))
	}
	ok(t, g.StreamDestroy(s1))
	ok(t, g.StreamDestroy(s2))
	ok(t, g.Free(0, x))
	ok(t, g.Free(0, y))
	noLeaks(t, g)
}

// The four allocation scenarios of graph memory: allocate and free inside
// the graph; allocate inside and free outside; allocate outside and free
// inside; and addresses fixed at capture.
func TestGraphMemory(t *testing.T) {
	g := newSim(t, sim.Config{Devices: []sim.DeviceConfig{{Capacity: 1 << 30}}})
	s, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	ok(t, g.StreamBeginCapture(s, gpumem.CaptureModeGlobal))
	p, err := g.MallocAsync(1<<20, s)
	ok(t, err)
	ok(t, g.MemsetAsync(p, 7, 1<<20, s))
	gr, err := g.StreamEndCapture(s)
	ok(t, err)
	free0, _, _ := g.MemInfo(0)
	if free0 != 1<<30 {
		t.Errorf("a captured allocation took memory before launch: free %d", free0)
	}
	ge, err := g.GraphInstantiate(gr)
	ok(t, err)
	if _, err := g.GraphInstantiate(gr); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("second instantiation of a graph with allocation nodes: %v", err)
	}
	ok(t, g.GraphLaunch(ge, s))
	ok(t, g.StreamSynchronize(s))
	if free, _, _ := g.MemInfo(0); free != 1<<30-1<<20 {
		t.Errorf("after launch free %d, want 1 MiB taken", free)
	}
	got := make([]byte, 4)
	ok(t, g.CopyFromDevice(got, p))
	if !bytes.Equal(got, []byte{7, 7, 7, 7}) {
		t.Errorf("graph allocation holds %v", got)
	}
	if err := g.GraphLaunch(ge, s); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("relaunch before freeing the graph's allocation: %v", err)
	}
	ok(t, g.FreeAsync(p, s))
	if err := g.FreeAsync(p, s); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("double free of a graph allocation: %v", err)
	}
	ok(t, g.GraphLaunch(ge, s)) // same address again
	ok(t, g.MemsetAsync(p, 8, 4, s))
	ok(t, g.FreeAsync(p, s))
	ok(t, g.StreamSynchronize(s))
	ok(t, g.GraphExecDestroy(ge))
	ok(t, g.GraphDestroy(gr))
	if free, _, _ := g.MemInfo(0); free != 1<<30 {
		t.Errorf("graph memory not returned: free %d", free)
	}
	// Allocated outside, freed inside the graph.
	q, err := g.MallocAsync(4096, s)
	ok(t, err)
	ok(t, g.StreamBeginCapture(s, gpumem.CaptureModeGlobal))
	ok(t, g.FreeAsync(q, s))
	gr, err = g.StreamEndCapture(s)
	ok(t, err)
	if err := g.FreeAsync(q, s); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("freeing memory a graph frees: %v", err)
	}
	ge, err = g.GraphInstantiate(gr)
	ok(t, err)
	ok(t, g.GraphLaunch(ge, s))
	ok(t, g.StreamSynchronize(s))
	ok(t, g.GraphExecDestroy(ge))
	ok(t, g.GraphDestroy(gr))
	ok(t, g.StreamDestroy(s))
	noLeaks(t, g)
}

func TestUserObjects(t *testing.T) {
	g := newSim(t, sim.Config{Manual: true})
	s, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	runs := 0
	uo, err := g.UserObjectCreate(0, func() { runs++ })
	ok(t, err)
	ok(t, g.StreamBeginCapture(s, gpumem.CaptureModeGlobal))
	ok(t, g.LaunchHostFunc(s, func() {}))
	gr, err := g.StreamEndCapture(s)
	ok(t, err)
	ok(t, g.GraphRetainUserObject(gr, uo, 2, false)) // 3 references
	ge, err := g.GraphInstantiate(gr)                // the exec holds the graph's 2 too
	ok(t, err)
	ok(t, g.GraphDestroy(gr))
	ok(t, g.UserObjectRelease(uo, 1))
	if runs != 0 {
		t.Fatal("destructor ran while an executable graph holds references")
	}
	ok(t, g.GraphLaunch(ge, s))
	ok(t, g.GraphExecDestroy(ge)) // the launch is still queued
	if runs != 0 {
		t.Fatal("destructor ran before the queued launch completed")
	}
	ok(t, g.Drain())
	if runs != 1 {
		t.Fatalf("destructor ran %d times, want once", runs)
	}
	if err := g.UserObjectRelease(uo, 1); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("release of a destroyed user object: %v", err)
	}
	uo2, _ := g.UserObjectCreate(0, func() { runs++ })
	if err := g.UserObjectRelease(uo2, 2); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("over-release: %v", err)
	}
	ok(t, g.UserObjectRelease(uo2, 1))
	if runs != 2 {
		t.Errorf("destructor of a released user object ran %d times in total", runs)
	}
	ok(t, g.StreamDestroy(s))
	noLeaks(t, g)
}

// TestRefusedCallsChangeNothing: a FreeAsync, an EventRecord or a
// GraphLaunch on the legacy stream refused during a capture elsewhere
// (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) leaves the state as it was: the
// allocation stays live, the event keeps its last record, the graph can be
// launched again.
func TestRefusedCallsChangeNothing(t *testing.T) {
	g := newSim(t, sim.Config{})
	legacy := gpumem.Stream{}
	s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	ok(t, err)
	ok(t, g.StreamBeginCapture(s, gpumem.CaptureModeRelaxed))
	q, err := g.MallocAsync(1<<20, s)
	ok(t, err)
	ok(t, g.FreeAsync(q, s))
	graph, err := g.StreamEndCapture(s)
	ok(t, err)
	ge, err := g.GraphInstantiate(graph)
	ok(t, err)

	p, err := g.MallocAsync(1<<20, legacy)
	ok(t, err)
	a, err := g.EventCreate(0, 0)
	ok(t, err)
	b, err := g.EventCreate(0, 0)
	ok(t, err)
	ok(t, g.EventRecord(a, legacy))
	ok(t, g.EventRecord(b, legacy))
	ok(t, g.EventSynchronize(b))

	cs, err := g.StreamCreate(0, gpumem.StreamDefault, 0) // blocking: the legacy stream may not run beside its capture
	ok(t, err)
	ok(t, g.StreamBeginCapture(cs, gpumem.CaptureModeRelaxed))
	if err := g.FreeAsync(p, legacy); err == nil {
		t.Fatal("FreeAsync on the legacy stream during a capture was accepted")
	}
	if err := g.EventRecord(b, legacy); err == nil {
		t.Fatal("EventRecord on the legacy stream during a capture was accepted")
	}
	if err := g.GraphLaunch(ge, legacy); err == nil || !strings.Contains(err.Error(), "GraphLaunch") {
		t.Fatalf("GraphLaunch on the legacy stream during a capture: %v, want a refusal naming GraphLaunch", err)
	}
	// The refusals invalidated that capture, as the driver's do.
	if _, err := g.StreamEndCapture(cs); err == nil {
		t.Error("the capture beside the refused calls ended valid")
	}

	if err := g.FreeAsync(p, legacy); err != nil {
		t.Errorf("the allocation whose free was refused: %v", err)
	}
	// Freed once, on the second try: a new allocation may take its
	// place, not the live one's before.
	q2, err := g.MallocAsync(1<<20, legacy)
	ok(t, err)
	ok(t, g.FreeAsync(q2, legacy))
	if _, err := g.EventElapsed(a, b); err != nil {
		t.Errorf("the event whose record was refused lost its last record: %v", err)
	}
	if err := g.GraphLaunch(ge, s); err != nil {
		t.Errorf("a launch after the refused one: %v", err)
	}
	ok(t, g.StreamSynchronize(s))
	ok(t, g.StreamSynchronize(legacy))
	ok(t, g.GraphExecDestroy(ge))
	ok(t, g.GraphDestroy(graph))
	ok(t, g.EventDestroy(a))
	ok(t, g.EventDestroy(b))
	ok(t, g.StreamDestroy(s))
	ok(t, g.StreamDestroy(cs))
}

// TestUserObjectReferences: the caller releases only the references it
// holds (not the graphs'), a graph's count cannot wrap, and the destructor
// runs once, when the last reference goes.
func TestUserObjectReferences(t *testing.T) {
	g := newSim(t, sim.Config{})
	s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	ok(t, err)
	ok(t, g.StreamBeginCapture(s, gpumem.CaptureModeRelaxed))
	gr, err := g.StreamEndCapture(s)
	ok(t, err)
	runs := 0
	uo, err := g.UserObjectCreate(0, func() { runs++ })
	ok(t, err)
	ok(t, g.GraphRetainUserObject(gr, uo, 1, false))
	if err := g.UserObjectRelease(uo, 2); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("releasing 2 references where the caller holds 1: %v, want ErrInvalidValue", err)
	}
	if err := g.GraphRetainUserObject(gr, uo, ^uint32(0), false); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("a graph's count past 2^32-1: %v, want ErrInvalidValue", err)
	}
	ok(t, g.UserObjectRelease(uo, 1))
	if runs != 0 {
		t.Fatalf("the destructor ran while the graph holds a reference")
	}
	ok(t, g.GraphDestroy(gr))
	if runs != 1 {
		t.Errorf("the destructor ran %d times, want once", runs)
	}
	ok(t, g.StreamDestroy(s))
}
