package asyncpool_test

// The GPU tier: runs whenever a CUDA device is present and skips, saying
// why, otherwise. Each graph case of the package overview goes through a
// capture, launches and destruction on the real driver, with copies and
// memsets as the graph's work; the data are checked after the launches and
// the pool's used bytes must come back to where they started.

import (
	"testing"
	"time"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	_ "github.com/gpumem/gpumem/driver"
)

// gpuRig is an allocator over the CUDA driver with a few streams.
type gpuRig struct {
	t    *testing.T
	b    gpumem.Backend
	a    *asyncpool.Allocator
	pool gpumem.MemPool
	ss   []gpumem.Stream
	used uint64 // the pool's used bytes when the rig was made
}

func openGPURig(t *testing.T, streams int) *gpuRig {
	t.Helper()
	b, err := gpumem.Open(gpumem.Options{Backend: "cuda"})
	if err != nil {
		t.Skipf("no CUDA device here: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if n, err := b.DeviceCount(); err != nil || n == 0 {
		t.Skipf("no CUDA device here: count %d, %v", n, err)
	}
	name, _ := b.DeviceName(0)
	v, _ := b.Version()
	t.Logf("%s, driver %d", name, v.Driver)
	r := &gpuRig{t: t, b: b}
	if r.pool, err = b.DefaultMemPool(0); err != nil {
		t.Fatalf("DefaultMemPool: %v", err)
	}
	r.used = r.poolUsed()
	if r.a, err = asyncpool.New(b, asyncpool.DefaultOptions()); err != nil {
		t.Fatalf("asyncpool.New: %v", err)
	}
	for i := 0; i < streams; i++ {
		s, err := b.StreamCreate(0, gpumem.StreamNonBlocking, 0)
		if err != nil {
			t.Fatalf("StreamCreate: %v", err)
		}
		r.ss = append(r.ss, s)
	}
	return r
}

func (r *gpuRig) poolUsed() uint64 {
	r.t.Helper()
	u, err := r.b.MemPoolGetAttribute(r.pool, gpumem.PoolUsedMemCurrent)
	if err != nil {
		r.t.Fatalf("PoolUsedMemCurrent: %v", err)
	}
	return u
}

// finish checks that the pool is back to its starting used bytes, closes
// the allocator and destroys the streams.
func (r *gpuRig) finish() {
	r.t.Helper()
	if err := r.b.DeviceSynchronize(0); err != nil {
		r.t.Errorf("DeviceSynchronize: %v", err)
	}
	r.settle(func(c asyncpool.Counters) bool { return c.PendingFrees == 0 })
	if u := r.poolUsed(); u != r.used {
		r.t.Errorf("pool used bytes = %d at the end, %d at the start", u, r.used)
	}
	if err := r.a.Close(); err != nil {
		r.t.Errorf("Close: %v", err)
	}
	for _, s := range r.ss {
		if err := r.b.StreamDestroy(s); err != nil {
			r.t.Errorf("StreamDestroy: %v", err)
		}
	}
}

func (r *gpuRig) alloc(size uint64, s gpumem.Stream) gpumem.Ptr {
	r.t.Helper()
	p, err := r.a.Allocate(size, s)
	if err != nil {
		r.t.Fatalf("Allocate(%d, %v): %v", size, s, err)
	}
	return p
}

func (r *gpuRig) free(p gpumem.Ptr, s gpumem.Stream) {
	r.t.Helper()
	if err := r.a.Deallocate(p, s); err != nil {
		r.t.Fatalf("Deallocate(%#x, %v): %v", uintptr(p), s, err)
	}
}

func (r *gpuRig) memset(p gpumem.Ptr, v byte, n uint64, s gpumem.Stream) {
	r.t.Helper()
	if err := r.b.MemsetAsync(p, v, n, s); err != nil {
		r.t.Fatalf("MemsetAsync: %v", err)
	}
}

func (r *gpuRig) copy(dst, src gpumem.Ptr, n uint64, s gpumem.Stream) {
	r.t.Helper()
	if err := r.b.MemcpyAsync(dst, src, n, s); err != nil {
		r.t.Fatalf("MemcpyAsync: %v", err)
	}
}

func (r *gpuRig) sync(s gpumem.Stream) {
	r.t.Helper()
	if err := r.b.StreamSynchronize(s); err != nil {
		r.t.Fatalf("StreamSynchronize: %v", err)
	}
}

// expect checks that every byte of [p, p+n) is v.
func (r *gpuRig) expect(what string, p gpumem.Ptr, n uint64, v byte) {
	r.t.Helper()
	buf := make([]byte, n)
	if err := r.b.CopyFromDevice(buf, p); err != nil {
		r.t.Fatalf("CopyFromDevice: %v", err)
	}
	for i, c := range buf {
		if c != v {
			r.t.Fatalf("%s: byte %d is %#x, want %#x", what, i, c, v)
		}
	}
}

func (r *gpuRig) begin(s gpumem.Stream) {
	r.t.Helper()
	if err := r.a.BeginCapture(s, gpumem.CaptureModeGlobal); err != nil {
		r.t.Fatalf("BeginCapture: %v", err)
	}
}

func (r *gpuRig) end(s gpumem.Stream) gpumem.Graph {
	r.t.Helper()
	g, err := r.a.EndCapture(s)
	if err != nil {
		r.t.Fatalf("EndCapture: %v", err)
	}
	return g
}

func (r *gpuRig) instantiate(g gpumem.Graph) gpumem.GraphExec {
	r.t.Helper()
	ge, err := r.b.GraphInstantiate(g)
	if err != nil {
		r.t.Fatalf("GraphInstantiate: %v", err)
	}
	return ge
}

func (r *gpuRig) launch(ge gpumem.GraphExec, s gpumem.Stream) {
	r.t.Helper()
	if err := r.b.GraphLaunch(ge, s); err != nil {
		r.t.Fatalf("GraphLaunch: %v", err)
	}
}

func (r *gpuRig) destroy(g gpumem.Graph, ge gpumem.GraphExec) {
	r.t.Helper()
	if err := r.b.GraphExecDestroy(ge); err != nil {
		r.t.Fatalf("GraphExecDestroy: %v", err)
	}
	if err := r.b.GraphDestroy(g); err != nil {
		r.t.Fatalf("GraphDestroy: %v", err)
	}
}

// settle runs the allocator's housekeeping (a small allocation and free on
// the first stream, after a device synchronization) until done holds for
// its counters: the driver runs user-object destructors on its own thread,
// some time after a graph is destroyed. It fails after a generous bound.
func (r *gpuRig) settle(done func(asyncpool.Counters) bool) asyncpool.Counters {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := r.b.DeviceSynchronize(0); err != nil {
			r.t.Fatalf("DeviceSynchronize: %v", err)
		}
		r.free(r.alloc(256, r.ss[0]), r.ss[0])
		c := r.a.Counters(0)
		if done(c) {
			if err := r.b.DeviceSynchronize(0); err != nil {
				r.t.Fatalf("DeviceSynchronize: %v", err)
			}
			return c
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("the allocator did not settle: counters %+v", c)
		}
		time.Sleep(time.Millisecond)
	}
}

const gpuBuf = 8 << 20

func TestGPUGraphScenarios(t *testing.T) {
	// Case 1: allocated and freed in one capture: the graph's own free
	// node; relaunching is allowed and nothing outlives the graph.
	t.Run("AllocFreeInside", func(t *testing.T) {
		r := openGPURig(t, 1)
		defer r.finish()
		s := r.ss[0]
		out := r.alloc(gpuBuf, s)
		r.memset(out, 0, gpuBuf, s)
		r.begin(s)
		p := r.alloc(gpuBuf, s)
		r.memset(p, 0x11, gpuBuf, s)
		r.copy(out, p, gpuBuf, s)
		r.free(p, s)
		g := r.end(s)
		ge := r.instantiate(g)
		for i := 0; i < 3; i++ {
			r.launch(ge, s)
		}
		r.sync(s)
		r.expect("the graph's output", out, gpuBuf, 0x11)
		r.destroy(g, ge)
		r.free(out, s)
		c := r.settle(func(c asyncpool.Counters) bool { return c.LiveAllocations == 0 })
		if c.GraphFreedInCapture != 1 || c.GraphOwned != 0 || c.GraphReleased != 0 || c.GraphDropped != 0 {
			t.Errorf("counters = %+v", c)
		}
		if st := r.a.Stats(0); st.Active[gpumem.StatAll].Current != 0 || st.PendingReleaseBytes != 0 {
			t.Errorf("active %d, pending %d after the graph went", st.Active[gpumem.StatAll].Current, st.PendingReleaseBytes)
		}
	})

	// Case 2: allocated in the capture, freed outside: the graph owns the
	// memory until it is destroyed, then it is freed once.
	t.Run("AllocInsideFreeOutside", func(t *testing.T) {
		r := openGPURig(t, 1)
		defer r.finish()
		s := r.ss[0]
		r.begin(s)
		p := r.alloc(gpuBuf, s)
		r.memset(p, 0x22, gpuBuf, s)
		g := r.end(s)
		ge := r.instantiate(g)
		r.launch(ge, s)
		r.sync(s)
		r.expect("the graph's allocation after its launch", p, gpuBuf, 0x22)
		frees := r.a.Stats(0).NumDeviceFree
		r.free(p, s)
		if n := r.a.Stats(0).NumDeviceFree - frees; n != 0 {
			t.Errorf("%d frees while the graph owns the memory", n)
		}
		if c := r.a.Counters(0); c.GraphOwned != 1 || c.LiveAllocations != 1 {
			t.Errorf("counters after the free = %+v", c)
		}
		r.destroy(g, ge)
		c := r.settle(func(c asyncpool.Counters) bool { return c.GraphReleased+c.GraphDropped > 0 })
		if c.GraphReleased != 1 || c.GraphDropped != 0 || c.LiveAllocations != 0 {
			t.Errorf("counters after the graph went = %+v", c)
		}
		// Its free and the settling pokes' frees, one each: nothing twice.
		st := r.a.Stats(0)
		if st.NumDeviceFree != st.NumDeviceAlloc {
			t.Errorf("device frees %d, device allocations %d", st.NumDeviceFree, st.NumDeviceAlloc)
		}
		if st.Active[gpumem.StatAll].Current != 0 || st.PendingReleaseBytes != 0 {
			t.Errorf("active %d, pending %d after the graph went", st.Active[gpumem.StatAll].Current, st.PendingReleaseBytes)
		}
	})

	// Case 2, never launched: the allocation never existed.
	t.Run("AllocInsideNeverLaunched", func(t *testing.T) {
		r := openGPURig(t, 1)
		defer r.finish()
		s := r.ss[0]
		r.begin(s)
		p := r.alloc(gpuBuf, s)
		r.memset(p, 0x2f, gpuBuf, s)
		g := r.end(s)
		ge := r.instantiate(g)
		r.free(p, s)
		r.destroy(g, ge)
		c := r.settle(func(c asyncpool.Counters) bool { return c.GraphReleased+c.GraphDropped > 0 })
		if c.GraphDropped != 1 || c.GraphReleased != 0 || c.LiveAllocations != 0 {
			t.Errorf("counters after the graph went = %+v", c)
		}
	})

	// Case 3: allocated outside, freed in the capture: the memory stays
	// until the graph, which reads it at every launch, is destroyed.
	t.Run("AllocOutsideFreeInside", func(t *testing.T) {
		r := openGPURig(t, 1)
		defer r.finish()
		s := r.ss[0]
		p := r.alloc(gpuBuf, s)
		out := r.alloc(gpuBuf, s)
		r.memset(p, 0x33, gpuBuf, s)
		r.sync(s)
		frees := r.a.Stats(0).NumDeviceFree
		r.begin(s)
		r.copy(out, p, gpuBuf, s)
		r.free(p, s)
		g := r.end(s)
		if n := r.a.Stats(0).NumDeviceFree - frees; n != 0 {
			t.Errorf("%d frees during or at the end of the capture", n)
		}
		if c := r.a.Counters(0); c.DeferredFrees != 1 {
			t.Errorf("counters after the capture = %+v", c)
		}
		ge := r.instantiate(g)
		for i := 0; i < 2; i++ {
			r.memset(out, 0, gpuBuf, s)
			// Allocations in between must not be handed p's memory.
			q := r.alloc(gpuBuf, s)
			r.memset(q, 0xee, gpuBuf, s)
			r.launch(ge, s)
			r.free(q, s)
			r.sync(s)
			r.expect("the graph's copy of memory freed in its capture", out, gpuBuf, 0x33)
		}
		if c := r.a.Counters(0); c.GraphReleased != 0 {
			t.Errorf("freed while the graph exists: %+v", c)
		}
		r.destroy(g, ge)
		r.free(out, s)
		c := r.settle(func(c asyncpool.Counters) bool { return c.GraphReleased > 0 && c.LiveAllocations == 0 })
		if c.GraphReleased != 1 || c.DeferredFrees != 1 {
			t.Errorf("counters after the graph went = %+v", c)
		}
		st := r.a.Stats(0)
		if st.NumDeviceFree != st.NumDeviceAlloc || st.Active[gpumem.StatAll].Current != 0 || st.PendingReleaseBytes != 0 {
			t.Errorf("device frees %d of %d allocations, active %d, pending %d", st.NumDeviceFree, st.NumDeviceAlloc,
				st.Active[gpumem.StatAll].Current, st.PendingReleaseBytes)
		}
	})

	// Statistics read during a global-mode capture must leave it valid.
	t.Run("StatsDuringCapture", func(t *testing.T) {
		r := openGPURig(t, 1)
		defer r.finish()
		s := r.ss[0]
		out := r.alloc(gpuBuf, s)
		pre := r.a.Stats(0).ReservedBytes[gpumem.StatAll].Current
		r.begin(s)
		p := r.alloc(gpuBuf, s)
		st := r.a.Stats(0)
		_ = r.a.Snapshot()
		r.memset(p, 0x77, gpuBuf, s)
		r.copy(out, p, gpuBuf, s)
		r.free(p, s)
		ci, err := r.b.StreamCaptureInfo(s)
		if err != nil || ci.Status != gpumem.CaptureActive {
			t.Fatalf("capture after reading statistics: %+v, %v", ci, err)
		}
		g := r.end(s)
		if got := st.ReservedBytes[gpumem.StatAll].Current; pre <= 0 || got != pre {
			t.Errorf("reserved bytes during the capture = %d, before it %d: want the figure last read", got, pre)
		}
		ge := r.instantiate(g)
		r.memset(out, 0, gpuBuf, s)
		r.launch(ge, s)
		r.sync(s)
		r.expect("the graph's output", out, gpuBuf, 0x77)
		r.destroy(g, ge)
		r.free(out, s)
		r.settle(func(c asyncpool.Counters) bool { return c.LiveAllocations == 0 })
		// What the driver itself does with a pool query inside a capture.
		if err := r.b.StreamBeginCapture(s, gpumem.CaptureModeGlobal); err != nil {
			t.Fatal(err)
		}
		_, qerr := r.b.MemPoolGetAttribute(r.pool, gpumem.PoolReservedMemCurrent)
		ci, cerr := r.b.StreamCaptureInfo(s)
		g2, eerr := r.b.StreamEndCapture(s)
		t.Logf("driver: a pool query in a global capture returns %v; the capture is then %v (%v); ending it: %v", qerr, ci.Status, cerr, eerr)
		if eerr == nil {
			_ = r.b.GraphDestroy(g2)
		}
	})

	// Case 4: neither: the graph uses memory allocated and freed outside.
	t.Run("Neither", func(t *testing.T) {
		r := openGPURig(t, 1)
		defer r.finish()
		s := r.ss[0]
		p := r.alloc(gpuBuf, s)
		r.begin(s)
		r.memset(p, 0x44, gpuBuf, s)
		g := r.end(s)
		ge := r.instantiate(g)
		r.memset(p, 0, gpuBuf, s)
		r.launch(ge, s)
		r.sync(s)
		r.expect("the graph's memset", p, gpuBuf, 0x44)
		r.destroy(g, ge)
		frees := r.a.Stats(0).NumDeviceFree
		r.free(p, s)
		if n := r.a.Stats(0).NumDeviceFree - frees; n != 1 {
			t.Errorf("free outside any capture: %d device frees, want 1", n)
		}
		c := r.settle(func(c asyncpool.Counters) bool { return c.LiveAllocations == 0 })
		if c.GraphFreedInCapture+c.GraphOwned+c.DeferredFrees+c.GraphReleased+c.GraphDropped != 0 {
			t.Errorf("graph counters moved: %+v", c)
		}
	})
}

// TestGPUFreeStreamRecordStream frees memory used on two streams: the free
// goes through the free stream after both, once, and the data written
// before it are intact.
func TestGPUFreeStreamRecordStream(t *testing.T) {
	r := openGPURig(t, 2)
	defer r.finish()
	s, u := r.ss[0], r.ss[1]
	out := r.alloc(gpuBuf, u)
	p := r.alloc(gpuBuf, s)
	r.memset(p, 0x55, gpuBuf, s)
	ev, err := r.b.EventCreate(0, gpumem.EventDisableTiming)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.b.EventDestroy(ev) }()
	if err := r.b.EventRecord(ev, s); err != nil {
		t.Fatal(err)
	}
	if err := r.b.StreamWaitEvent(u, ev); err != nil {
		t.Fatal(err)
	}
	r.copy(out, p, gpuBuf, u)
	if err := r.a.RecordStream(p, u); err != nil {
		t.Fatal(err)
	}
	before := r.a.Counters(0).CrossStreamFrees
	r.free(p, s)
	if n := r.a.Counters(0).CrossStreamFrees - before; n != 1 {
		t.Errorf("cross-stream frees = %d, want 1", n)
	}
	// New allocations on s must not disturb u's copy of p.
	q := r.alloc(gpuBuf, s)
	r.memset(q, 0x66, gpuBuf, s)
	r.sync(u)
	r.expect("the copy made on the recorded stream", out, gpuBuf, 0x55)
	r.free(q, s)
	r.free(out, u)
	c := r.settle(func(c asyncpool.Counters) bool { return c.PendingFrees == 0 && c.LiveAllocations == 0 })
	st := r.a.Stats(0)
	if st.NumDeviceFree != st.NumDeviceAlloc || st.PendingReleaseBytes != 0 {
		t.Errorf("device frees %d of %d allocations, pending %d, counters %+v", st.NumDeviceFree, st.NumDeviceAlloc, st.PendingReleaseBytes, c)
	}
}
