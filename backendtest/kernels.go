package backendtest

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/kernel"
	"github.com/gpumem/gpumem/kernels/simkernels"
)

// testKernels checks gpumem.Kernels where the backend runs a kernel with
// no compiler: the simulator, with the project's kernels written in Go
// (package simkernels). It loads a module, looks its functions up, reads
// attributes and occupancy, launches saxpy and reduce_sum through package
// kernel on a stream and in a captured graph replayed twice, checks every
// result against Go, and unloads the module. Other backends run compiled
// kernels only; the GPU tier (tests/gpu_kernel_test.go, gpu_rtc_test.go)
// covers them, and this subtest skips saying so.
func testKernels(t *testing.T, b gpumem.Backend, dev int) {
	if b.Name() != "sim" {
		t.Skipf("backend %q runs compiled kernels only and the suite carries no compiler; the GPU tier launches them", b.Name())
	}
	must(t, simkernels.Register(), "registering the Go kernels")
	m, err := b.ModuleLoadData(dev, simkernels.Image())
	must(t, err, "ModuleLoadData")
	unloaded := false
	defer func() {
		if !unloaded {
			_ = b.ModuleUnload(m)
		}
	}()
	saxpy, err := b.ModuleFunction(m, simkernels.Saxpy.Name)
	must(t, err, "ModuleFunction(saxpy)")
	reduce, err := b.ModuleFunction(m, simkernels.Reduce.Name)
	must(t, err, "ModuleFunction(reduce_sum)")
	if _, err := b.ModuleFunction(m, "no_such_kernel"); err == nil {
		t.Error("ModuleFunction found a kernel the module does not declare")
	}
	if n, err := b.FuncAttribute(reduce, gpumem.FuncMaxThreadsPerBlock); err != nil || n != simkernels.ReduceThreads {
		t.Errorf("reduce_sum's max threads per block = %d, %v; want %d", n, err, simkernels.ReduceThreads)
	}
	_, bs, err := b.OccupancyMaxPotentialBlockSize(saxpy, 0, 0)
	must(t, err, "OccupancyMaxPotentialBlockSize")
	if bs <= 0 || bs%32 != 0 {
		t.Errorf("suggested block size %d", bs)
	}
	if n, err := b.OccupancyMaxActiveBlocks(saxpy, bs, 0); err != nil || n <= 0 {
		t.Errorf("OccupancyMaxActiveBlocks(%d) = %d, %v", bs, n, err)
	}

	const n = 10007 // not a multiple of any block size
	x, y, sum := malloc(t, b, dev, 4*n), malloc(t, b, dev, 4*n), malloc(t, b, dev, 4)
	xs, ys := make([]float32, n), make([]float32, n)
	for i := range xs {
		xs[i], ys[i] = float32(i%97), float32(i%13)-6
	}
	must(t, b.CopyToDevice(x, floatBytes(xs)), "CopyToDevice(x)")
	must(t, b.CopyToDevice(y, floatBytes(ys)), "CopyToDevice(y)")
	must(t, b.Memset(sum, 0, 4), "Memset(sum)")
	s := newStream(t, b, dev, gpumem.StreamNonBlocking)

	checkParams(t, b, saxpy)
	ls, err := kernel.New(b, saxpy, kernel.Float32, kernel.Ptr, kernel.Ptr, kernel.Uint64)
	must(t, err, "kernel.New(saxpy)")
	defer ls.Close()
	lr, err := kernel.New(b, reduce, kernel.Ptr, kernel.Ptr, kernel.Uint64)
	must(t, err, "kernel.New(reduce_sum)")
	defer lr.Close()
	const a = 0.5
	must(t, ls.SetF32(0, a), "SetF32")
	must(t, ls.SetPtr(1, x), "SetPtr")
	must(t, ls.SetPtr(2, y), "SetPtr")
	must(t, ls.SetU64(3, n), "SetU64")
	grid := gpumem.Dim3{X: uint32((n + bs - 1) / bs)}
	must(t, ls.Launch(s, grid, gpumem.Dim3{X: uint32(bs)}, 0), "launching saxpy")
	must(t, lr.SetPtr(0, y), "SetPtr")
	must(t, lr.SetPtr(1, sum), "SetPtr")
	must(t, lr.SetU64(2, n), "SetU64")
	must(t, lr.Launch(s, gpumem.Dim3{X: 8}, gpumem.Dim3{X: simkernels.ReduceThreads}, 0), "launching reduce_sum")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	for i := range ys {
		ys[i] += a * xs[i]
	}
	checkFloats(t, b, y, ys, "saxpy")
	checkSum(t, b, sum, ys)

	// Captured once, replayed twice: y += 2*a*x.
	err = b.StreamBeginCapture(s, gpumem.CaptureModeRelaxed)
	skipIfNotSupported(t, err, "StreamBeginCapture")
	must(t, ls.Launch(s, grid, gpumem.Dim3{X: uint32(bs)}, 0), "capturing saxpy")
	g, err := b.StreamEndCapture(s)
	must(t, err, "StreamEndCapture")
	ge, err := b.GraphInstantiate(g)
	must(t, err, "GraphInstantiate")
	for range 2 {
		must(t, b.GraphLaunch(ge, s), "GraphLaunch")
	}
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	must(t, b.GraphExecDestroy(ge), "GraphExecDestroy")
	must(t, b.GraphDestroy(g), "GraphDestroy")
	for i := range ys {
		ys[i] += a * xs[i]
		ys[i] += a * xs[i]
	}
	checkFloats(t, b, y, ys, "saxpy replayed")

	must(t, b.ModuleUnload(m), "ModuleUnload")
	unloaded = true
	if _, err := b.ModuleFunction(m, simkernels.Saxpy.Name); err == nil {
		t.Error("ModuleFunction on an unloaded module succeeded")
	}
}

func floatBytes(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(f))
	}
	return out
}

// checkFloats compares device memory at p with want, exactly.
func checkFloats(t *testing.T, b gpumem.Backend, p gpumem.Ptr, want []float32, what string) {
	t.Helper()
	got := readBack(t, b, p, 4*len(want))
	for i, w := range want {
		if g := math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:])); g != w {
			t.Fatalf("%s: element %d is %g, want %g", what, i, g, w)
		}
	}
}

// checkSum compares the float at p with the sum of v, to float32's
// rounding over len(v) additions.
func checkSum(t *testing.T, b gpumem.Backend, p gpumem.Ptr, v []float32) {
	t.Helper()
	var want, mag float64
	for _, f := range v {
		want += float64(f)
		mag += math.Abs(float64(f))
	}
	got := float64(math.Float32frombits(binary.LittleEndian.Uint32(readBack(t, b, p, 4))))
	if tol := 1e-6*mag + 1e-3; math.Abs(got-want) > tol {
		t.Errorf("reduce_sum = %g, want %g (within %g)", got, want, tol)
	}
}

// checkParams reads saxpy's parameters where the backend reports them
// (gpumem.ParamReporter) and checks that kernel.New refuses a signature
// one parameter short; a backend that cannot report them says so with
// ErrNotSupported.
func checkParams(t *testing.T, b gpumem.Backend, saxpy gpumem.Function) {
	t.Helper()
	pr, ok := b.(gpumem.ParamReporter)
	if !ok {
		return
	}
	ps, err := pr.FuncParams(saxpy)
	if errors.Is(err, gpumem.ErrNotSupported) {
		t.Logf("FuncParams: %v", err)
		return
	}
	must(t, err, "FuncParams(saxpy)")
	want := []uint64{4, 8, 8, 8} // float a, float *x, float *y, size_t n
	if len(ps) != len(want) {
		t.Fatalf("saxpy reports %d parameters (%v), want %d", len(ps), ps, len(want))
	}
	for i, p := range ps {
		if p.Size != want[i] || i > 0 && p.Offset < ps[i-1].Offset+ps[i-1].Size {
			t.Errorf("saxpy's parameter %d: %+v (all: %v)", i, p, ps)
		}
	}
	t.Logf("saxpy's parameters as %s reports them: %v", b.Name(), ps)
	if l, err := kernel.New(b, saxpy, kernel.Float32, kernel.Ptr, kernel.Ptr); !errors.Is(err, gpumem.ErrInvalidValue) {
		if l != nil {
			l.Close()
		}
		t.Errorf("kernel.New(saxpy) one parameter short: %v, want ErrInvalidValue", err)
	}
}
