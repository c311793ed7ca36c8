package asyncpool_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/simtest"
)

const (
	kib = uint64(1) << 10
	mib = uint64(1) << 20
	gib = uint64(1) << 30
)

// rig is a simulated machine, an allocator over it and a few streams.
type rig struct {
	t  *testing.T
	g  *sim.GPU
	a  *asyncpool.Allocator
	ss []gpumem.Stream
}

// newRig builds a rig whose simulator fails t if the test leaves anything
// alive on it.
func newRig(t *testing.T, cfg sim.Config, opts asyncpool.Options, streams int) *rig {
	t.Helper()
	return rigOn(t, nil, cfg, opts, streams)
}

func rigOn(t *testing.T, g *sim.GPU, cfg sim.Config, opts asyncpool.Options, streams int) *rig {
	t.Helper()
	if len(cfg.Devices) == 0 {
		cfg.Devices = []sim.DeviceConfig{{Name: "sim0", Capacity: 8 * gib}}
	}
	if g == nil {
		g = simtest.New(t, cfg)
	}
	a, err := asyncpool.New(g, opts)
	if err != nil {
		t.Fatalf("asyncpool.New: %v", err)
	}
	r := &rig{t: t, g: g, a: a}
	for i := 0; i < streams; i++ {
		s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
		if err != nil {
			t.Fatalf("StreamCreate: %v", err)
		}
		r.ss = append(r.ss, s)
	}
	return r
}

// finish closes the allocator and the streams and checks the simulator saw
// no violation and nothing leaked.
func (r *rig) finish() {
	r.t.Helper()
	if err := r.g.Drain(); err != nil {
		r.t.Errorf("Drain: %v", err)
	}
	if err := r.a.Close(); err != nil {
		r.t.Errorf("Close: %v", err)
	}
	for _, s := range r.ss {
		if err := r.g.StreamDestroy(s); err != nil {
			r.t.Errorf("StreamDestroy: %v", err)
		}
	}
	if v := r.g.Violations(); len(v) != 0 {
		r.t.Errorf("violations: %v", v)
	}
	if l := r.g.Leaks(); len(l) != 0 {
		r.t.Errorf("leaks: %v", l)
	}
}

func (r *rig) alloc(size uint64, s gpumem.Stream) gpumem.Ptr {
	r.t.Helper()
	p, err := r.a.Allocate(size, s)
	if err != nil {
		r.t.Fatalf("Allocate(%d, %v): %v", size, s, err)
	}
	return p
}

func (r *rig) free(p gpumem.Ptr, s gpumem.Stream) {
	r.t.Helper()
	if err := r.a.Deallocate(p, s); err != nil {
		r.t.Fatalf("Deallocate(%#x, %v): %v", uintptr(p), s, err)
	}
}

// calls snapshots the simulator's call counts of the named ops.
func (r *rig) calls(ops ...string) map[string]int {
	m := map[string]int{}
	for _, op := range ops {
		m[op] = r.g.Calls(op)
	}
	return m
}

func (r *rig) delta(before map[string]int, op string) int {
	return r.g.Calls(op) - before[op]
}

func TestFreeSameStreamIsOneFreeAsync(t *testing.T) {
	r := newRig(t, sim.Config{}, asyncpool.DefaultOptions(), 1)
	defer r.finish()
	s := r.ss[0]
	p := r.alloc(3*mib, s)
	before := r.calls("FreeAsync", "StreamCreate", "EventRecord", "StreamWaitEvent")
	r.free(p, s)
	if n := r.delta(before, "FreeAsync"); n != 1 {
		t.Errorf("FreeAsync calls = %d, want 1", n)
	}
	for _, op := range []string{"StreamCreate", "EventRecord", "StreamWaitEvent"} {
		if n := r.delta(before, op); n != 0 {
			t.Errorf("%s calls = %d, want 0 on the plain free path", op, n)
		}
	}
	st := r.a.Stats(0)
	if st.AllocatedBytes[gpumem.StatAll].Current != 0 || st.AllocatedBytes[gpumem.StatAll].Peak != int64(3*mib) {
		t.Errorf("allocated bytes = %+v", st.AllocatedBytes[gpumem.StatAll])
	}
	if st.NumDeviceAlloc != 1 || st.NumDeviceFree != 1 {
		t.Errorf("device allocs/frees = %d/%d, want 1/1", st.NumDeviceAlloc, st.NumDeviceFree)
	}
	if st.PendingReleaseBytes != 0 {
		t.Errorf("pending = %d, want 0", st.PendingReleaseBytes)
	}
}

func TestFreeWithRecordedStreamsGoesThroughFreeStream(t *testing.T) {
	r := newRig(t, sim.Config{Manual: true}, asyncpool.DefaultOptions(), 3)
	defer r.finish()
	s0, s1, s2 := r.ss[0], r.ss[1], r.ss[2]
	p := r.alloc(4*mib, s0)
	// s1 and s2 use the memory after s0 made it.
	for _, u := range []gpumem.Stream{s1, s2} {
		ev, err := r.g.EventCreate(0, gpumem.EventDisableTiming)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.g.EventRecord(ev, s0); err != nil {
			t.Fatal(err)
		}
		if err := r.g.StreamWaitEvent(u, ev); err != nil {
			t.Fatal(err)
		}
		if err := r.g.EventDestroy(ev); err != nil {
			t.Fatal(err)
		}
		if err := r.g.Launch(u, p, 4*mib, func(mem []byte) { mem[0]++ }); err != nil {
			t.Fatal(err)
		}
		if err := r.a.RecordStream(p, u); err != nil {
			t.Fatal(err)
		}
	}
	before := r.calls("FreeAsync", "StreamCreate", "EventRecord", "StreamWaitEvent")
	r.free(p, s0)
	if n := r.delta(before, "StreamCreate"); n != 1 {
		t.Errorf("StreamCreate = %d, want 1 (the free stream)", n)
	}
	// s0, s1, s2 joined into the free stream; one more record tracks the free.
	if n := r.delta(before, "StreamWaitEvent"); n != 3 {
		t.Errorf("StreamWaitEvent = %d, want 3", n)
	}
	if n := r.delta(before, "EventRecord"); n != 4 {
		t.Errorf("EventRecord = %d, want 4", n)
	}
	if n := r.delta(before, "FreeAsync"); n != 1 {
		t.Errorf("FreeAsync = %d, want 1", n)
	}
	if got := r.a.Stats(0).PendingReleaseBytes; got != int64(4*mib) {
		t.Errorf("pending before the streams ran = %d, want %d", got, 4*mib)
	}
	// Nothing has run: a new allocation on s0 must not be handed memory the
	// kernels on s1 and s2 still use (the detector would report it).
	q := r.alloc(4*mib, s0)
	if err := r.g.Launch(s0, q, 4*mib, func(mem []byte) { mem[0] = 7 }); err != nil {
		t.Fatal(err)
	}
	if err := r.g.Drain(); err != nil {
		t.Fatal(err)
	}
	// The next allocation learns the free completed.
	x := r.alloc(kib, s0)
	if got := r.a.Stats(0).PendingReleaseBytes; got != 0 {
		t.Errorf("pending after the free stream ran = %d, want 0", got)
	}
	if c := r.a.Counters(0); c.CrossStreamFrees != 1 || c.PendingFrees != 0 {
		t.Errorf("counters = %+v", c)
	}
	r.free(q, s0)
	r.free(x, s0)
}

func TestFreeOnAnotherStreamWithoutRecordIsPlain(t *testing.T) {
	r := newRig(t, sim.Config{}, asyncpool.DefaultOptions(), 2)
	defer r.finish()
	p := r.alloc(mib, r.ss[0])
	before := r.calls("FreeAsync", "StreamCreate")
	r.free(p, r.ss[1])
	if r.delta(before, "FreeAsync") != 1 || r.delta(before, "StreamCreate") != 0 {
		t.Errorf("free on the stream of last use should be one FreeAsync on it")
	}
}

func TestThrottleJoinsExactlyWhenRatioCrossed(t *testing.T) {
	opts := asyncpool.DefaultOptions()
	opts.ThrottleRatio = 0.5
	cfg := sim.Config{Manual: true, Devices: []sim.DeviceConfig{{Name: "small", Capacity: 1 * gib}}}
	r := newRig(t, cfg, opts, 2)
	defer r.finish()
	s0, s1 := r.ss[0], r.ss[1]

	// 300 MiB freed through the free stream stays pending (Manual: nothing runs).
	a := r.alloc(300*mib, s0)
	if err := r.a.RecordStream(a, s1); err != nil {
		t.Fatal(err)
	}
	r.free(a, s0)
	type step struct {
		size  uint64
		joins int // expected new joins
	}
	// allocated+pending+size vs 512 MiB.
	steps := []step{
		{100 * mib, 0}, // 0+300+100 = 400 <= 512
		{112 * mib, 0}, // 100+300+112 = 512, not above
		{1 * mib, 1},   // 212+300+1 = 513 > 512: join
		{1 * mib, 0},   // above, but no free since the last join
	}
	var live []gpumem.Ptr
	for i, st := range steps {
		before := r.calls("StreamWaitEvent")
		jb := r.a.Counters(0).ThrottleJoins
		live = append(live, r.alloc(st.size, s0))
		if n := r.delta(before, "StreamWaitEvent"); n != st.joins {
			t.Errorf("step %d: StreamWaitEvent calls = %d, want %d", i, n, st.joins)
		}
		if n := r.a.Counters(0).ThrottleJoins - jb; n != int64(st.joins) {
			t.Errorf("step %d: throttle joins = %d, want %d", i, n, st.joins)
		}
	}
	// A new pending free: the next allocation above the ratio joins again,
	// and another stream joins on its own account.
	b := r.alloc(mib, s1)
	if err := r.a.RecordStream(b, s0); err != nil {
		t.Fatal(err)
	}
	r.free(b, s1)
	jb := r.a.Counters(0).ThrottleJoins
	live = append(live, r.alloc(mib, s0), r.alloc(mib, s1))
	if n := r.a.Counters(0).ThrottleJoins - jb; n != 2 {
		t.Errorf("joins after a new free = %d, want 2", n)
	}
	// Once the frees are known complete nothing is pending: no join.
	if err := r.g.Drain(); err != nil {
		t.Fatal(err)
	}
	live = append(live, r.alloc(kib, s0)) // polls
	jb = r.a.Counters(0).ThrottleJoins
	live = append(live, r.alloc(kib, s0))
	if n := r.a.Counters(0).ThrottleJoins - jb; n != 0 {
		t.Errorf("joins with nothing pending = %d, want 0", n)
	}
	for _, p := range live {
		r.free(p, s0)
	}
}

func TestThrottleOffAboveOne(t *testing.T) {
	opts := asyncpool.DefaultOptions()
	opts.ThrottleRatio = 1
	cfg := sim.Config{Manual: true, Devices: []sim.DeviceConfig{{Name: "small", Capacity: 1 * gib}}}
	r := newRig(t, cfg, opts, 2)
	defer r.finish()
	a := r.alloc(600*mib, r.ss[0])
	if err := r.a.RecordStream(a, r.ss[1]); err != nil {
		t.Fatal(err)
	}
	r.free(a, r.ss[0])
	b := r.alloc(300*mib, r.ss[0])
	if j := r.a.Counters(0).ThrottleJoins; j != 0 {
		t.Errorf("joins = %d with the throttle off", j)
	}
	r.free(b, r.ss[0])
}

func TestBadInput(t *testing.T) {
	r := newRig(t, sim.Config{}, asyncpool.DefaultOptions(), 1)
	s := r.ss[0]
	if _, err := r.a.Allocate(0, s); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("zero size: %v", err)
	}
	if _, err := r.a.Allocate(1<<62+1, s); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("huge size: %v", err)
	}
	// More than the device is exhaustion, as in every allocator.
	var oom *gpumem.OutOfMemoryError
	if _, err := r.a.Allocate(8*gib+1, s); !errors.As(err, &oom) {
		t.Errorf("over capacity: %v, want an *OutOfMemoryError", err)
	}
	if n := r.a.Stats(0).NumOOMs; n != 1 {
		t.Errorf("NumOOMs = %d after a request over capacity, want 1", n)
	}
	if _, err := r.a.Allocate(mib, gpumem.Stream{Device: 5}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("bad device: %v", err)
	}
	if _, err := r.a.Allocate(mib, gpumem.Stream{Device: -1}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("negative device: %v", err)
	}
	p := r.alloc(mib, s)
	if err := r.a.Deallocate(p+1, s); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("interior pointer: %v", err)
	}
	if err := r.a.Deallocate(0, s); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("nil pointer: %v", err)
	}
	if err := r.a.RecordStream(p+8, s); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("RecordStream of a foreign pointer: %v", err)
	}
	foreign, err := r.g.Malloc(0, mib)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.a.Deallocate(foreign, s); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("foreign pointer: %v", err)
	}
	if err := r.g.Free(0, foreign); err != nil {
		t.Fatal(err)
	}
	r.free(p, s)
	if err := r.a.Deallocate(p, s); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("double free: %v", err)
	}
	q := r.alloc(mib, s)
	r.finish() // closes; q is freed by Close
	if _, err := r.a.Allocate(mib, s); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("Allocate after Close: %v", err)
	}
	if err := r.a.Deallocate(q, s); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("Deallocate after Close: %v", err)
	}
	if err := r.a.RecordStream(q, s); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("RecordStream after Close: %v", err)
	}
	if err := r.a.EmptyCache(); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("EmptyCache after Close: %v", err)
	}
	if err := r.a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := asyncpool.New(nil, asyncpool.DefaultOptions()); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("nil backend: %v", err)
	}
	for _, o := range []asyncpool.Options{
		{ThrottleRatio: -1}, {HistorySize: -1}, {HistorySize: 1 << 40},
		{CaptureCheck: 9}, {PeerAccess: []int{-1}}, {PeerAccess: []int{3}},
	} {
		if _, err := asyncpool.New(r.g, o); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("New(%+v): %v", o, err)
		}
	}
}

func TestOutOfMemory(t *testing.T) {
	cfg := sim.Config{Devices: []sim.DeviceConfig{{Name: "small", Capacity: 1 * gib}}}
	r := newRig(t, cfg, asyncpool.DefaultOptions(), 1)
	defer r.finish()
	s := r.ss[0]
	p := r.alloc(700*mib, s)
	var observed []*gpumem.OutOfMemoryError
	r.a.AddOOMObserver(func(e *gpumem.OutOfMemoryError) { observed = append(observed, e) })
	_, err := r.a.Allocate(500*mib, s)
	var oe *gpumem.OutOfMemoryError
	if !errors.As(err, &oe) || !errors.Is(err, gpumem.ErrOutOfMemory) {
		t.Fatalf("want an OutOfMemoryError, got %v", err)
	}
	if oe.Allocator != "asyncpool" || oe.Requested != 500*mib || oe.Capacity != 1*gib || oe.Allocated != 700*mib {
		t.Errorf("error fields: %+v", oe)
	}
	if oe.Reserved < 700*mib || oe.Hint == "" || oe.Err == nil {
		t.Errorf("error fields: reserved %d, hint %q, cause %v", oe.Reserved, oe.Hint, oe.Err)
	}
	if len(observed) != 1 || observed[0] != oe {
		t.Errorf("observers saw %d errors", len(observed))
	}
	st := r.a.Stats(0)
	if st.NumOOMs != 1 || st.NumAllocRetries != 1 {
		t.Errorf("ooms/retries = %d/%d, want 1/1", st.NumOOMs, st.NumAllocRetries)
	}
	// A handler that frees memory gets its retry.
	calls := 0
	r.a.SetOOMHandler(func(dev int, requested uint64, attempt int) bool {
		calls++
		if p != 0 {
			r.free(p, s)
			p = 0
			return true
		}
		return false
	})
	q, err := r.a.Allocate(500*mib, s)
	if err != nil {
		t.Fatalf("allocation after the handler freed memory: %v", err)
	}
	if calls != 1 {
		t.Errorf("handler calls = %d, want 1", calls)
	}
	r.a.SetOOMHandler(nil)
	r.free(q, s)
}

// per_process_memory_fraction is the shared limit adaptor over the pool
// allocator: the registered constructor puts it there, and its failures
// name the key.
func TestMemoryFraction(t *testing.T) {
	g, err := sim.New(sim.Config{Devices: []sim.DeviceConfig{{Name: "small", Capacity: 1 * gib}}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	a, err := gpumem.NewAllocator(g, "backend:asyncpool,per_process_memory_fraction:0.25")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, ok := a.(gpumem.Adaptor).Upstream().(*asyncpool.Allocator); !ok {
		t.Fatalf("the fraction is not a limit over the pool allocator: %T", a)
	}
	s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.StreamDestroy(s)
	p, err := a.Allocate(200*mib, s)
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Allocate(100*mib, s)
	var oe *gpumem.OutOfMemoryError
	if !errors.As(err, &oe) {
		t.Fatalf("want OutOfMemoryError under the cap, got %v", err)
	}
	if oe.Limit != 256*mib || !strings.Contains(oe.Hint, "per_process_memory_fraction") {
		t.Errorf("limit %d hint %q", oe.Limit, oe.Hint)
	}
	if st := a.Stats(0); st.NumOOMs != 1 {
		t.Errorf("num_ooms %d, want 1", st.NumOOMs)
	}
	q, err := a.Allocate(56*mib, s) // exactly at the cap
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []gpumem.Ptr{p, q} {
		if err := a.Deallocate(x, s); err != nil {
			t.Fatal(err)
		}
	}
}

func TestConcurrentGoroutines(t *testing.T) {
	r := newRig(t, sim.Config{}, asyncpool.DefaultOptions(), 4)
	defer r.finish()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			var held []gpumem.Ptr
			for i := 0; i < 200; i++ {
				s := r.ss[(w+i)%len(r.ss)]
				p, err := r.a.Allocate(uint64(1+(w*131+i*17)%4096)*kib, s)
				if err != nil {
					errs <- err
					return
				}
				if i%3 == 0 {
					if err := r.a.RecordStream(p, r.ss[(w+i+1)%len(r.ss)]); err != nil {
						errs <- err
						return
					}
				}
				held = append(held, p)
				if len(held) > 4 {
					if err := r.a.Deallocate(held[0], s); err != nil {
						errs <- err
						return
					}
					held = held[1:]
				}
				if i%50 == 0 {
					_ = r.a.Stats(0)
					_ = r.a.Snapshot()
				}
			}
			for _, p := range held {
				if err := r.a.Deallocate(p, r.ss[0]); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := r.a.Stats(0)
	if st.Allocation[gpumem.StatAll].Current != 0 || st.AllocatedBytes[gpumem.StatAll].Current != 0 {
		t.Errorf("after all frees: %+v", st.Allocation[gpumem.StatAll])
	}
	if st.Allocation[gpumem.StatAll].Allocated != 16*200 {
		t.Errorf("allocations = %d, want %d", st.Allocation[gpumem.StatAll].Allocated, 16*200)
	}
}

func TestStatsHistorySnapshot(t *testing.T) {
	if asyncpool.DefaultOptions().HistorySize != 0 {
		t.Fatal("DefaultOptions keep a history; it is opt-in, as the caching allocator's")
	}
	opts := asyncpool.DefaultOptions()
	opts.HistorySize = asyncpool.DefaultHistorySize
	r := newRig(t, sim.Config{Manual: true}, opts, 2)
	defer r.finish()
	s0, s1 := r.ss[0], r.ss[1]
	p := r.alloc(2*mib, s0)
	q := r.alloc(100*kib, s0)
	if err := r.a.RecordStream(q, s1); err != nil {
		t.Fatal(err)
	}
	r.free(q, s0) // pending on the free stream
	snap := r.a.Snapshot()
	if len(snap.Segments) != 2 {
		t.Fatalf("segments = %d, want 2", len(snap.Segments))
	}
	states := map[gpumem.Ptr]string{}
	for _, sg := range snap.Segments {
		states[sg.Addr] = sg.Blocks[0].State
	}
	if states[p] != "active_allocated" || states[q] != "active_pending_free" {
		t.Errorf("block states = %v", states)
	}
	st := snap.Stats[0]
	if st.RequestedBytes[gpumem.StatAll].Current != int64(2*mib) || st.RequestedBytes[gpumem.StatAll].Peak != int64(2*mib+100*kib) {
		t.Errorf("requested = %+v", st.RequestedBytes[gpumem.StatAll])
	}
	if st.ReservedBytes[gpumem.StatAll].Current < int64(2*mib) {
		t.Errorf("reserved = %+v", st.ReservedBytes[gpumem.StatAll])
	}
	acts := map[gpumem.HistoryAction]int{}
	for _, h := range r.a.History() {
		acts[h.Action]++
	}
	if acts[gpumem.ActionAlloc] != 2 || acts[gpumem.ActionFreeRequest] != 1 {
		t.Errorf("history = %v", acts)
	}
	r.a.ResetPeakStats(0)
	if pk := r.a.Stats(0).RequestedBytes[gpumem.StatAll].Peak; pk != int64(2*mib) {
		t.Errorf("peak after reset = %d", pk)
	}
	r.free(p, s0)
}

func TestEmptyCacheTrims(t *testing.T) {
	r := newRig(t, sim.Config{}, asyncpool.DefaultOptions(), 1)
	defer r.finish()
	p := r.alloc(64*mib, r.ss[0])
	r.free(p, r.ss[0])
	if res := r.a.Stats(0).ReservedBytes[gpumem.StatAll].Current; res < int64(64*mib) {
		t.Fatalf("reserved after free = %d: the pool should keep it (KeepAll)", res)
	}
	if err := r.a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if res := r.a.Stats(0).ReservedBytes[gpumem.StatAll].Current; res != 0 {
		t.Errorf("reserved after EmptyCache = %d, want 0", res)
	}
}

func TestOwnPoolAndPeers(t *testing.T) {
	cfg := sim.Config{
		Devices: []sim.DeviceConfig{{Name: "a", Capacity: 4 * gib}, {Name: "b", Capacity: 4 * gib}},
		Peer:    func(a, b int) bool { return true },
	}
	opts := asyncpool.DefaultOptions()
	opts.OwnPool = true
	opts.PeerAccess = []int{0, 1}
	r := newRig(t, cfg, opts, 1)
	s1, err := r.g.StreamCreate(1, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	r.ss = append(r.ss, s1)
	defer r.finish()
	p := r.alloc(mib, r.ss[0])
	q := r.alloc(mib, s1)
	// Device 1's stream uses device 0's memory: recorded, then freed from it.
	if err := r.a.RecordStream(p, s1); err != nil {
		t.Fatal(err)
	}
	r.free(p, s1)
	r.free(q, s1)
	if err := r.a.EnablePeer(1, 0); err != nil {
		t.Errorf("EnablePeer: %v", err)
	}
	if r.a.Stats(1).NumDeviceAlloc != 1 {
		t.Errorf("device 1 allocs = %d", r.a.Stats(1).NumDeviceAlloc)
	}
}

// Setup configures the pool before any allocation: the default pool keeps
// its memory at once, and a bad
// device or a closed allocator is an error.
func TestSetup(t *testing.T) {
	r := newRig(t, sim.Config{}, asyncpool.DefaultOptions(), 1)
	defer r.finish()
	pool, err := r.g.DefaultMemPool(0)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := r.g.MemPoolGetAttribute(pool, gpumem.PoolReleaseThreshold); v == asyncpool.KeepAll {
		t.Fatal("the pool keeps all before Setup: the test proves nothing")
	}
	if err := r.a.Setup(0); err != nil {
		t.Fatalf("Setup: %v", err)
	}
	if v, err := r.g.MemPoolGetAttribute(pool, gpumem.PoolReleaseThreshold); err != nil || v != asyncpool.KeepAll {
		t.Fatalf("release threshold after Setup = %d, %v; want KeepAll", v, err)
	}
	if err := r.a.Setup(0); err != nil {
		t.Fatalf("second Setup: %v", err)
	}
	if err := r.a.Setup(5); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Fatalf("Setup of a device out of range: %v", err)
	}
	p, err := r.a.Allocate(mib, r.ss[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := r.a.Deallocate(p, r.ss[0]); err != nil {
		t.Fatal(err)
	}
}

func TestSetupAfterClose(t *testing.T) {
	g := simtest.New(t, sim.Config{})
	a, err := asyncpool.New(g, asyncpool.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Setup(0); !errors.Is(err, gpumem.ErrClosed) {
		t.Fatalf("Setup after Close: %v", err)
	}
}
