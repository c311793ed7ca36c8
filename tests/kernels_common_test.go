package tests

// Helpers shared by the tests that feed kernels with memory from the
// allocators: on the simulator (kernels_alloc_test.go, Go kernels) and on a
// GPU (gpu_rtc_test.go, compiled kernels). Both launch the project's saxpy
// and reduce_sum (package kernels; simkernels on the simulator) with the
// same arguments through package kernel, and check the whole result
// against Go, chunk by chunk, so that the host never holds a whole large
// buffer.

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/kernel"
)

const (
	saxpyA       = float32(2)
	reduceBlock  = 256  // kernels.ReduceThreads
	reduceBlocks = 1024 // at most; the kernel loops over the rest
	saxpyBlock   = 256
	chunkFloats  = 4 << 20 // 16 MiB of host memory per chunk
)

// The inputs, computed from the index so that no host copy of a whole
// buffer is needed; a*x+y is exact in float32.
func xAt(i uint64) float32 { return float32(i%1024) * 0.125 }
func yAt(i uint64) float32 { return float32(i%7) - 3 }

// kernelPair is saxpy and reduce_sum of one loaded module, with a launcher
// each.
type kernelPair struct {
	b               gpumem.Backend
	m               gpumem.Module
	saxpy, reduce   *kernel.Launcher
	saxpyF, reduceF gpumem.Function
}

// loadKernelPair loads image on device 0 and looks the two kernels up.
func loadKernelPair(t testing.TB, b gpumem.Backend, image []byte) *kernelPair {
	t.Helper()
	m, err := b.ModuleLoadData(0, image)
	if err != nil {
		t.Fatalf("ModuleLoadData: %v", err)
	}
	kp := &kernelPair{b: b, m: m}
	t.Cleanup(func() {
		if err := b.ModuleUnload(m); err != nil {
			t.Errorf("ModuleUnload: %v", err)
		}
	})
	if kp.saxpyF, err = b.ModuleFunction(m, "saxpy"); err != nil {
		t.Fatalf("ModuleFunction(saxpy): %v", err)
	}
	if kp.reduceF, err = b.ModuleFunction(m, "reduce_sum"); err != nil {
		t.Fatalf("ModuleFunction(reduce_sum): %v", err)
	}
	// saxpy(float a, const float *x, float *y, size_t n)
	if kp.saxpy, err = kernel.New(b, kp.saxpyF, kernel.Float32, kernel.Ptr, kernel.Ptr, kernel.Uint64); err != nil {
		t.Fatal(err)
	}
	// reduce_sum(const float *in, float *out, size_t n)
	if kp.reduce, err = kernel.New(b, kp.reduceF, kernel.Ptr, kernel.Ptr, kernel.Uint64); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kp.saxpy.Close(); kp.reduce.Close() })
	return kp
}

// launch queues y = a*x + y over n elements, then *sum = the sum of y, on
// s. sum must hold 4 bytes.
func (kp *kernelPair) launch(s gpumem.Stream, x, y, sum gpumem.Ptr, n uint64) error {
	l := kp.saxpy
	for _, err := range []error{l.SetF32(0, saxpyA), l.SetPtr(1, x), l.SetPtr(2, y), l.SetU64(3, n)} {
		if err != nil {
			return err
		}
	}
	grid := gpumem.Dim3{X: uint32((n + saxpyBlock - 1) / saxpyBlock)}
	if err := l.Launch(s, grid, gpumem.Dim3{X: saxpyBlock}, 0); err != nil {
		return fmt.Errorf("launching saxpy: %w", err)
	}
	if err := kp.b.MemsetAsync(sum, 0, 4, s); err != nil {
		return fmt.Errorf("zeroing the sum: %w", err)
	}
	r := kp.reduce
	for _, err := range []error{r.SetPtr(0, y), r.SetPtr(1, sum), r.SetU64(2, n)} {
		if err != nil {
			return err
		}
	}
	blocks := min((n+reduceBlock-1)/reduceBlock, reduceBlocks)
	if err := r.Launch(s, gpumem.Dim3{X: uint32(blocks)}, gpumem.Dim3{X: reduceBlock}, 0); err != nil {
		return fmt.Errorf("launching reduce_sum: %w", err)
	}
	return nil
}

// fillInputs writes x and y (n elements each) from xAt and yAt, a chunk at
// a time.
func fillInputs(t testing.TB, b gpumem.Backend, x, y gpumem.Ptr, n uint64) {
	t.Helper()
	buf := make([]byte, 4*min(n, chunkFloats))
	for off := uint64(0); off < n; off += chunkFloats {
		c := min(n-off, chunkFloats)
		for _, v := range []struct {
			p  gpumem.Ptr
			at func(uint64) float32
		}{{x, xAt}, {y, yAt}} {
			for i := range c {
				binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v.at(off+i)))
			}
			if err := b.CopyToDevice(v.p.Add(4*off), buf[:4*c]); err != nil {
				t.Fatalf("writing the inputs at element %d: %v", off, err)
			}
		}
	}
}

// checkResult reads y back a chunk at a time and compares every element
// with a*x+y computed in Go, and the reduction with the sum of y in
// float64 (within float32's rounding over the additions).
func checkResult(t testing.TB, b gpumem.Backend, y, sum gpumem.Ptr, n uint64, what string) {
	t.Helper()
	buf := make([]byte, 4*min(n, chunkFloats))
	var want, mag float64
	for off := uint64(0); off < n; off += chunkFloats {
		c := min(n-off, chunkFloats)
		if err := b.CopyFromDevice(buf[:4*c], y.Add(4*off)); err != nil {
			t.Fatalf("%s: reading y at element %d: %v", what, off, err)
		}
		for i := range c {
			w := saxpyA*xAt(off+i) + yAt(off+i)
			if g := math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:])); g != w {
				t.Fatalf("%s: y[%d] = %g, want %g", what, off+i, g, w)
			}
			want += float64(w)
			mag += math.Abs(float64(w))
		}
	}
	var s [4]byte
	if err := b.CopyFromDevice(s[:], sum); err != nil {
		t.Fatalf("%s: reading the sum: %v", what, err)
	}
	got := float64(math.Float32frombits(binary.LittleEndian.Uint32(s[:])))
	if tol := 1e-5*mag + 1; math.Abs(got-want) > tol {
		t.Errorf("%s: reduce_sum = %g, want %g (within %g)", what, got, want, tol)
	}
}
