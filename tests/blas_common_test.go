package tests

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/blas"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/internal/blasref"
	"github.com/gpumem/gpumem/sim"
)

// BLAS on any backend, checked against a float64 host reference: the GPU
// tier runs it on cuBLAS (gpu_blas_test.go), and TestBLASCorrectnessSim on
// the simulator, so that the check itself is tested with no GPU.

type blasRig struct {
	b     gpumem.Backend
	alloc *caching.Allocator
	s     gpumem.Stream
	h     *blas.Handle
}

func newBLASRig(t testing.TB, b gpumem.Backend, opts ...blas.Option) *blasRig {
	t.Helper()
	a, err := caching.New(b, caching.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	h, err := blas.Open(b, 0, append([]blas.Option{blas.WithStream(s), blas.WithWorkspace(a, 32<<20)}, opts...)...)
	if err != nil {
		t.Fatalf("blas.Open: %v", err)
	}
	r := &blasRig{b: b, alloc: a, s: s, h: h}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		b.StreamSynchronize(s)
		a.Close()
		b.StreamDestroy(s)
	})
	t.Logf("BLAS library: %s", h.Library())
	return r
}

// put copies v as elements of ty to caching-allocator memory.
func (r *blasRig) put(t testing.TB, ty blas.Type, v []float64) gpumem.Ptr {
	t.Helper()
	p, err := r.alloc.Allocate(uint64(max(1, len(v))*ty.Size()), r.s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.alloc.Deallocate(p, r.s) })
	if len(v) > 0 {
		if err := r.b.CopyToDevice(p, blasBytes(ty, v)); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func (r *blasRig) get(t testing.TB, ty blas.Type, p gpumem.Ptr, n int) []float64 {
	t.Helper()
	if err := r.b.StreamSynchronize(r.s); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n*ty.Size())
	if err := r.b.CopyFromDevice(b, p); err != nil {
		t.Fatal(err)
	}
	return blasValues(ty, b)
}

func blasBytes(ty blas.Type, v []float64) []byte {
	b := make([]byte, len(v)*ty.Size())
	for i, x := range v {
		switch ty {
		case blas.F32:
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(x)))
		case blas.F64:
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
		case blas.F16:
			binary.LittleEndian.PutUint16(b[2*i:], blas.F16FromFloat32(float32(x)))
		case blas.BF16:
			binary.LittleEndian.PutUint16(b[2*i:], blas.BF16FromFloat32(float32(x)))
		}
	}
	return b
}

func blasValues(ty blas.Type, b []byte) []float64 {
	v := make([]float64, len(b)/ty.Size())
	for i := range v {
		switch ty {
		case blas.F32:
			v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		case blas.F64:
			v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		case blas.F16:
			v[i] = float64(blas.F16ToFloat32(binary.LittleEndian.Uint16(b[2*i:])))
		case blas.BF16:
			v[i] = float64(blas.BF16ToFloat32(binary.LittleEndian.Uint16(b[2*i:])))
		}
	}
	return v
}

const blasGap = -777.25 // the gaps of a leading dimension: never written

// hostGemm is the float64 reference: C = alpha*op(A)*op(B) + beta*C.
func hostGemm(ta, tb blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	blasref.Gemm(ta == blas.Trans, tb == blas.Trans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// blasGemmCheck runs Sgemm and Dgemm of m x n x k with every transpose
// pair, leading dimensions larger than the rows, against hostGemm.
func blasGemmCheck(t *testing.T, r *blasRig, m, n, k int) {
	rnd := rand.New(rand.NewSource(1))
	for _, ty := range []blas.Type{blas.F32, blas.F64} {
		for _, tr := range [][2]blas.Transpose{{blas.NoTrans, blas.NoTrans}, {blas.Trans, blas.NoTrans}, {blas.NoTrans, blas.Trans}, {blas.Trans, blas.Trans}} {
			ta, tb := tr[0], tr[1]
			ar, ac := m, k
			if ta == blas.Trans {
				ar, ac = k, m
			}
			br, bc := k, n
			if tb == blas.Trans {
				br, bc = n, k
			}
			lda, ldb, ldc := ar+3, br+5, m+7
			mat := func(rows, cols, ld int) []float64 {
				v := make([]float64, (cols-1)*ld+rows)
				for i := range v {
					v[i] = blasGap
					if i%ld < rows {
						v[i] = rnd.Float64()*2 - 1
						if ty == blas.F32 {
							v[i] = float64(float32(v[i]))
						}
					}
				}
				return v
			}
			a, b, c := mat(ar, ac, lda), mat(br, bc, ldb), mat(m, n, ldc)
			pa, pb, pc := r.put(t, ty, a), r.put(t, ty, b), r.put(t, ty, c)
			alpha, beta := 1.5, -0.5
			var err error
			if ty == blas.F32 {
				err = r.h.Sgemm(ta, tb, m, n, k, float32(alpha), pa, lda, pb, ldb, float32(beta), pc, ldc)
			} else {
				err = r.h.Dgemm(ta, tb, m, n, k, alpha, pa, lda, pb, ldb, beta, pc, ldc)
			}
			if err != nil {
				t.Fatalf("%v %s%s: %v", ty, ta, tb, err)
			}
			want := append([]float64(nil), c...)
			hostGemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, want, ldc)
			got := r.get(t, ty, pc, len(c))
			tol := 1e-12 * float64(k)
			if ty == blas.F32 {
				tol = 2e-6 * float64(k) // float32 accumulation (no TF32)
			}
			worst := 0.0
			for i := range want {
				if i%ldc >= m {
					if got[i] != blasGap {
						t.Fatalf("%v %s%s: gap element %d written (%v)", ty, ta, tb, i, got[i])
					}
					continue
				}
				worst = max(worst, math.Abs(got[i]-want[i]))
			}
			if worst > tol {
				t.Errorf("%v %s%s %dx%dx%d: worst error %.3g > %.3g", ty, ta, tb, m, n, k, worst, tol)
			} else {
				t.Logf("%v %s%s %dx%dx%d: worst error %.3g", ty, ta, tb, m, n, k, worst)
			}
		}
	}
}

// blasLevel12Check covers the other routines on one handle.
func blasLevel12Check(t *testing.T, r *blasRig) {
	h := r.h
	x := r.put(t, blas.F32, []float64{1, -2, 3, -4, 5})
	y := r.put(t, blas.F32, []float64{2, 2, 2, 2, 2})
	if err := h.Saxpy(5, 2, x, 1, y, 1); err != nil {
		t.Fatal(err)
	}
	if got := r.get(t, blas.F32, y, 5); fmt.Sprint(got) != "[4 -2 8 -6 12]" {
		t.Errorf("Saxpy: %v", got)
	}
	if d, err := h.Sdot(5, x, 1, y, 1); err != nil || d != 4+4+24+24+60 {
		t.Errorf("Sdot = %v, %v", d, err)
	}
	if d, err := h.Ddot(0, 0, 1, 0, 1); err != nil || d != 0 {
		t.Errorf("empty Ddot = %v, %v", d, err)
	}
	xd := r.put(t, blas.F64, []float64{3, 0, 4})
	if n, err := h.Dnrm2(2, xd, 2); err != nil || math.Abs(n-5) > 1e-12 {
		t.Errorf("Dnrm2 = %v, %v", n, err)
	}
	res := r.put(t, blas.F64, []float64{0})
	if err := h.Nrm2Device(blas.F64, 2, xd, 2, res); err != nil {
		t.Fatal(err)
	}
	if got := r.get(t, blas.F64, res, 1); math.Abs(got[0]-5) > 1e-12 {
		t.Errorf("Nrm2Device wrote %v", got)
	}
	if err := h.Dscal(3, -2, xd, 1); err != nil {
		t.Fatal(err)
	}
	if got := r.get(t, blas.F64, xd, 3); fmt.Sprint(got) != "[-6 -0 -8]" && fmt.Sprint(got) != "[-6 0 -8]" {
		t.Errorf("Dscal: %v", got)
	}
	// gemv: A = [1 2; 3 4; 5 6] (3 x 2, lda 4), x = [1, 1], y = A x, then Aᵀ y.
	a := r.put(t, blas.F64, []float64{1, 3, 5, blasGap, 2, 4, 6})
	xv := r.put(t, blas.F64, []float64{1, 1})
	yv := r.put(t, blas.F64, []float64{9, 9, 9})
	if err := h.Dgemv(blas.NoTrans, 3, 2, 1, a, 4, xv, 1, 0, yv, 1); err != nil {
		t.Fatal(err)
	}
	if got := r.get(t, blas.F64, yv, 3); fmt.Sprint(got) != "[3 7 11]" {
		t.Errorf("Dgemv N: %v", got)
	}
	if err := h.Dgemv(blas.Trans, 3, 2, 1, a, 4, yv, 1, 0, xv, 1); err != nil {
		t.Fatal(err)
	}
	if got := r.get(t, blas.F64, xv, 2); fmt.Sprint(got) != "[79 100]" {
		t.Errorf("Dgemv T: %v", got)
	}
	// strided batched: two 2x2 products with one shared A (stride 0).
	ab := r.put(t, blas.F32, []float64{1, 0, 0, 2})
	bb := r.put(t, blas.F32, []float64{1, 2, 3, 4, 5, 6, 7, 8})
	cb := r.put(t, blas.F32, make([]float64, 8))
	if err := h.SgemmStridedBatched(blas.NoTrans, blas.NoTrans, 2, 2, 2, 1, ab, 2, 0, bb, 2, 4, 0, cb, 2, 4, 2); err != nil {
		t.Fatal(err)
	}
	if got := r.get(t, blas.F32, cb, 8); fmt.Sprint(got) != "[1 4 3 8 5 12 7 16]" {
		t.Errorf("SgemmStridedBatched: %v", got)
	}
	// GemmEx: half and bfloat16 in, float32 and their own type out.
	for _, in := range []blas.Type{blas.F16, blas.BF16} {
		for _, out := range []blas.Type{blas.F32, in} {
			a := r.put(t, in, []float64{1, 2, 3, 4}) // [1 3; 2 4]
			b := r.put(t, in, []float64{0.5, 1, -1, 2})
			c := r.put(t, out, []float64{1, 1, 1, 1})
			if err := h.GemmEx(blas.NoTrans, blas.NoTrans, 2, 2, 2, 2, a, 2, b, 2, 1, c, 2, in, out); err != nil {
				t.Fatalf("GemmEx %v->%v: %v", in, out, err)
			}
			if got := r.get(t, out, c, 4); fmt.Sprint(got) != "[8 11 11 13]" {
				t.Errorf("GemmEx %v->%v: %v", in, out, got)
			}
		}
	}
}

func TestBLASCorrectnessSim(t *testing.T) {
	g, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() }) // after the rig's cleanup
	r := newBLASRig(t, g)
	blasGemmCheck(t, r, 19, 13, 11)
	blasLevel12Check(t, r)
	blasStreamsCheck(t, r, 8, 8, 64)
}

// blasStreamsCheck switches one handle between two streams with no
// synchronization between them, a gemm queued on each every time (long
// and thin, so that the libraries split k and use their workspace): each
// stream's results are its own, as they are only when the two streams'
// kernels never share a workspace.
func blasStreamsCheck(t *testing.T, r *blasRig, m, n, k int) {
	t.Helper()
	s2, err := r.b.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.b.StreamDestroy(s2)
	rnd := rand.New(rand.NewSource(3))
	vec := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(float32(rnd.Float64()*2 - 1))
		}
		return v
	}
	type problem struct {
		a, b, want []float64
		pa, pb, pc gpumem.Ptr
		s          gpumem.Stream
	}
	ps := [2]*problem{{s: r.s}, {s: s2}}
	for _, p := range ps {
		p.a, p.b = vec(m*k), vec(k*n)
		p.want = make([]float64, m*n)
		hostGemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, p.a, m, p.b, k, 0, p.want, m)
		p.pa, p.pb, p.pc = r.put(t, blas.F32, p.a), r.put(t, blas.F32, p.b), r.put(t, blas.F32, make([]float64, m*n))
	}
	for range 8 {
		for _, p := range ps {
			if err := r.h.SetStream(p.s); err != nil {
				t.Fatal(err)
			}
			if err := r.h.Sgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, p.pa, m, p.pb, k, 0, p.pc, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := r.h.SetStream(r.s); err != nil {
		t.Fatal(err)
	}
	if err := r.h.ReleaseStream(s2); err != nil {
		t.Fatal(err)
	}
	if err := r.b.StreamSynchronize(s2); err != nil {
		t.Fatal(err)
	}
	tol := 2e-6 * float64(k)
	for i, p := range ps {
		got := r.get(t, blas.F32, p.pc, m*n)
		worst := 0.0
		for j := range got {
			worst = max(worst, math.Abs(got[j]-p.want[j]))
		}
		if worst > tol {
			t.Errorf("stream %d of two: worst error %.3g > %.3g", i, worst, tol)
		}
	}
}
