package tests

// The GPU tier: runs whenever a device is present, skips saying why otherwise.

import (
	"bytes"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/driver"
	"github.com/gpumem/gpumem/hip"
	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/native"
	"github.com/gpumem/gpumem/internal/symtab"
)

func openGPU(t testing.TB, name string) gpumem.Backend {
	t.Helper()
	var (
		b   gpumem.Backend
		err error
	)
	switch name {
	case "cuda":
		b, err = driver.Open("")
	case "hip":
		b, err = hip.Open("")
	}
	if err != nil {
		t.Skipf("no %s device here: %v", name, err)
	}
	return b
}

// openCUDAPool opens the CUDA backend (the test skips without a device)
// with a non-blocking stream of device 0 (newTestStream) and the device's
// default pool; when t ends the stream goes, then the backend closes.
func openCUDAPool(t testing.TB) (*native.Backend, gpumem.Stream, gpumem.MemPool) {
	t.Helper()
	be := openGPU(t, "cuda")
	t.Cleanup(func() { be.Close() })
	s := newTestStream(t, be)
	pool, err := be.DefaultMemPool(0)
	must(t, err)
	return be.(*native.Backend), s, pool
}

// fillAndCheck sets n bytes at p to v on s, waits for s and reads them
// back: every byte must be v. what names the memory in a failure.
func fillAndCheck(t testing.TB, b gpumem.Backend, s gpumem.Stream, p gpumem.Ptr, n uint64, v byte, what string) {
	t.Helper()
	must(t, b.MemsetAsync(p, v, n, s))
	must(t, b.StreamSynchronize(s))
	host := make([]byte, n)
	must(t, b.CopyFromDevice(host, p))
	if i := bytes.IndexFunc(host, func(r rune) bool { return r != rune(v) }); i >= 0 {
		t.Fatalf("byte %d of %s reads %#x, want %#x", i, what, host[i], v)
	}
}

func TestGPUCUDABasics(t *testing.T) { gpuBasics(t, openGPU(t, "cuda")) }
func TestGPUHIPBasics(t *testing.T)  { gpuBasics(t, openGPU(t, "hip")) }

func gpuBasics(t *testing.T, b gpumem.Backend) {
	defer b.Close()
	v, err := b.Version()
	if err != nil {
		t.Fatal(err)
	}
	name, err := b.DeviceName(0)
	if err != nil {
		t.Fatal(err)
	}
	free, total, err := b.MemInfo(0)
	if err != nil || total == 0 || free > total {
		t.Fatalf("MemInfo: %d/%d %v", free, total, err)
	}
	t.Logf("%s %s, version %+v, %s free of %s", b.Name(), name, v, gpumem.FormatBytes(free), gpumem.FormatBytes(total))
	for _, a := range gpumem.Attributes() {
		if x, err := b.DeviceAttribute(0, a); err == nil {
			t.Logf("  %s = %d", a, x)
		}
	}
	p, err := b.Malloc(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	src := bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7}, 1<<20/7)
	if err := b.CopyToDevice(p, src); err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, len(src))
	if err := b.CopyFromDevice(dst, p); err != nil || !bytes.Equal(src, dst) {
		t.Fatalf("round trip through device memory: %v, equal %v", err, bytes.Equal(src, dst))
	}
	if err := b.Free(0, p); err != nil {
		t.Fatal(err)
	}
	s, err := b.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := b.DefaultMemPool(0)
	if err != nil {
		t.Fatal(err)
	}
	q, err := b.MallocFromPoolAsync(4096, pool, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.MemsetAsync(q, 0xab, 4096, s); err != nil {
		t.Fatal(err)
	}
	if err := b.StreamSynchronize(s); err != nil {
		t.Fatal(err)
	}
	small := make([]byte, 4096)
	if err := b.CopyFromDevice(small, q); err != nil || small[4095] != 0xab {
		t.Fatalf("memset then copy: %v %#x", err, small[4095])
	}
	if err := b.FreeAsync(q, s); err != nil {
		t.Fatal(err)
	}
	m, err := b.MallocManaged(0, 1<<20)
	if err == nil {
		if err := b.Advise(m, 1<<20, gpumem.AdviseSetPreferredLocation, gpumem.DeviceLocation(0)); err != nil {
			t.Errorf("Advise: %v", err)
		}
		if err := b.Prefetch(m, 1<<20, gpumem.DeviceLocation(0), s); err != nil {
			t.Errorf("Prefetch: %v", err)
		}
		if err := b.StreamSynchronize(s); err != nil {
			t.Fatal(err)
		}
		if loc, err := b.RangeLocation(m, 1<<20, gpumem.RangeLastPrefetchLocation); err != nil || loc != gpumem.DeviceLocation(0) {
			t.Errorf("last prefetch location %v %v", loc, err)
		}
		if err := b.Free(0, m); err != nil {
			t.Fatal(err)
		}
	}
	if g, err := b.MemGranularity(0, false); err == nil {
		t.Logf("VMM granularity %s", gpumem.FormatBytes(g))
	}
	done := make(chan struct{})
	if err := b.LaunchHostFunc(s, func() { close(done) }); err == nil {
		if err := b.StreamSynchronize(s); err != nil {
			t.Fatal(err)
		}
		<-done
	}
	if err := b.StreamDestroy(s); err != nil {
		t.Fatal(err)
	}
}

var gpuCtxOut uintptr

// BenchmarkGPUCtxGetCurrent measures cuCtxGetCurrent through the backend's
// call path (device context made current in the same transition), through
// ccall alone and through purego.SyscallN; compare with drvbench's loop_ns.
func BenchmarkGPUCtxGetCurrent(b *testing.B) {
	be := openGPU(b, "cuda")
	defer be.Close()
	vb := be.(*native.Backend)
	fn := vb.Fn(symtab.GetCurrent)
	p := uintptr(unsafe.Pointer(&gpuCtxOut))
	b.Run("backend(set+get)", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := vb.CallCurrent(0, symtab.GetCurrent, p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ccall", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ccall.Call1(fn, p)
		}
	})
	b.Run("purego.SyscallN", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			purego.SyscallN(fn, p)
		}
	})
}

// BenchmarkGPUPoolAllocFree is a 1 MiB stream-ordered allocation+free pair
// through the backend, from the device's current pool (cuMemAllocAsync) and
// from a named pool (cuMemAllocFromPoolAsync); compare with drvbench's pool
// loop_ns, which uses cuMemAllocAsync.
func BenchmarkGPUPoolAllocFree(b *testing.B) {
	be := openGPU(b, "cuda")
	defer be.Close()
	s, err := be.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		b.Fatal(err)
	}
	pool, _ := be.DefaultMemPool(0)
	if err := be.MemPoolSetAttribute(pool, gpumem.PoolReleaseThreshold, ^uint64(0)); err != nil {
		b.Fatal(err)
	}
	free := func(p gpumem.Ptr) error { return be.FreeAsync(p, s) }
	b.Run("MallocAsync", func(b *testing.B) {
		benchPairs(b, func() (gpumem.Ptr, error) { return be.MallocAsync(1<<20, s) }, free)
	})
	b.Run("MallocFromPoolAsync", func(b *testing.B) {
		benchPairs(b, func() (gpumem.Ptr, error) { return be.MallocFromPoolAsync(1<<20, pool, s) }, free)
	})
	be.StreamSynchronize(s)
	be.StreamDestroy(s)
}

// benchPairs times allocation+free pairs: alloc, then free of what it gave.
func benchPairs(b *testing.B, alloc func() (gpumem.Ptr, error), free func(gpumem.Ptr) error) {
	b.ReportAllocs()
	for b.Loop() {
		p, err := alloc()
		if err != nil {
			b.Fatal(err)
		}
		if err := free(p); err != nil {
			b.Fatal(err)
		}
	}
}

var gpuCaptureOut [4]uint64

// BenchmarkGPUCaptureQuery measures the capture-status question that the
// asyncpool allocator asks before each allocation and free: through the
// backend (device made current and cuStreamIsCapturing in one transition),
// and cuStreamIsCapturing and cuStreamGetCaptureInfo_v2 through ccall alone.
func BenchmarkGPUCaptureQuery(b *testing.B) {
	vb, s, _ := openCUDAPool(b)
	be := gpumem.Backend(vb)
	b.Run("backend.StreamCaptureInfo", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ci, err := be.StreamCaptureInfo(s); err != nil || ci.Status != gpumem.CaptureNone {
				b.Fatal(ci, err)
			}
		}
	})
	isc := vb.Fn(symtab.StreamIsCapturing)
	out := uintptr(unsafe.Pointer(&gpuCaptureOut[0]))
	b.Run("ccall.cuStreamIsCapturing", func(b *testing.B) {
		for b.Loop() {
			if r := ccall.Call2(isc, s.Handle, out); int32(r) != 0 {
				b.Fatal(int32(r))
			}
		}
	})
	info := vb.Fn(symtab.StreamCaptureInfo)
	b.Run("ccall.cuStreamGetCaptureInfo_v2", func(b *testing.B) {
		for b.Loop() {
			if r := ccall.Call6(info, s.Handle, out, out+8, out+16, 0, 0); int32(r) != 0 {
				b.Fatal(int32(r))
			}
		}
	})
}

// TestGPUGuardedCalls checks the one-transition capture check and call on the
// driver: a plain stream gets its allocation and free; a capturing stream
// gets CaptureActive back and no allocation (the capture stays valid). The
// backend knows the capture is open from its begin to its end.
func TestGPUGuardedCalls(t *testing.T) {
	vb, s, pool := openCUDAPool(t)
	be := gpumem.Backend(vb)
	if !vb.GuardedCalls() {
		t.Fatal("cuStreamIsCapturing did not resolve")
	}
	p, st, err := vb.MallocFromPoolAsyncUncaptured(1<<20, pool, s)
	if err != nil || st != gpumem.CaptureNone || p == 0 {
		t.Fatalf("plain stream: %#x, %v, %v", uintptr(p), st, err)
	}
	if st, err := vb.FreeAsyncUncaptured(p, s); err != nil || st != gpumem.CaptureNone {
		t.Fatalf("plain stream free: %v, %v", st, err)
	}
	if vb.CapturesOpen() {
		t.Fatal("a capture is open before any began")
	}
	if err := be.StreamBeginCapture(s, gpumem.CaptureModeRelaxed); err != nil {
		t.Fatal(err)
	}
	if !vb.CapturesOpen() {
		t.Error("the capture is not known to be open")
	}
	q, st, err := vb.MallocFromPoolAsyncUncaptured(1<<20, pool, s)
	if err != nil || st != gpumem.CaptureActive || q != 0 {
		t.Errorf("capturing stream: %#x, %v, %v", uintptr(q), st, err)
	}
	if st, err := vb.FreeAsyncUncaptured(p, s); err != nil || st != gpumem.CaptureActive {
		t.Errorf("capturing stream free: %v, %v", st, err)
	}
	g, err := be.StreamEndCapture(s)
	if err != nil {
		t.Fatalf("the capture did not survive the guarded calls: %v", err)
	}
	if vb.CapturesOpen() {
		t.Error("the capture is still known to be open after its end")
	}
	if err := be.GraphDestroy(g); err != nil {
		t.Fatal(err)
	}
	if err := be.StreamSynchronize(s); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkGPUTimeNow measures the clock reads that history entries cost.
func BenchmarkGPUTimeNow(b *testing.B) {
	// Only on the GPU machine, whose clock is the one that matters.
	openGPU(b, "cuda").Close()
	t0 := time.Now()
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			_ = time.Now()
		}
	})
	b.Run("time.Since", func(b *testing.B) {
		for b.Loop() {
			_ = time.Since(t0)
		}
	})
}
