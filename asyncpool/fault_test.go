package asyncpool_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/simtest"
)

// faultOps are the backend operations the allocator uses.
var faultOps = []string{
	"MemInfo", "DefaultMemPool", "MemPoolGetAttribute", "MemPoolSetAttribute",
	"StreamCaptureInfo", "MallocFromPoolAsync", "FreeAsync", "StreamCreate",
	"EventCreate", "EventRecord", "StreamWaitEvent", "EventQuery",
	"StreamSynchronize", "DeviceSynchronize", "MemPoolTrimTo",
	"StreamBeginCapture", "StreamEndCapture", "UserObjectCreate",
	"GraphRetainUserObject", "LaunchHostFunc", "StreamDestroy", "EventDestroy",
}

// absorbed are operations whose failure the allocator may absorb and retry
// later without failing the public call: a failed EventQuery only delays
// learning that a free completed.
// MemInfo and the pool's attributes also serve the figures of an
// out-of-memory error, which are filled in as far as they can be.
// The waits and the trim of the out-of-memory path are best effort: when the
// retry succeeds anyway the allocation succeeds (and when it fails, the
// error carries them). A user object the graph could not take yet is
// offered again later.
var absorbed = map[string]bool{
	"EventQuery": true, "MemInfo": true, "MemPoolGetAttribute": true,
	"StreamSynchronize": true, "DeviceSynchronize": true, "MemPoolTrimTo": true,
	"GraphRetainUserObject": true,
}

// errInjected is the failure injected: a vendor error matching no sentinel,
// so that no recovery path (the OOM retry) takes it for something else.
var errInjected = &gpumem.Error{Backend: "sim", Op: "injected", Code: 999, Name: "INJECTED_FAILURE"}

func injected(err error) bool {
	var ve *gpumem.Error
	return errors.As(err, &ve) && ve.Code == 999
}

// closeOnly are used only by Close (or EmptyCache): their failure surfaces
// there and the resource may be left behind.
var closeOnly = map[string]bool{"StreamDestroy": true, "EventDestroy": true}

// workload drives every path the allocator has, stopping at the first
// error. live tracks what the caller still holds.
type workload struct {
	r       *rig
	live    map[gpumem.Ptr]gpumem.Stream
	capture *gpumem.Stream // a capture begun and not ended
	graphs  []gpumem.Graph
}

func (w *workload) run() error {
	r := w.r
	s0, s1 := r.ss[0], r.ss[1]
	alloc := func(size uint64, s gpumem.Stream) (gpumem.Ptr, error) {
		p, err := r.a.Allocate(size, s)
		if err == nil {
			w.live[p] = s
		}
		return p, err
	}
	free := func(p gpumem.Ptr, s gpumem.Stream) error {
		if err := r.a.Deallocate(p, s); err != nil {
			return err
		}
		delete(w.live, p)
		return nil
	}
	// Plain pair.
	p, err := alloc(mib, s0)
	if err != nil {
		return err
	}
	if err := free(p, s0); err != nil {
		return err
	}
	// Cross-stream free, then allocations that poll and throttle.
	for i := 0; i < 2; i++ {
		p, err := alloc(300*mib, s0)
		if err != nil {
			return err
		}
		if err := r.a.RecordStream(p, s1); err != nil {
			return err
		}
		if err := free(p, s0); err != nil {
			return err
		}
		q, err := alloc(500*mib, s0) // over 50 % with the pending free: joins
		if err != nil {
			return err
		}
		if err := free(q, s0); err != nil {
			return err
		}
		if err := r.g.Drain(); err != nil {
			return fmt.Errorf("drain: %w", err)
		}
		x, err := alloc(mib, s1) // learns that the frees completed
		if err != nil {
			return err
		}
		if err := free(x, s1); err != nil {
			return err
		}
	}
	// Out of memory: the retry path (sync, trim), then failure.
	h, err := alloc(300*mib, s0)
	if err != nil {
		return err
	}
	if _, err := alloc(900*mib, s0); !errors.Is(err, gpumem.ErrOutOfMemory) || injected(err) {
		if err == nil {
			return errors.New("1.2 GiB on a 1 GiB device succeeded")
		}
		return err
	}
	if err := free(h, s0); err != nil {
		return err
	}
	// Capture: case 1 and case 2.
	if err := r.a.BeginCapture(s0, gpumem.CaptureModeGlobal); err != nil {
		return err
	}
	w.capture = &s0
	c1, err := alloc(mib, s0)
	if err != nil {
		return err
	}
	c2, err := alloc(mib, s0)
	if err != nil {
		return err
	}
	if err := free(c1, s0); err != nil {
		return err
	}
	g, err := r.a.EndCapture(s0)
	if err != nil {
		return err
	}
	w.capture = nil
	w.graphs = append(w.graphs, g)
	ge, err := r.g.GraphInstantiate(g)
	if err != nil {
		return fmt.Errorf("instantiate: %w", err)
	}
	lerr := r.g.GraphLaunch(ge, s0)
	serr := r.g.StreamSynchronize(s0)
	if err := errors.Join(lerr, serr, r.g.GraphExecDestroy(ge)); err != nil {
		return fmt.Errorf("graph run: %w", err)
	}
	if err := free(c2, s0); err != nil {
		return err
	}
	w.graphs = nil
	if err := r.g.GraphDestroy(g); err != nil {
		return fmt.Errorf("graph destroy: %w", err)
	}
	if err := r.a.EmptyCache(); err != nil {
		return err
	}
	return nil
}

// cleanup ends what the workload left open and frees what it holds.
func (w *workload) cleanup(t *testing.T) {
	r := w.r
	if w.capture != nil {
		if g, err := r.a.EndCapture(*w.capture); err == nil {
			w.graphs = append(w.graphs, g)
		}
	}
	for p, s := range w.live {
		if err := r.a.Deallocate(p, s); err != nil {
			t.Errorf("cleanup: Deallocate(%#x): %v", uintptr(p), err)
		}
	}
	if err := r.g.Drain(); err != nil {
		t.Errorf("cleanup: Drain: %v", err)
	}
	for _, g := range w.graphs {
		if err := r.g.GraphDestroy(g); err != nil {
			t.Errorf("cleanup: GraphDestroy: %v", err)
		}
	}
}

func newFaultRig(t *testing.T) *rig {
	opts := asyncpool.DefaultOptions()
	opts.ThrottleRatio = 0.5
	cfg := sim.Config{Manual: true, Devices: []sim.DeviceConfig{{Name: "small", Capacity: gib}}}
	return newRig(t, cfg, opts, 2)
}

func TestWorkloadRunsClean(t *testing.T) {
	r := newFaultRig(t)
	w := &workload{r: r, live: map[gpumem.Ptr]gpumem.Stream{}}
	if err := w.run(); err != nil {
		t.Fatalf("workload without faults: %v", err)
	}
	w.cleanup(t)
	c := r.a.Counters(0)
	if c.ThrottleJoins != 2 || c.CrossStreamFrees != 3 || c.GraphFreedInCapture != 1 || c.GraphOwned != 1 {
		t.Errorf("the workload should reach every path: %+v", c)
	}
	r.finish()
}

func TestInjectedFaults(t *testing.T) {
	for _, op := range faultOps {
		for nth := 1; nth <= 2; nth++ {
			t.Run(fmt.Sprintf("%s#%d", op, nth), func(t *testing.T) {
				r := newFaultRig(t)
				w := &workload{r: r, live: map[gpumem.Ptr]gpumem.Stream{}}
				before := r.g.Calls(op)
				r.g.InjectFault(op, nth, errInjected)
				err := w.run()
				reached := r.g.Calls(op)-before >= nth
				r.g.ClearFaults()
				if closeOnly[op] {
					// Not on the workload's path at all.
				} else if reached && err == nil && !absorbed[op] {
					t.Fatalf("fault in %s #%d reached but no error surfaced", op, nth)
				}
				if err != nil && !injected(err) {
					t.Errorf("error does not wrap the injected one: %v", err)
				}
				w.cleanup(t)
				// The allocator still works and its books balance.
				p := r.alloc(mib, r.ss[0])
				r.free(p, r.ss[0])
				st := r.a.Stats(0)
				if cur := st.Allocation[gpumem.StatAll].Current; cur != 0 {
					t.Errorf("allocations current = %d after every free", cur)
				}
				if err := r.a.EmptyCache(); err != nil {
					t.Errorf("EmptyCache after the fault: %v", err)
				}
				if st := r.a.Stats(0); st.PendingReleaseBytes != 0 || st.Active[gpumem.StatAll].Current != 0 {
					t.Errorf("pending %d active %d after EmptyCache", st.PendingReleaseBytes, st.Active[gpumem.StatAll].Current)
				}
				r.finish()
			})
		}
	}
}

// Faults in Close's own operations surface from Close, and a destroy that
// fails once is retried, so the simulator ends with nothing alive.
func TestCloseFaults(t *testing.T) {
	for _, op := range []string{"StreamDestroy", "EventDestroy", "DeviceSynchronize", "MemPoolTrimTo", "MemPoolSetAttribute"} {
		t.Run(op, func(t *testing.T) {
			opts := asyncpool.DefaultOptions()
			opts.ThrottleRatio = 0.5
			cfg := sim.Config{Manual: true, Devices: []sim.DeviceConfig{{Name: "small", Capacity: gib}}}
			r := newRig(t, cfg, opts, 2)
			p := r.alloc(mib, r.ss[0])
			if err := r.a.RecordStream(p, r.ss[1]); err != nil {
				t.Fatal(err)
			}
			r.free(p, r.ss[0])
			if err := r.g.Drain(); err != nil {
				t.Fatal(err)
			}
			r.g.InjectFault(op, 1, nil)
			err := r.a.Close()
			var ve *gpumem.Error
			if !errors.As(err, &ve) {
				t.Errorf("Close with %s failing: %v", op, err)
			}
			r.g.ClearFaults()
			for _, s := range r.ss {
				_ = r.g.StreamDestroy(s)
			}
		})
	}
}

func TestInitFaults(t *testing.T) {
	for _, op := range []string{"DeviceCount", "MemInfo", "DefaultMemPool", "MemPoolGetAttribute", "MemPoolSetAttribute", "MemPoolCreate", "MemPoolSetAccess"} {
		t.Run(op, func(t *testing.T) {
			g := simtest.New(t, sim.Config{Devices: []sim.DeviceConfig{{Name: "a", Capacity: gib}, {Name: "b", Capacity: gib}}, Peer: func(a, b int) bool { return true }})
			opts := asyncpool.DefaultOptions()
			opts.OwnPool = op == "MemPoolCreate"
			opts.PeerAccess = []int{1}
			g.InjectFault(op, 1, nil)
			a, err := asyncpool.New(g, opts)
			if err == nil {
				_, err = a.Allocate(mib, gpumem.Stream{Device: 0})
			}
			var ve *gpumem.Error
			if !errors.As(err, &ve) {
				t.Errorf("fault in %s: %v", op, err)
			}
			g.ClearFaults()
			if a != nil {
				p, err := a.Allocate(mib, gpumem.Stream{Device: 0})
				if err != nil {
					t.Fatalf("after the fault: %v", err)
				}
				if err := a.Deallocate(p, gpumem.Stream{Device: 0}); err != nil {
					t.Fatal(err)
				}
				if err := a.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}
			if l := g.Leaks(); len(l) != 0 {
				t.Errorf("leaks: %v", l)
			}
		})
	}
}

// An allocation in a capture whose launch marker cannot be captured is
// freed in the capture and fails; the statistics count the free with the
// allocation, so that device allocations and frees balance.
func TestLaunchMarkerFaultBalancesDeviceCalls(t *testing.T) {
	r := newRig(t, sim.Config{}, asyncpool.DefaultOptions(), 1)
	defer r.finish()
	s := r.ss[0]
	r.begin(s)
	r.g.InjectFault("LaunchHostFunc", 1, errInjected)
	_, err := r.a.Allocate(mib, s)
	r.g.ClearFaults()
	if !injected(err) {
		t.Errorf("Allocate with the launch marker failing: %v", err)
	}
	g := r.end(s)
	r.graphRun(g, s, 1)
	st := r.a.Stats(0)
	if st.NumDeviceAlloc != 1 || st.NumDeviceFree != 1 {
		t.Errorf("num_device_alloc %d, num_device_free %d; want 1 and 1", st.NumDeviceAlloc, st.NumDeviceFree)
	}
	if cur := st.Allocation[gpumem.StatAll].Current; cur != 0 {
		t.Errorf("allocations current = %d", cur)
	}
}
