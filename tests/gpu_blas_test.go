package tests

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"sort"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/blas"
)

// The BLAS binding on a GPU: cuBLAS (hipBLAS on an AMD machine) from the
// library GPUMEM_CUBLAS_LIBRARY (GPUMEM_HIPBLAS_LIBRARY) names or the
// loader finds, on memory of the caching allocator. Correctness against a
// float64 host reference, then sgemm and dgemm of 4096 x 4096 x 4096,
// printed as "BLAS sgemm 4096 TFLOPS=..." lines that scripts/gpu/run.sh
// (mode blas) sets beside torch.mm's from scripts/gpu/torchmm.py.

func openGPUBLAS(t *testing.T, backend string) *blasRig {
	t.Helper()
	b := openGPU(t, backend)
	t.Cleanup(func() { b.Close() })
	probe, err := blas.Open(b, 0)
	if err != nil {
		env := map[string]string{"cuda": "GPUMEM_CUBLAS_LIBRARY", "hip": "GPUMEM_HIPBLAS_LIBRARY"}[backend]
		if errors.Is(err, gpumem.ErrLibraryNotFound) && os.Getenv(env) == "" {
			t.Skipf("no BLAS library found (set %s): %v", env, err)
		}
		t.Fatalf("blas.Open: %v", err)
	}
	if err := probe.Close(); err != nil {
		t.Fatal(err)
	}
	return newBLASRig(t, b)
}

func TestGPUBLASCorrectnessCUDA(t *testing.T) { gpuBLASCorrectness(t, "cuda") }
func TestGPUBLASCorrectnessHIP(t *testing.T)  { gpuBLASCorrectness(t, "hip") }

func gpuBLASCorrectness(t *testing.T, backend string) {
	r := openGPUBLAS(t, backend)
	blasGemmCheck(t, r, 256, 192, 128)
	blasLevel12Check(t, r)
	blasStreamsCheck(t, r, 64, 64, 1<<16)
	// Bad shapes come back as errors from Go; the library is never called.
	if err := r.h.Sgemm(blas.NoTrans, blas.NoTrans, 4, 4, 4, 1, 1<<20, 2, 1<<20, 4, 0, 1<<20, 4); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("lda < m: %v", err)
	}
}

func TestGPUBLASThroughputCUDA(t *testing.T) { gpuBLASThroughput(t, "cuda") }

// gpuBLASThroughput times n^3 gemms: 3 warm-up calls, then 5 repetitions of
// 20 calls between two events on the handle's stream; the median is
// printed.
func gpuBLASThroughput(t *testing.T, backend string) {
	r := openGPUBLAS(t, backend)
	const n, iters, reps = 4096, 20, 5
	rnd := rand.New(rand.NewSource(7))
	for _, ty := range []blas.Type{blas.F32, blas.F64} {
		host := func() []float64 {
			v := make([]float64, n*n)
			for i := range v {
				v[i] = rnd.Float64()*2 - 1
			}
			return v
		}
		ah, bh := host(), host()
		a, b, c := r.put(t, ty, ah), r.put(t, ty, bh), r.put(t, ty, make([]float64, n*n))
		ah, bh = blasValues(ty, blasBytes(ty, ah)), blasValues(ty, blasBytes(ty, bh))
		gemm := func() error {
			if ty == blas.F32 {
				return r.h.Sgemm(blas.NoTrans, blas.NoTrans, n, n, n, 1, a, n, b, n, 0, c, n)
			}
			return r.h.Dgemm(blas.NoTrans, blas.NoTrans, n, n, n, 1, a, n, b, n, 0, c, n)
		}
		for i := 0; i < 3; i++ {
			if err := gemm(); err != nil {
				t.Fatal(err)
			}
		}
		// Spot-check the product against the host in float64.
		got := r.get(t, ty, c, n*n)
		for s := 0; s < 16; s++ {
			i, j := rnd.Intn(n), rnd.Intn(n)
			var want float64
			for l := 0; l < n; l++ {
				want += ah[i+l*n] * bh[l+j*n]
			}
			tol := 1e-10
			if ty == blas.F32 {
				tol = 2e-3
			}
			if math.Abs(got[i+j*n]-want) > tol {
				t.Fatalf("%v: C[%d,%d] = %v, want %v", ty, i, j, got[i+j*n], want)
			}
		}
		e0, err := r.b.EventCreate(0, gpumem.EventDefault)
		if err != nil {
			t.Fatal(err)
		}
		e1, err := r.b.EventCreate(0, gpumem.EventDefault)
		if err != nil {
			t.Fatal(err)
		}
		var tflops []float64
		var msPer []float64
		for rep := 0; rep < reps; rep++ {
			if err := r.b.EventRecord(e0, r.s); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < iters; i++ {
				if err := gemm(); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.b.EventRecord(e1, r.s); err != nil {
				t.Fatal(err)
			}
			if err := r.b.EventSynchronize(e1); err != nil {
				t.Fatal(err)
			}
			ms, err := r.b.EventElapsed(e0, e1)
			if err != nil {
				t.Fatal(err)
			}
			per := float64(ms) / iters
			msPer = append(msPer, per)
			tflops = append(tflops, 2*float64(n)*n*n/(per*1e-3)/1e12)
		}
		r.b.EventDestroy(e0)
		r.b.EventDestroy(e1)
		sort.Float64s(tflops)
		sort.Float64s(msPer)
		name := map[blas.Type]string{blas.F32: "sgemm", blas.F64: "dgemm"}[ty]
		fmt.Printf("BLAS %s %d TFLOPS=%.2f ms=%.3f library=%q\n", name, n, tflops[reps/2], msPer[reps/2], r.h.Library())
	}
}
