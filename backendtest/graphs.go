package backendtest

import (
	"bytes"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumem/gpumem"
)

func testGraphCapture(t *testing.T, b gpumem.Backend, dev int) {
	const n = 1 << 20
	s := newStream(t, b, dev, gpumem.StreamNonBlocking)
	x := malloc(t, b, dev, n)
	y := malloc(t, b, dev, n)
	must(t, b.Memset(y, 0, n), "Memset")
	err := b.StreamBeginCapture(s, gpumem.CaptureModeGlobal)
	skipIfNotSupported(t, err, "StreamBeginCapture")
	info, err := b.StreamCaptureInfo(s)
	must(t, err, "StreamCaptureInfo")
	if info.Status != gpumem.CaptureActive || info.ID == 0 {
		t.Errorf("capture info during capture = %+v", info)
	}
	var hostRuns int
	var mu sync.Mutex
	must(t, b.MemsetAsync(x, 0xab, n, s), "captured MemsetAsync")
	must(t, b.MemcpyAsync(y, x, n, s), "captured MemcpyAsync")
	must(t, b.LaunchHostFunc(s, func() { mu.Lock(); hostRuns++; mu.Unlock() }), "captured LaunchHostFunc")
	g, err := b.StreamEndCapture(s)
	must(t, err, "StreamEndCapture")
	info, err = b.StreamCaptureInfo(s)
	must(t, err, "StreamCaptureInfo")
	if info.Status != gpumem.CaptureNone {
		t.Errorf("capture info after the capture = %+v", info)
	}
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	expectBytes(t, readBack(t, b, y, n), make([]byte, n), "captured work must not run before launch")
	mu.Lock()
	if hostRuns != 0 {
		t.Error("a captured host function ran during capture")
	}
	mu.Unlock()

	// User objects are optional (HIP before 5.3 has none): without them the
	// graph is still replayed and checked, and the subtest skips at the end.
	destroyed := make(chan struct{})
	uo, uoErr := b.UserObjectCreate(dev, func() { close(destroyed) })
	if uoErr == nil {
		must(t, b.GraphRetainUserObject(g, uo, 1, true), "GraphRetainUserObject")
	} else if !errors.Is(uoErr, gpumem.ErrNotSupported) {
		t.Fatalf("UserObjectCreate: %v", uoErr)
	}

	ge, err := b.GraphInstantiate(g)
	must(t, err, "GraphInstantiate")
	must(t, b.GraphLaunch(ge, s), "GraphLaunch")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	want := bytes.Repeat([]byte{0xab}, n)
	expectBytes(t, readBack(t, b, y, n), want, "first launch")
	must(t, b.Memset(y, 0, n), "Memset")
	must(t, b.GraphLaunch(ge, s), "second GraphLaunch")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	expectBytes(t, readBack(t, b, y, n), want, "second launch")
	mu.Lock()
	if hostRuns != 2 {
		t.Errorf("the captured host function ran %d times in two launches", hostRuns)
	}
	mu.Unlock()
	select {
	case <-destroyed:
		t.Error("the user object was destroyed while its graph lives")
	default:
	}
	must(t, b.GraphExecDestroy(ge), "GraphExecDestroy")
	must(t, b.GraphDestroy(g), "GraphDestroy")
	if uoErr != nil {
		skipIfNotSupported(t, uoErr, "UserObjectCreate")
	}
	select {
	case <-destroyed:
	case <-time.After(10 * time.Second):
		t.Error("the user object's destructor did not run after its graph was destroyed")
	}
}

func testGraphCaptureIllegal(t *testing.T, b gpumem.Backend, dev int) {
	s := newStream(t, b, dev, gpumem.StreamNonBlocking)
	err := b.StreamBeginCapture(s, gpumem.CaptureModeGlobal)
	skipIfNotSupported(t, err, "StreamBeginCapture")
	if _, err := b.StreamQuery(s); err == nil {
		t.Error("StreamQuery on a capturing stream succeeded")
	}
	info, err := b.StreamCaptureInfo(s)
	must(t, err, "StreamCaptureInfo")
	if info.Status != gpumem.CaptureInvalidated {
		t.Errorf("capture status after an illegal call = %v, want invalidated", info.Status)
	}
	if _, err := b.StreamEndCapture(s); err == nil {
		t.Error("ending an invalidated capture succeeded")
	}
	info, err = b.StreamCaptureInfo(s)
	must(t, err, "StreamCaptureInfo")
	if info.Status != gpumem.CaptureNone {
		t.Errorf("capture status after ending = %v", info.Status)
	}
	// The legacy default stream cannot be captured.
	if err := b.StreamBeginCapture(gpumem.Stream{Device: dev}, gpumem.CaptureModeRelaxed); err == nil {
		t.Error("capturing the legacy default stream succeeded")
		_, _ = b.StreamEndCapture(gpumem.Stream{Device: dev})
	}
}

// churn keeps the scheduler moving goroutines between OS threads until
// the returned function is called: goroutines that block in system calls
// make the scheduler hand their processors to other threads.
func churn() (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	for i := 0; i < 2*runtime.GOMAXPROCS(0)+2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				blockInSyscall()
				runtime.Gosched()
			}
		}()
	}
	return func() { done.Store(true); wg.Wait() }
}

// testGraphCaptureThread: a global or thread-local capture must end on the
// OS thread that began it. The goroutine that began it ends it, however
// the scheduler moves goroutines meanwhile; another goroutine (on another
// thread) is refused with WRONG_THREAD (908), and the driver drops the
// capture. A relaxed capture ends anywhere.
func testGraphCaptureThread(t *testing.T, b gpumem.Backend, dev int) {
	s := newStream(t, b, dev, gpumem.StreamNonBlocking)
	err := b.StreamBeginCapture(s, gpumem.CaptureModeRelaxed)
	skipIfNotSupported(t, err, "StreamBeginCapture")
	g, err := b.StreamEndCapture(s)
	must(t, err, "StreamEndCapture")
	must(t, b.GraphDestroy(g), "GraphDestroy")

	stop := churn()
	for i := 0; i < 100; i++ {
		mode := []gpumem.CaptureMode{gpumem.CaptureModeGlobal, gpumem.CaptureModeThreadLocal}[i%2]
		must(t, b.StreamBeginCapture(s, mode), "StreamBeginCapture")
		for j := 0; j < 3; j++ {
			time.Sleep(50 * time.Microsecond)
		}
		g, err := b.StreamEndCapture(s)
		if err != nil {
			stop()
			t.Fatalf("round %d: ending a capture (mode %d) on the goroutine that began it: %v", i, mode, err)
		}
		must(t, b.GraphDestroy(g), "GraphDestroy")
	}
	stop()

	endElsewhere := func() error {
		ch := make(chan error)
		go func() {
			runtime.LockOSThread() // a thread of its own for the rest of its life
			defer runtime.UnlockOSThread()
			g, err := b.StreamEndCapture(s)
			if err == nil {
				err = b.GraphDestroy(g)
			}
			ch <- err
		}()
		return <-ch
	}
	must(t, b.StreamBeginCapture(s, gpumem.CaptureModeGlobal), "StreamBeginCapture")
	err = endElsewhere()
	var ve *gpumem.Error
	if !errors.As(err, &ve) || ve.Code != 908 || !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("ending a global capture from another goroutine: %v; want the vendor's WRONG_THREAD (908)", err)
	}
	// The driver (CUDA 13) drops the capture: no graph, the stream is
	// free; the beginning goroutine's own end fails and frees its thread.
	info, err := b.StreamCaptureInfo(s)
	must(t, err, "StreamCaptureInfo")
	if info.Status != gpumem.CaptureNone {
		t.Errorf("capture status after an end from another thread = %v, want none (dropped)", info.Status)
	}
	if g, err := b.StreamEndCapture(s); err == nil {
		t.Error("ending a dropped capture succeeded")
		_ = b.GraphDestroy(g)
	}
	must(t, b.StreamBeginCapture(s, gpumem.CaptureModeGlobal), "StreamBeginCapture after a dropped capture")
	g, err = b.StreamEndCapture(s)
	must(t, err, "StreamEndCapture")
	must(t, b.GraphDestroy(g), "GraphDestroy")

	must(t, b.StreamBeginCapture(s, gpumem.CaptureModeRelaxed), "StreamBeginCapture")
	must(t, endElsewhere(), "ending a relaxed capture from another goroutine")
}

func testGraphMemoryNodes(t *testing.T, b gpumem.Backend, dev int) {
	if _, err := b.DefaultMemPool(dev); err != nil {
		skipIfNotSupported(t, err, "stream-ordered allocation")
	}
	const n = 1 << 20
	s := newStream(t, b, dev, gpumem.StreamNonBlocking)
	y := malloc(t, b, dev, n)
	must(t, b.Memset(y, 0, n), "Memset")
	err := b.StreamBeginCapture(s, gpumem.CaptureModeThreadLocal)
	skipIfNotSupported(t, err, "StreamBeginCapture")
	p, err := b.MallocAsync(n, s)
	if err != nil {
		_, _ = b.StreamEndCapture(s)
		t.Fatalf("MallocAsync during capture: %v", err)
	}
	must(t, b.MemsetAsync(p, 0x3c, n, s), "MemsetAsync")
	must(t, b.MemcpyAsync(y, p, n, s), "MemcpyAsync")
	must(t, b.FreeAsync(p, s), "FreeAsync during capture")
	g, err := b.StreamEndCapture(s)
	must(t, err, "StreamEndCapture")
	ge, err := b.GraphInstantiate(g)
	must(t, err, "GraphInstantiate")
	for i := 0; i < 2; i++ {
		must(t, b.GraphLaunch(ge, s), "GraphLaunch")
		must(t, b.StreamSynchronize(s), "StreamSynchronize")
		expectBytes(t, readBack(t, b, y, n), bytes.Repeat([]byte{0x3c}, n), "graph memory node data")
		must(t, b.Memset(y, 0, n), "Memset")
	}
	must(t, b.GraphExecDestroy(ge), "GraphExecDestroy")
	must(t, b.GraphDestroy(g), "GraphDestroy")
	must(t, b.DeviceSynchronize(dev), "DeviceSynchronize")
}
