package allocatortest

import (
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/simtest"
)

// testDestroyedStream frees an allocation used on a stream that was
// destroyed before the free: a destroyed stream has no work left to wait
// for, so Deallocate succeeds and frees the memory at once (a second
// Deallocate is a double free, the statistics count nothing allocated, and
// EmptyCache can return the memory).
func testDestroyedStream(t *testing.T, f *fixture) {
	s3, err := f.b.StreamCreate(f.dev, gpumem.StreamNonBlocking, 0)
	must(t, err, "StreamCreate")
	p := f.alloc(t, 1<<20, f.s)
	must(t, f.a.RecordStream(p, s3), "RecordStream")
	must(t, f.b.StreamSynchronize(s3), "StreamSynchronize")
	must(t, f.b.StreamDestroy(s3), "StreamDestroy")
	if err := f.a.Deallocate(p, f.s); err != nil {
		t.Fatalf("Deallocate after the recorded stream was destroyed: %v", err)
	}
	wantIs(t, f.a.Deallocate(p, f.s), gpumem.ErrInvalidValue, "second Deallocate")
	must(t, f.b.StreamSynchronize(f.s), "StreamSynchronize")
	must(t, f.a.EmptyCache(), "EmptyCache")
	if !f.options.NoStatistics {
		st := f.a.Stats(f.dev)
		if c := st.Allocation[gpumem.StatAll].Current; c != 0 {
			t.Errorf("Allocation.Current = %d after the free", c)
		}
		if c := st.ActiveBytes[gpumem.StatAll].Current; c != 0 {
			t.Errorf("ActiveBytes.Current = %d after the free: the memory waits for a destroyed stream", c)
		}
	}
	f.roundTrip(t, "a free after the recorded stream was destroyed")
}

// testBadStreams passes streams that are not live streams of any device:
// a handle never created and a destroyed stream. Allocate, RecordStream
// and Deallocate refuse them with ErrInvalidValue and no side effect.
func testBadStreams(t *testing.T, f *fixture) {
	dead, err := f.b.StreamCreate(f.dev, gpumem.StreamNonBlocking, 0)
	must(t, err, "StreamCreate")
	must(t, f.b.StreamDestroy(dead), "StreamDestroy")
	bogus := gpumem.Stream{Device: f.dev, Handle: 0xdead0}
	p := f.alloc(t, 1<<16, f.s)
	for _, c := range []struct {
		what string
		s    gpumem.Stream
	}{{"a handle never created", bogus}, {"a destroyed stream", dead}} {
		if q, err := f.a.Allocate(1<<16, c.s); err == nil {
			t.Errorf("Allocate on %s succeeded", c.what)
			_ = f.a.Deallocate(q, f.s)
		} else {
			wantIs(t, err, gpumem.ErrInvalidValue, "Allocate on "+c.what)
		}
		wantIs(t, f.a.RecordStream(p, c.s), gpumem.ErrInvalidValue, "RecordStream on "+c.what)
		wantIs(t, f.a.Deallocate(p, c.s), gpumem.ErrInvalidValue, "Deallocate on "+c.what)
	}
	f.free(t, p, f.s)
	if !f.options.NoStatistics {
		if c := f.a.Stats(f.dev).Allocation[gpumem.StatAll].Current; c != 0 {
			t.Errorf("Allocation.Current = %d after every allocation was freed", c)
		}
	}
	f.roundTrip(t, "bad streams")
}

// testOtherDeviceStream records the use of an allocation on a stream of
// another device, which every allocator accepts (the memory is reused only
// after that stream's work up to the free), and frees on it. It runs on a
// simulator of two devices of its own, so it is skipped when Options.Open
// chooses the backend.
func testOtherDeviceStream(t *testing.T, f *fixture) {
	if f.options.Open != nil {
		t.Skip("the backend is the caller's: no second device of the suite's")
	}
	devs := make([]sim.DeviceConfig, f.dev+2)
	for i := range devs {
		devs[i] = SmallDevice
	}
	g, err := sim.New(sim.Config{Devices: devs})
	must(t, err, "sim.New")
	other := f.dev + 1
	if f.dev > 0 {
		other = 0
	}
	s, err := g.StreamCreate(f.dev, gpumem.StreamNonBlocking, 0)
	must(t, err, "StreamCreate")
	so, err := g.StreamCreate(other, gpumem.StreamNonBlocking, 0)
	must(t, err, "StreamCreate")
	a := f.newAlloc(t, g)
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		for _, st := range []gpumem.Stream{s, so} {
			must(t, g.StreamSynchronize(st), "StreamSynchronize")
			must(t, g.StreamDestroy(st), "StreamDestroy")
		}
		simtest.Check(t, g)
		_ = g.Close()
	})
	p, err := a.Allocate(1<<20, s)
	must(t, err, "Allocate")
	must(t, a.RecordStream(p, so), "RecordStream on another device's stream")
	must(t, a.Deallocate(p, s), "Deallocate")
	q, err := a.Allocate(1<<20, s)
	must(t, err, "Allocate")
	must(t, a.Deallocate(q, so), "Deallocate on another device's stream")
	must(t, g.DeviceSynchronize(other), "DeviceSynchronize")
	if c := a.Stats(f.dev).Allocation[gpumem.StatAll].Current; c != 0 && !f.options.NoStatistics {
		t.Errorf("Allocation.Current = %d after every allocation was freed", c)
	}
}
