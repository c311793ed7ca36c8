package blas_test

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/blas"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/sim"
)

// Bad shapes are errors matching gpumem.ErrInvalidValue, and never reach
// the engine: the simulator counts no launch for them.
func TestShapeErrors(t *testing.T) {
	g := newGPU(t)
	h := openHandle(t, g)
	p := upload(t, g, blas.F64, make([]float64, 64))
	T, N := blas.Trans, blas.NoTrans
	cases := []struct {
		name, want string
		call       func() error
	}{
		{"negative m", "m = -1", func() error { return h.Sgemm(N, N, -1, 2, 2, 1, p, 1, p, 2, 0, p, 1) }},
		{"negative k", "k = -3", func() error { return h.Dgemm(N, N, 2, 2, -3, 1, p, 2, p, 2, 0, p, 2) }},
		{"lda < m", "lda = 3", func() error { return h.Sgemm(N, N, 4, 2, 2, 1, p, 3, p, 2, 0, p, 4) }},
		{"lda < k transposed", "lda = 1", func() error { return h.Sgemm(T, N, 4, 2, 2, 1, p, 1, p, 2, 0, p, 4) }},
		{"ldb < k", "ldb = 1", func() error { return h.Sgemm(N, N, 2, 2, 2, 1, p, 2, p, 1, 0, p, 2) }},
		{"ldb < n transposed", "ldb = 2", func() error { return h.Sgemm(N, T, 2, 3, 2, 1, p, 2, p, 2, 0, p, 2) }},
		{"ldc < m", "ldc = 1", func() error { return h.Dgemm(N, N, 2, 2, 2, 1, p, 2, p, 2, 0, p, 1) }},
		{"ld 0 for an empty matrix", "lda = 0", func() error { return h.Sgemm(N, N, 0, 2, 2, 1, p, 0, p, 2, 0, p, 1) }},
		{"ld beyond int32", "ldc = 2147483648", func() error { return h.Sgemm(N, N, 2, 2, 2, 1, p, 2, p, 2, 0, p, 1<<31) }},
		{"m beyond int32", "m = 4294967296", func() error { return h.Sgemm(N, N, 1<<32, 1, 1, 1, p, 1<<32, p, 1, 0, p, 1<<32) }},
		{"null A", "A is a null pointer", func() error { return h.Sgemm(N, N, 2, 2, 2, 1, 0, 2, p, 2, 0, p, 2) }},
		{"null C", "C is a null pointer", func() error { return h.Sgemm(N, N, 2, 2, 0, 1, 0, 2, 0, 2, 0, 0, 2) }},
		{"bad transpose", "transA", func() error { return h.Sgemm(blas.Transpose(7), N, 2, 2, 2, 1, p, 2, p, 2, 0, p, 2) }},
		{"wrapping extent", "wrap around", func() error { return h.Dgemm(N, N, 2, 2, 2, 1, ^gpumem.Ptr(0)-8, 2, p, 2, 0, p, 2) }},
		{"overflowing extent", "overflows", func() error { return h.Dgemm(N, N, 2, 1<<30, 2, 1, p, 2, p, 2, 0, p, 1<<31-1) }},
		{"overlapping batches", "strideC 3", func() error {
			return h.SgemmStridedBatched(N, N, 2, 2, 2, 1, p, 2, 4, p, 2, 4, 0, p, 2, 3, 2)
		}},
		{"negative stride", "negative stride", func() error {
			return h.DgemmStridedBatched(N, N, 2, 2, 2, 1, p, 2, -4, p, 2, 4, 0, p, 2, 4, 2)
		}},
		{"batches wrapping", "wrap around", func() error {
			return h.SgemmStridedBatched(N, N, 2, 2, 2, 1, p, 2, 4, p, 2, 4, 0, ^gpumem.Ptr(0)-1<<20, 2, 1<<16, 64)
		}},
		{"batches overflowing", "overflow the address space", func() error {
			return h.SgemmStridedBatched(N, N, 2, 2, 2, 1, p, 2, 1<<50, p, 2, 4, 0, p, 2, 4, 1<<20)
		}},
		{"negative batch", "batch count -1", func() error {
			return h.DgemmStridedBatched(N, N, 2, 2, 2, 1, p, 2, 4, p, 2, 4, 0, p, 2, 4, -1)
		}},
		{"gemv lda", "lda = 1", func() error { return h.Sgemv(N, 2, 2, 1, p, 1, p, 1, 0, p, 1) }},
		{"gemv incx 0", "incx = 0", func() error { return h.Dgemv(T, 2, 2, 1, p, 2, p, 0, 0, p, 1) }},
		{"gemv null y", "y is a null pointer", func() error { return h.Dgemv(T, 2, 3, 1, p, 2, p, 1, 0, 0, 1) }},
		{"axpy incy 0", "incy = 0", func() error { return h.Saxpy(3, 1, p, 1, p, 0) }},
		{"axpy negative n", "n = -1", func() error { return h.Daxpy(-1, 1, p, 1, p, 1) }},
		{"axpy null x", "x is a null pointer", func() error { return h.Daxpy(3, 1, 0, 1, p, 1) }},
		{"axpy inc beyond int32", "out of the int range", func() error { return h.Daxpy(3, 1, p, 1<<31, p, 1) }},
		{"dot overflow", "overflow", func() error { _, err := h.Ddot(1<<30, p, 1<<30, p, 1); return err }},
		{"nrm2 negative inc", "positive increment", func() error { _, err := h.Snrm2(3, p, -1); return err }},
		{"scal negative inc", "positive increment", func() error { return h.Dscal(3, 2, p, -2) }},
		{"device dot null result", "null result", func() error { return h.DotDevice(blas.F32, 3, p, 1, p, 1, 0) }},
		{"device gemm null alpha", "null alpha", func() error { return h.GemmDevice(blas.F64, N, N, 2, 2, 2, 0, p, 2, p, 2, p, p, 2) }},
		{"device type", "element type f16", func() error { return h.AxpyDevice(blas.F16, 2, p, p, 1, p, 1) }},
		{"gemmex input type", "F16 or BF16", func() error { return h.GemmEx(N, N, 2, 2, 2, 1, p, 2, p, 2, 0, p, 2, blas.F32, blas.F32) }},
		{"gemmex output type", "C of type bf16", func() error { return h.GemmEx(N, N, 2, 2, 2, 1, p, 2, p, 2, 0, p, 2, blas.F16, blas.BF16) }},
	}
	launches := g.Calls("LaunchKernel")
	for _, c := range cases {
		err := c.call()
		if !errors.Is(err, gpumem.ErrInvalidValue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want ErrInvalidValue saying %q", c.name, err, c.want)
		}
	}
	if n := g.Calls("LaunchKernel") - launches; n != 0 {
		t.Errorf("%d launches for calls that failed their checks", n)
	}
	// Empty calls are fine, with null pointers where nothing is read.
	if err := h.Sgemm(N, N, 2, 2, 0, 1, 0, 2, 0, 1, 0.5, p, 2); err != nil {
		t.Errorf("k = 0: %v", err)
	}
	if err := h.SgemmStridedBatched(N, N, 2, 2, 2, 1, 0, 2, 0, 0, 2, 0, 0, 0, 2, 0, 0); err != nil {
		t.Errorf("no batches: %v", err)
	}
	if r, err := h.Sdot(0, 0, 1, 0, 1); r != 0 || err != nil {
		t.Errorf("empty dot = %v, %v", r, err)
	}
}

func TestCloseAndLeaks(t *testing.T) {
	g := newGPU(t)
	before := len(g.Leaks())
	h, err := blas.Open(g, 0)
	if err != nil {
		t.Fatal(err)
	}
	if h.Library() != "sim" || h.Device() != 0 {
		t.Errorf("Library, Device = %q, %d", h.Library(), h.Device())
	}
	p := upload(t, g, blas.F32, []float64{1, 2, 3})
	if r, err := h.Snrm2(3, p, 1); err != nil || r*r < 13.99 || r*r > 14.01 {
		t.Errorf("Snrm2 = %v, %v", r, err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if n := len(g.Leaks()); n != before+1 { // the upload only
		t.Errorf("%d live objects after Close, want %d: %v", n, before+1, g.Leaks())
	}
	for name, call := range map[string]func() error{
		"Saxpy":     func() error { return h.Saxpy(3, 1, p, 1, p, 1) },
		"Sdot":      func() error { _, err := h.Sdot(3, p, 1, p, 1); return err },
		"Sgemm":     func() error { return h.Sgemm(blas.NoTrans, blas.NoTrans, 1, 1, 1, 1, p, 1, p, 1, 0, p, 1) },
		"SetStream": func() error { return h.SetStream(gpumem.Stream{}) },
	} {
		if err := call(); !errors.Is(err, gpumem.ErrClosed) {
			t.Errorf("%s after Close: %v", name, err)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	g := newGPU(t)
	if _, err := blas.Open(nil, 0); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("nil backend: %v", err)
	}
	if _, err := blas.Open(g, 1); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("device 1 of 1: %v", err)
	}
	if _, err := blas.Open(g, 0, blas.WithStream(gpumem.Stream{Device: 1, Handle: 5})); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("a stream of another device: %v", err)
	}
	// An unknown stream fails the first call queued on it, as with the
	// libraries.
	h, err := blas.Open(g, 0, blas.WithStream(gpumem.Stream{Handle: 12345}))
	if err != nil {
		t.Fatal(err)
	}
	x := upload(t, g, blas.F32, []float64{1})
	if err := h.Sscal(1, 2, x, 1); err == nil || !strings.Contains(err.Error(), "stream") {
		t.Errorf("a call on an unknown stream: %v", err)
	}
	h.Close()
	a, err := caching.New(g, caching.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := blas.Open(g, 0, blas.WithWorkspace(a, 0)); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("empty workspace: %v", err)
	}
	if len(g.Leaks()) != 1 { // x
		t.Errorf("failed Opens left %v", g.Leaks())
	}
}

// The handle's calls are queued on its stream, after the work before them;
// the workspace comes from a gpumem allocator and goes back at Close.
func TestStreamAndWorkspace(t *testing.T) {
	g := newGPU(t)
	a, err := caching.New(g, caching.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s1, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.StreamDestroy(s1)
	s2, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.StreamDestroy(s2)
	h, err := blas.Open(g, 0, blas.WithStream(s1), blas.WithWorkspace(a, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Stats(0).AllocatedBytes[0].Current; got < 1<<20 {
		t.Errorf("the allocator hands out %d bytes with the workspace taken", got)
	}
	if h.Stream() != s1 {
		t.Errorf("Stream = %v", h.Stream())
	}
	// x = 1,2,3 written on s1 before the axpy is queued there.
	x, err := a.Allocate(12, s1)
	if err != nil {
		t.Fatal(err)
	}
	y, err := a.Allocate(12, s1)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.MemcpyAsync(x, upload(t, g, blas.F32, []float64{1, 2, 3}), 12, s1); err != nil {
		t.Fatal(err)
	}
	if err := g.MemsetAsync(y, 0, 12, s1); err != nil {
		t.Fatal(err)
	}
	if err := h.Saxpy(3, 2, x, 1, y, 1); err != nil {
		t.Fatal(err)
	}
	if err := h.SetStream(s2); err != nil {
		t.Fatal(err)
	}
	if err := h.SetStream(gpumem.Stream{Device: 3}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("a stream of another device: %v", err)
	}
	if err := g.StreamSynchronize(s1); err != nil {
		t.Fatal(err)
	}
	if r, err := h.Sdot(3, y, 1, y, 1); err != nil || r != 4+16+36 {
		t.Errorf("y.y = %v, %v; want 56", r, err)
	}
	if err := a.Deallocate(x, s2); err != nil {
		t.Fatal(err)
	}
	if err := a.Deallocate(y, s2); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.DeviceSynchronize(0); err != nil {
		t.Fatal(err)
	}
	if got := a.Stats(0).AllocatedBytes[0].Current; got != 0 {
		t.Errorf("%d bytes still handed out after Close", got)
	}
}

// newFaultingGPU is newGPU for a test whose kernels fault on purpose: its
// violations are the test's to check.
func newFaultingGPU(t *testing.T) *sim.GPU {
	t.Helper()
	g, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// A matrix whose leading dimension runs past its allocation (which Go
// cannot see) faults the kernel as it would fault a GPU: the stream's
// next synchronization reports it.
func TestOutOfBoundsFaults(t *testing.T) {
	g := newFaultingGPU(t)
	h := openHandle(t, g)
	small := upload(t, g, blas.F32, make([]float64, 4))
	big := upload(t, g, blas.F32, make([]float64, 64))
	if err := h.Sgemm(blas.NoTrans, blas.NoTrans, 4, 4, 4, 1, small, 4, big, 4, 0, big, 4); err != nil {
		t.Fatal(err) // queued: the fault comes later
	}
	if err := g.StreamSynchronize(gpumem.Stream{}); err == nil || !strings.Contains(err.Error(), "past the end") {
		t.Errorf("synchronize after an out-of-bounds read: %v", err)
	}
	if len(g.Violations()) == 0 {
		t.Error("no violation recorded")
	}
}

// A vector that runs past its buffer into the allocation after it faults
// the kernel too, and leaves that allocation as it was.
func TestOverrunIntoTheNextAllocationFaults(t *testing.T) {
	g := newFaultingGPU(t)
	h := openHandle(t, g)
	x := upload(t, g, blas.F64, make([]float64, 128)) // 1 KiB
	y := upload(t, g, blas.F64, []float64{7, 7, 7, 7})
	if err := h.Dscal(256, 2, x, 1); err != nil { // 2 KiB of x
		t.Fatal(err)
	}
	if err := g.StreamSynchronize(gpumem.Stream{}); err == nil || !strings.Contains(err.Error(), "runs past the end") {
		t.Errorf("synchronize after a scal past the buffer: %v", err)
	}
	got := make([]byte, 8)
	if err := g.CopyFromDevice(got, y); err != nil {
		t.Fatal(err)
	}
	if v := math.Float64frombits(binary.LittleEndian.Uint64(got)); v != 7 {
		t.Errorf("the allocation after the buffer reads %v, want 7 (untouched)", v)
	}
}

// Many goroutines share one handle, some changing its stream.
func TestConcurrentUse(t *testing.T) {
	g := newGPU(t)
	h := openHandle(t, g)
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		x := upload(t, g, blas.F64, []float64{1, 2, 3, float64(w)})
		var s gpumem.Stream
		if w%2 == 1 {
			var err error
			if s, err = g.StreamCreate(0, gpumem.StreamNonBlocking, 0); err != nil {
				t.Fatal(err)
			}
			defer g.StreamDestroy(s)
		}
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 30; i++ {
				if w%2 == 1 && i%10 == 0 {
					if err := h.SetStream(s); err != nil {
						t.Error(err)
						return
					}
				}
				r, err := h.Ddot(4, x, 1, x, 1)
				if want := 14 + float64(w*w); err != nil || r != want {
					t.Errorf("worker %d: dot = %v, %v; want %v", w, r, err, want)
					return
				}
			}
		}(w)
	}
	wg.Wait()
}

// Calls queued while the handle's stream is captured become graph nodes,
// as the libraries' kernels do, and run at each launch of the graph.
func TestCapture(t *testing.T) {
	g := newGPU(t)
	s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.StreamDestroy(s)
	h := openHandle(t, g, blas.WithStream(s))
	x := upload(t, g, blas.F64, []float64{1, 2})
	y := upload(t, g, blas.F64, []float64{0, 0})
	if err := g.StreamBeginCapture(s, gpumem.CaptureModeRelaxed); err != nil {
		t.Fatal(err)
	}
	if err := h.Daxpy(2, 3, x, 1, y, 1); err != nil {
		t.Fatal(err)
	}
	graph, err := g.StreamEndCapture(s)
	if err != nil {
		t.Fatal(err)
	}
	defer g.GraphDestroy(graph)
	if got := download(t, g, blas.F64, y, 2); got[0] != 0 || got[1] != 0 {
		t.Fatalf("the captured call ran at capture: %v", got)
	}
	exec, err := g.GraphInstantiate(graph)
	if err != nil {
		t.Fatal(err)
	}
	defer g.GraphExecDestroy(exec)
	for i := 0; i < 2; i++ {
		if err := g.GraphLaunch(exec, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.StreamSynchronize(s); err != nil {
		t.Fatal(err)
	}
	if got := download(t, g, blas.F64, y, 2); got[0] != 6 || got[1] != 12 {
		t.Errorf("after two launches y = %v, want [6 12]", got)
	}
}

// A handle on the second device of two runs there, on that device's
// streams and memory.
func TestSecondDevice(t *testing.T) {
	g, err := sim.New(sim.Config{Devices: []sim.DeviceConfig{{}, {}}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	h, err := blas.Open(g, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.Device() != 1 || h.Stream().Device != 1 {
		t.Errorf("Device %d, Stream %v", h.Device(), h.Stream())
	}
	p, err := g.Malloc(1, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Free(1, p)
	if err := g.CopyToDevice(p, toBytes(blas.F64, []float64{3, 4})); err != nil {
		t.Fatal(err)
	}
	if r, err := h.Dnrm2(2, p, 1); err != nil || r != 5 {
		t.Errorf("Dnrm2 on device 1 = %v, %v", r, err)
	}
	if err := h.SetStream(gpumem.Stream{Device: 0}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("a stream of device 0: %v", err)
	}
}
