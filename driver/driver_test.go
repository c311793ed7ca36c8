package driver

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ebitengine/purego"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/dl"
	"github.com/gpumem/gpumem/internal/native"
	"github.com/gpumem/gpumem/internal/symtab"
)

func TestOpenMissingRequiredSymbolNamesIt(t *testing.T) {
	_, err := open(fakeLoader("cuMemAllocFromPoolAsync"), "")
	if err == nil {
		t.Fatal("Open succeeded without cuMemAllocFromPoolAsync")
	}
	if !strings.Contains(err.Error(), "cuMemAllocFromPoolAsync") || !strings.Contains(err.Error(), "fake-libcuda.so") {
		t.Fatalf("error does not name the symbol and library: %v", err)
	}
}

func TestMissingOptionalSymbolIsNotSupported(t *testing.T) {
	b := openFake(t, "cuMemAdvise_v2", "cuMemAdvise")
	defer b.Close()
	err := b.Advise(0x1000, 4096, gpumem.AdviseSetReadMostly, gpumem.DeviceLocation(0))
	if !isNotSupportedNaming(err, "cuMemAdvise_v2") {
		t.Fatalf("Advise without the symbol: %v, want ErrNotSupported naming cuMemAdvise_v2", err)
	}
	var nse *gpumem.NotSupportedError
	if !errors.As(err, &nse) || !strings.Contains(nse.Reason, "fake-libcuda.so") {
		t.Fatalf("error does not name the library: %v", err)
	}
	// Not exported at all in the fake: VMM.
	if _, err := b.MemCreate(0, 1<<21); !isNotSupportedNaming(err, "cuMemCreate") {
		t.Fatalf("MemCreate: %v", err)
	}
}

func TestNoDevice(t *testing.T) {
	fakeFunctions()
	fakeInit.Store(100)
	defer fakeInit.Store(0)
	_, err := open(fakeLoader(), "")
	if !errors.Is(err, gpumem.ErrNoDevice) {
		t.Fatalf("Open with cuInit returning 100: %v, want ErrNoDevice", err)
	}
	var ve *gpumem.Error
	if !errors.As(err, &ve) || ve.Code != 100 || ve.Name != "CUDA_ERROR_NO_DEVICE" || ve.Op != "cuInit" {
		t.Fatalf("error %#v lacks the vendor code, name or symbol", ve)
	}
	if !strings.Contains(err.Error(), "fake-libcuda.so") {
		t.Fatalf("error does not name the library: %v", err)
	}
}

func TestErrorTranslation(t *testing.T) {
	b := openFake(t)
	defer b.Close()
	_, err := b.Malloc(0, 1<<50)
	var ve *gpumem.Error
	if !errors.Is(err, gpumem.ErrOutOfMemory) || !errors.As(err, &ve) {
		t.Fatalf("huge Malloc: %v", err)
	}
	if ve.Backend != "cuda" || ve.Op != "cuMemAlloc_v2" || ve.Code != 2 || ve.Name != "CUDA_ERROR_OUT_OF_MEMORY" {
		t.Fatalf("error fields: %+v", ve)
	}
	if err := b.Free(0, 0x1234); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Fatalf("Free returning 1: %v", err)
	}
	if err := b.MemPoolTrimTo(gpumem.MemPool{Handle: 1}, 0); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Fatalf("status 801: %v", err)
	}
	done, err := b.StreamQuery(gpumem.Stream{Handle: 1})
	if err != nil || done {
		t.Fatalf("StreamQuery on NOT_READY: %v %v", done, err)
	}
	if err := b.EnablePeerAccess(0, 1); err != nil {
		t.Fatalf("EnablePeerAccess already enabled: %v", err)
	}
	if got := b.ErrorName(12345); got != "" {
		t.Fatalf("name of an unknown code: %q", got)
	}
	for code, want := range map[int]error{2: gpumem.ErrOutOfMemory, 100: gpumem.ErrNoDevice, 801: gpumem.ErrNotSupported,
		1: gpumem.ErrInvalidValue, 400: gpumem.ErrInvalidValue, 101: gpumem.ErrInvalidValue, 999: nil,
		900: gpumem.ErrInvalidValue, 901: gpumem.ErrInvalidValue, 908: gpumem.ErrInvalidValue, 909: nil} {
		if got := symtab.Statuses[symtab.CUDA].Sentinel(code, false); got != want {
			t.Errorf("sentinel(%d) = %v, want %v", code, got, want)
		}
	}
}

// TestStreamOrderedCallsMakeNoContextCurrent: the pool's allocation and
// the stream-ordered free on an explicit stream are called with no context
// made current (the driver takes it from the stream and the pool); on the
// default streams, which stand for the current context's, the device's
// context is made current, and a call that fails for any reason but a lack
// of memory (CUDA_ERROR_INVALID_CONTEXT, or another refusal) is made again
// with it current. A closed backend and a device out of range call nothing.
func TestStreamOrderedCallsMakeNoContextCurrent(t *testing.T) {
	b := openFake(t)
	defer b.Close()
	pool := gpumem.MemPool{Handle: 0x9000, Device: 1}
	dev1 := uintptr(fakeCtxBase + 1)
	for _, tc := range []struct {
		name    string
		handle  uintptr
		ctx     uintptr // current at the (last) call
		callsEa int64   // calls of each function
	}{
		{"explicit stream", 0x7000, 0, 1},
		{"legacy default stream (0)", 0, dev1, 1},
		{"CU_STREAM_LEGACY", 1, dev1, 1},
		{"CU_STREAM_PER_THREAD", 2, dev1, 1},
		{"driver wants a current context", fakeNeedsCtxStream, dev1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := gpumem.Stream{Device: 1, Handle: tc.handle}
			fakeCurrent.Store(0)
			allocs, frees := fakeAllocs.Load(), fakeFrees.Load()
			p, err := b.MallocFromPoolAsync(64, pool, s)
			if err != nil || p != 0x20000+64 {
				t.Fatalf("MallocFromPoolAsync = %#x, %v", uintptr(p), err)
			}
			if got, n := fakeSeenCtx.Load(), fakeAllocs.Load()-allocs; got != tc.ctx || n != tc.callsEa {
				t.Errorf("allocation: called %d times, last with context %#x current; want %d, %#x", n, got, tc.callsEa, tc.ctx)
			}
			fakeCurrent.Store(0)
			if err := b.FreeAsync(p, s); err != nil {
				t.Fatalf("FreeAsync: %v", err)
			}
			if got, n := fakeSeenCtx.Load(), fakeFrees.Load()-frees; got != tc.ctx || n != tc.callsEa {
				t.Errorf("free: called %d times, last with context %#x current; want %d, %#x", n, got, tc.callsEa, tc.ctx)
			}
		})
	}
	t.Run("other refusals are asked again with the context current", func(t *testing.T) {
		s := gpumem.Stream{Device: 1, Handle: fakeBadStream}
		fakeCurrent.Store(0)
		allocs, frees := fakeAllocs.Load(), fakeFrees.Load()
		if _, err := b.MallocFromPoolAsync(64, pool, s); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Fatalf("allocation on a refusing stream: %v, want invalid value", err)
		}
		if err := b.FreeAsync(0x20040, s); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Fatalf("free on a refusing stream: %v, want invalid value", err)
		}
		if a, f := fakeAllocs.Load()-allocs, fakeFrees.Load()-frees; a != 2 || f != 2 || fakeSeenCtx.Load() != dev1 {
			t.Errorf("allocation called %d times, free %d, last with context %#x; want 2, 2, %#x", a, f, fakeSeenCtx.Load(), dev1)
		}
	})
	t.Run("running out of memory is not asked again", func(t *testing.T) {
		fakeCurrent.Store(0)
		allocs := fakeAllocs.Load()
		_, err := b.MallocFromPoolAsync(1<<41, pool, gpumem.Stream{Device: 1, Handle: 0x7000})
		if !errors.Is(err, gpumem.ErrOutOfMemory) || !strings.Contains(err.Error(), "cuMemAllocFromPoolAsync") {
			t.Fatalf("huge allocation: %v, want out of memory naming cuMemAllocFromPoolAsync", err)
		}
		if n := fakeAllocs.Load() - allocs; n != 1 || fakeCurrent.Load() != 0 {
			t.Errorf("called %d times, context %#x made current; want once, none", n, fakeCurrent.Load())
		}
	})
	t.Run("closed backend", func(t *testing.T) {
		c := openFake(t)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		s := gpumem.Stream{Device: 1, Handle: 0x7000}
		allocs, frees := fakeAllocs.Load(), fakeFrees.Load()
		if _, err := c.MallocFromPoolAsync(64, pool, s); !errors.Is(err, gpumem.ErrClosed) {
			t.Errorf("allocation after Close: %v", err)
		}
		if err := c.FreeAsync(0x20040, s); !errors.Is(err, gpumem.ErrClosed) {
			t.Errorf("free after Close: %v", err)
		}
		if a, f := fakeAllocs.Load()-allocs, fakeFrees.Load()-frees; a != 0 || f != 0 {
			t.Errorf("after Close: %d allocations and %d frees called", a, f)
		}
	})
	t.Run("device out of range", func(t *testing.T) {
		allocs := fakeAllocs.Load()
		if _, err := b.MallocFromPoolAsync(64, pool, gpumem.Stream{Device: 2, Handle: 0x7000}); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Fatalf("stream of device 2 of 2: %v", err)
		}
		if n := fakeAllocs.Load() - allocs; n != 0 {
			t.Errorf("called %d times for a device out of range", n)
		}
	})
}

func TestCallsMakeTheirDeviceCurrent(t *testing.T) {
	b := openFake(t)
	defer b.Close()
	if n, _ := b.DeviceCount(); n != 2 {
		t.Fatalf("DeviceCount = %d", n)
	}
	for dev := 0; dev < 2; dev++ {
		if _, err := b.MallocAsync(64, gpumem.Stream{Device: dev}); err != nil {
			t.Fatal(err)
		}
		if got := fakeCurrent.Load(); got != uintptr(fakeCtxBase+dev) {
			t.Fatalf("device %d: context %#x current, want %#x", dev, got, fakeCtxBase+dev)
		}
		v, err := b.DeviceAttribute(dev, gpumem.AttrMemoryPoolsSupported)
		if err != nil || v != 115*10+dev {
			t.Fatalf("attribute: %d %v (want CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED on device %d)", v, err, dev)
		}
	}
	if _, err := b.Malloc(2, 64); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Fatalf("Malloc on device 2 of 2: %v", err)
	}
}

func TestLocationPackedByValue(t *testing.T) {
	b := openFake(t)
	defer b.Close()
	if err := b.Advise(0x1000, 64, gpumem.AdviseSetPreferredLocation, gpumem.DeviceLocation(1)); err != nil {
		t.Fatal(err)
	}
	if got := fakeLoc.Load(); got != 1|1<<32 { // {type DEVICE=1, id 1}
		t.Fatalf("packed location %#x", got)
	}
	if err := b.Advise(0x1000, 64, gpumem.AdviseSetPreferredLocation, gpumem.HostLocation()); err != nil {
		t.Fatal(err)
	}
	if got := fakeLoc.Load(); uint32(got) != 2 { // CU_MEM_LOCATION_TYPE_HOST
		t.Fatalf("packed host location %#x", got)
	}
	if err := b.Advise(0x1000, 64, gpumem.AdviseSetCoarseGrain, gpumem.HostLocation()); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Fatalf("coarse grain on CUDA: %v", err)
	}
}

func TestClosed(t *testing.T) {
	b := openFake(t)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Malloc(0, 64); !errors.Is(err, gpumem.ErrClosed) {
		t.Fatalf("Malloc after Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// releaseFake is the state of releaseFn, a cuDevicePrimaryCtxRelease_v2
// that counts the releases of each device and refuses device 1's while
// failOne is set.
var releaseFake struct {
	mu      sync.Mutex
	counts  map[uintptr]int
	failOne bool
}

var releaseFn = sync.OnceValue(func() uintptr {
	return purego.NewCallback(func(dev uintptr) uintptr {
		releaseFake.mu.Lock()
		defer releaseFake.mu.Unlock()
		if dev == 1 && releaseFake.failOne {
			return 999 // CUDA_ERROR_UNKNOWN
		}
		releaseFake.counts[dev]++
		return 0
	})
})

// TestCloseRetriesFailedRelease: a Close whose release of a primary context
// fails returns the error, and the next Close releases that context, and
// only it (each context retained at Open is released exactly once).
func TestCloseRetriesFailedRelease(t *testing.T) {
	base := fakeLoader()
	load := func(c ...string) (native.Library, error) {
		l, err := base(c...)
		if err == nil {
			l.(*fakeLib).syms["cuDevicePrimaryCtxRelease_v2"] = releaseFn()
		}
		return l, err
	}
	releaseFake.mu.Lock()
	releaseFake.counts, releaseFake.failOne = map[uintptr]int{}, true
	releaseFake.mu.Unlock()
	b, err := open(load, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err == nil {
		t.Fatal("Close with device 1's release refused succeeded")
	} else if !strings.Contains(err.Error(), "device 1") {
		t.Errorf("Close with device 1's release refused: %v, want an error naming the device", err)
	}
	if _, err := b.Malloc(0, 64); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("Malloc after a failed Close: %v, want ErrClosed", err)
	}
	releaseFake.mu.Lock()
	releaseFake.failOne = false
	releaseFake.mu.Unlock()
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("third Close: %v", err)
	}
	releaseFake.mu.Lock()
	defer releaseFake.mu.Unlock()
	if releaseFake.counts[0] != 1 || releaseFake.counts[1] != 1 {
		t.Errorf("releases per device %v, want one each", releaseFake.counts)
	}
}

// pointerAsks counts the calls of pointerFn, a cuPointerGetAttribute that
// says every pointer is device 1's.
var pointerAsks atomic.Int64

var pointerFn = sync.OnceValue(func() uintptr {
	return purego.NewCallback(func(data, attr, p uintptr) uintptr {
		pointerAsks.Add(1)
		put(data, int32(1))
		return 0
	})
})

// TestNoCallAfterClose: after Close the synchronous copies and memset
// return ErrClosed without calling the library: they asked it which device
// owns the pointer (making device 0's released context current) first.
func TestNoCallAfterClose(t *testing.T) {
	base := fakeLoader()
	load := func(c ...string) (native.Library, error) {
		l, err := base(c...)
		if err == nil {
			l.(*fakeLib).syms["cuPointerGetAttribute"] = pointerFn()
		}
		return l, err
	}
	b, err := open(load, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Memset(0x1000, 0, 16); err != nil {
		t.Fatal(err)
	}
	if pointerAsks.Load() == 0 {
		t.Fatal("Memset did not ask which device owns the pointer")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	before := pointerAsks.Load()
	buf := make([]byte, 16)
	for name, call := range map[string]func() error{
		"Memcpy":         func() error { return b.Memcpy(0x1000, 0x2000, 16) },
		"Memset":         func() error { return b.Memset(0x1000, 0, 16) },
		"CopyToDevice":   func() error { return b.CopyToDevice(0x1000, buf) },
		"CopyFromDevice": func() error { return b.CopyFromDevice(buf, 0x1000) },
	} {
		if err := call(); !errors.Is(err, gpumem.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	if n := pointerAsks.Load() - before; n != 0 {
		t.Errorf("the library was asked %d times about pointers after Close", n)
	}
}

// prefetchSeen records which prefetch symbol prefetchFns' functions got
// and its arguments.
var prefetchSeen struct {
	mu   sync.Mutex
	sym  string
	args [5]uintptr
}

var prefetchFns = sync.OnceValue(func() map[string]uintptr {
	rec := func(sym string) uintptr {
		return purego.NewCallback(func(a1, a2, a3, a4, a5 uintptr) uintptr {
			prefetchSeen.mu.Lock()
			defer prefetchSeen.mu.Unlock()
			prefetchSeen.sym, prefetchSeen.args = sym, [5]uintptr{a1, a2, a3, a4, a5}
			return 0
		})
	}
	return map[string]uintptr{
		"cuMemPrefetchAsync":    rec("cuMemPrefetchAsync"),
		"cuMemPrefetchAsync_v2": rec("cuMemPrefetchAsync_v2"),
		"cuMemAdvise":           rec("cuMemAdvise"),
	}
})

// TestPrefetchByDeviceUsesLegacyForm: a library without cuMemAdvise_v2
// (locations passed as devices) that has cuMemPrefetchAsync_v2 gets its
// prefetches through cuMemPrefetchAsync, whose arguments they are; the
// v2 form would read the device as a location and the stream as flags.
func TestPrefetchByDeviceUsesLegacyForm(t *testing.T) {
	base := fakeLoader("cuMemAdvise_v2")
	load := func(c ...string) (native.Library, error) {
		l, err := base(c...)
		if err == nil {
			for k, v := range prefetchFns() {
				l.(*fakeLib).syms[k] = v
			}
		}
		return l, err
	}
	be, err := open(load, "")
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	s := gpumem.Stream{Device: 1, Handle: 0x77}
	if err := be.Prefetch(0x1000, 64, gpumem.DeviceLocation(1), s); err != nil {
		t.Fatal(err)
	}
	prefetchSeen.mu.Lock()
	defer prefetchSeen.mu.Unlock()
	if want := [5]uintptr{0x1000, 64, 1, 0x77, 0}; prefetchSeen.sym != "cuMemPrefetchAsync" || prefetchSeen.args != want {
		t.Errorf("prefetch called %s%#x, want cuMemPrefetchAsync%#x", prefetchSeen.sym, prefetchSeen.args, want)
	}
}

func TestConcurrentCalls(t *testing.T) {
	b := openFake(t)
	defer b.Close()
	pool := gpumem.MemPool{Handle: 7}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			s := gpumem.Stream{Device: g % 2}
			for i := 1; i <= 200; i++ {
				p, err := b.MallocFromPoolAsync(uint64(i), pool, s)
				if err != nil || p != gpumem.Ptr(0x20000+i) {
					t.Errorf("MallocFromPoolAsync: %#x %v", p, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
}

func TestHotPathAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop cells on purpose; allocation counts are meaningless under -race")
	}
	// The fake's Go callbacks allocate on their own; point the hot path at
	// a C function that returns 0 (sched_yield ignores its arguments).
	libc, err := dl.Open("libc.so.6")
	if err != nil {
		t.Skip("no libc.so.6 to stand in for the driver: ", err)
	}
	yield, err := libc.Sym("sched_yield")
	if err != nil {
		t.Skip("libc has no sched_yield: ", err)
	}
	fns := fakeFunctions()
	load := func(...string) (native.Library, error) {
		l := &fakeLib{syms: map[string]uintptr{}}
		for k, v := range fns {
			l.syms[k] = v
		}
		for _, n := range []string{"cuCtxSetCurrent", "cuMemAllocFromPoolAsync", "cuMemFreeAsync", "cuEventRecord",
			"cuEventQuery", "cuStreamWaitEvent", "cuMemcpyAsync"} {
			l.syms[n] = yield
		}
		return l, nil
	}
	be, err := open(load, "")
	if err != nil {
		t.Fatal(err)
	}
	b := be.(*native.Backend)
	defer b.Close()
	s := gpumem.Stream{Handle: 3, Device: 1}
	pool := gpumem.MemPool{Handle: 7, Device: 1}
	e := gpumem.Event{Handle: 9, Device: 1}
	allocs := testing.AllocsPerRun(200, func() {
		p, _ := b.MallocFromPoolAsync(256, pool, s)
		_ = b.FreeAsync(p, s)
		_ = b.EventRecord(e, s)
		_, _ = b.EventQuery(e)
		_ = b.StreamWaitEvent(s, e)
		_ = b.MemcpyAsync(p, p, 16, s)
	})
	if allocs != 0 {
		t.Fatalf("hot path allocates %.1f times per round", allocs)
	}
}

// TestMapsHandleTwice: the CUDA driver maps a physical allocation at
// several addresses at once (cuMemMap; scripts/gpu/ghostbench.c checks it
// on a GPU), so expandable segments' moves within a segment leave ghosts.
func TestMapsHandleTwice(t *testing.T) {
	b := openFake(t)
	if ok, why := b.MapsHandleTwice(); !ok || why != "" {
		t.Errorf("MapsHandleTwice = %v, %q; want true", ok, why)
	}
}

// TestCopyToDeviceWaitsForTheCopy: a synchronous copy from Go memory may
// return before its transfer has landed, on the legacy default stream, so
// CopyToDevice synchronizes that stream after it (a kernel on a
// non-blocking stream launched next must read the new contents), and
// CopyFromDevice, whose copy has landed when it returns, does not.
func TestCopyToDeviceWaitsForTheCopy(t *testing.T) {
	b := openFake(t)
	fakeSteps.Store(0)
	if err := b.CopyToDevice(0x20000, make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	if got := fakeSteps.Load(); got != 10 {
		t.Errorf("CopyToDevice: steps %d, want 10 (a copy, then the default stream synchronized)", got)
	}
	fakeSteps.Store(0)
	if err := b.CopyFromDevice(make([]byte, 64), 0x20000); err != nil {
		t.Fatal(err)
	}
	if got := fakeSteps.Load(); got != 1 {
		t.Errorf("CopyFromDevice: steps %d, want 1 (the copy alone)", got)
	}
}

// The backend knows which captures begun through it are open, across
// backends of the process: a begin counts once it succeeds, an end once the
// stream has left capture (a failed end that leaves the stream capturing
// keeps it counted, one that ends the capture does not), the per-thread
// default stream's handle counts each thread's capture, and a destroyed
// stream's captures are gone.
func TestCapturesOpen(t *testing.T) {
	b, other := openFake(t), openFake(t)
	stream := func(h uintptr) gpumem.Stream { return gpumem.Stream{Device: 1, Handle: h} }
	open := func(want bool, when string) {
		t.Helper()
		if b.CapturesOpen() != want || other.CapturesOpen() != want {
			t.Fatalf("%s: CapturesOpen %v (the other backend %v), want %v", when, b.CapturesOpen(), other.CapturesOpen(), want)
		}
	}
	begin := func(be *native.Backend, s gpumem.Stream) {
		t.Helper()
		if err := be.StreamBeginCapture(s, gpumem.CaptureModeRelaxed); err != nil {
			t.Fatal(err)
		}
	}
	open(false, "before any capture")
	if err := b.StreamBeginCapture(stream(fakeRefusedStream), gpumem.CaptureModeRelaxed); err == nil {
		t.Fatal("a refused begin succeeded")
	}
	open(false, "after a refused begin")

	s := stream(0x5001)
	begin(b, s)
	open(true, "during a capture")
	if info, err := other.StreamCaptureInfo(s); err != nil || info.Status != gpumem.CaptureActive {
		t.Fatalf("capture info %+v, %v", info, err)
	}
	if _, err := b.StreamEndCapture(s); err != nil {
		t.Fatal(err)
	}
	open(false, "after the capture ended")

	// failedEnd begins a capture of h through the other backend and ends
	// it through b, which the fake refuses.
	failedEnd := func(h uintptr) {
		t.Helper()
		begin(other, stream(h))
		if _, err := b.StreamEndCapture(stream(h)); err == nil {
			t.Fatalf("stream %#x: the end succeeded", h)
		}
	}
	failedEnd(fakeInvalidatedStream)
	open(false, "after a failed end that ended the capture")

	perThread := stream(2) // one handle, a stream of each thread
	begin(b, perThread)
	begin(b, perThread)
	if _, err := b.StreamEndCapture(perThread); err != nil {
		t.Fatal(err)
	}
	open(true, "after one of two captures of the per-thread stream ended")
	fakeCapturing.Store(uintptr(2), int32(1)) // the fake keeps one status per handle
	if _, err := b.StreamEndCapture(perThread); err != nil {
		t.Fatal(err)
	}
	open(false, "after both captures of the per-thread stream ended")

	failedEnd(fakeStickyStream)
	open(true, "after a failed end that left the stream capturing")
	if err := b.StreamDestroy(stream(fakeStickyStream)); err != nil {
		t.Fatal(err)
	}
	fakeCapturing.Delete(uintptr(fakeStickyStream))
	open(false, "after the stuck capture's stream was destroyed")
}

// TestPoolBoolAttribute checks that a reuse policy set to any value but 0
// reaches the driver as 1 (a 32-bit int): 1<<32 was truncated to false.
func TestPoolBoolAttribute(t *testing.T) {
	b := openFake(t)
	defer b.Close()
	pool := gpumem.MemPool{Handle: 0x9000, Device: 1}
	for _, c := range []struct {
		v    uint64
		want int32
	}{{1 << 32, 1}, {1, 1}, {0, 0}, {^uint64(0), 1}} {
		fakePoolBool.Store(-1)
		if err := b.MemPoolSetAttribute(pool, gpumem.PoolReuseAllowOpportunistic, c.v); err != nil {
			t.Fatal(err)
		}
		if got := fakePoolBool.Load(); got != c.want {
			t.Errorf("PoolReuseAllowOpportunistic = %#x reached the driver as %d, want %d", c.v, got, c.want)
		}
	}
}

// TestDestroyedHandlesRefused checks that a stream or event the backend
// destroyed is refused with ErrInvalidValue before it reaches the library,
// whatever the call: the library would be handed a dead handle.
func TestDestroyedHandlesRefused(t *testing.T) {
	b := openFake(t)
	defer b.Close()
	s, err := b.StreamCreate(1, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	e, err := b.EventCreate(1, gpumem.EventDisableTiming)
	if err != nil {
		t.Fatal(err)
	}
	live, err := b.StreamCreate(1, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.EventRecord(e, s); err != nil {
		t.Fatal(err)
	}
	if err := b.StreamDestroy(s); err != nil {
		t.Fatal(err)
	}
	if err := b.EventDestroy(e); err != nil {
		t.Fatal(err)
	}
	before := fakeHandles.uses()
	pool := gpumem.MemPool{Handle: 0x9000, Device: 1}
	other := gpumem.Event{Handle: 0x5, Device: 1}
	for name, call := range map[string]func() error{
		"StreamDestroy again": func() error { return b.StreamDestroy(s) },
		"StreamSynchronize":   func() error { return b.StreamSynchronize(s) },
		"StreamQuery":         func() error { _, err := b.StreamQuery(s); return err },
		"MemsetAsync":         func() error { return b.MemsetAsync(0x1000, 0, 16, s) },
		"MallocFromPoolAsync": func() error { _, err := b.MallocFromPoolAsync(64, pool, s); return err },
		"FreeAsync":           func() error { return b.FreeAsync(0x1000, s) },
		"EventRecord, stream": func() error { return b.EventRecord(other, s) },
		"EventDestroy again":  func() error { return b.EventDestroy(e) },
		"EventSynchronize":    func() error { return b.EventSynchronize(e) },
		"EventQuery":          func() error { _, err := b.EventQuery(e); return err },
		"EventRecord, event":  func() error { return b.EventRecord(e, live) },
		"StreamWaitEvent":     func() error { return b.StreamWaitEvent(live, e) },
		"StreamBeginCapture":  func() error { return b.StreamBeginCapture(s, gpumem.CaptureModeRelaxed) },
		"StreamCaptureInfo":   func() error { _, err := b.StreamCaptureInfo(s); return err },
		"MemcpyAsync":         func() error { return b.MemcpyAsync(0x1000, 0x2000, 16, s) },
	} {
		if err := call(); !errors.Is(err, gpumem.ErrInvalidValue) || !strings.Contains(err.Error(), "destroyed") {
			t.Errorf("%s with a destroyed handle: %v, want ErrInvalidValue naming the destruction", name, err)
		}
	}
	if n := fakeHandles.uses() - before; n != 0 {
		t.Errorf("the library was called %d times with a destroyed handle", n)
	}
	// Handles still live are not affected.
	if err := b.EventRecord(other, live); err != nil {
		t.Errorf("a live stream after another's destruction: %v", err)
	}
	if err := b.StreamDestroy(live); err != nil {
		t.Fatal(err)
	}
}
