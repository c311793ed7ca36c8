package blas_test

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/blas"
	"github.com/gpumem/gpumem/sim"
)

// The routines on the simulator against the reference of ref_test.go, on
// random shapes from fixed seeds: transposes, zero dimensions, leading
// dimensions larger than the rows (whose gaps must stay untouched),
// negative increments, beta zero (C not read), host and device scalars.

const gap = 1234.5 // what fills the elements a routine must not touch

func randVals(r *rand.Rand, ty blas.Type, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(r.Intn(17)-8) / 4 // exact in every type
		if ty == blas.F32 || ty == blas.F64 {
			v[i] = r.Float64()*2 - 1
		}
	}
	return round(ty, v)
}

// randMat is a rows x cols matrix with leading dimension ld, its gaps
// filled with gap.
func randMat(r *rand.Rand, ty blas.Type, rows, cols, ld int) []float64 {
	if rows == 0 || cols == 0 {
		return nil
	}
	v := make([]float64, (cols-1)*ld+rows)
	vals := randVals(r, ty, rows*cols)
	for i := range v {
		v[i] = gap
	}
	for j := 0; j < cols; j++ {
		for i := 0; i < rows; i++ {
			v[i+j*ld] = vals[i+j*rows]
		}
	}
	return v
}

func randTrans(r *rand.Rand) blas.Transpose { return blas.Transpose(r.Intn(3)) }

func randDim(r *rand.Rand) int {
	if r.Intn(6) == 0 {
		return 0
	}
	return 1 + r.Intn(9)
}

func randInc(r *rand.Rand, positive bool) int {
	incs := []int{1, 1, 2, 3, -1, -2}
	if positive {
		incs = incs[:4]
	}
	return incs[r.Intn(len(incs))]
}

func randScalar(r *rand.Rand) float64 {
	switch r.Intn(4) {
	case 0:
		return 0
	case 1:
		return 1
	}
	return float64(r.Intn(9)-4) / 2
}

func tolOf(ty blas.Type) float64 {
	if ty == blas.F64 {
		return 1e-12
	}
	return 1e-5
}

// compare checks got against want element by element: gaps exactly.
func compare(t *testing.T, what string, ty blas.Type, got, want []float64, terms int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range want {
		if want[i] == gap || got[i] == gap {
			if got[i] != want[i] {
				t.Fatalf("%s: element %d is %v, want %v (a gap was written, or an element was not)", what, i, got[i], want[i])
			}
			continue
		}
		if !near(got[i], want[i], float64(terms), tolOf(ty)) {
			t.Fatalf("%s: element %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

// scalars uploads alpha and beta for a device-mode call.
func scalars(t *testing.T, g *sim.GPU, ty blas.Type, alpha, beta float64) (gpumem.Ptr, gpumem.Ptr) {
	return upload(t, g, ty, []float64{alpha}), upload(t, g, ty, []float64{beta})
}

func TestGemmRandom(t *testing.T) {
	g := newGPU(t)
	h := openHandle(t, g)
	for seed := int64(0); seed < 160; seed++ {
		r := rand.New(rand.NewSource(seed))
		ty := []blas.Type{blas.F32, blas.F64}[seed%2]
		ta, tb := randTrans(r), randTrans(r)
		m, n, k := randDim(r), randDim(r), randDim(r)
		ar, ac := m, k
		if ta != blas.NoTrans {
			ar, ac = k, m
		}
		br, bc := k, n
		if tb != blas.NoTrans {
			br, bc = n, k
		}
		lda, ldb, ldc := max(1, ar)+r.Intn(3), max(1, br)+r.Intn(3), max(1, m)+r.Intn(3)
		a, b, c := randMat(r, ty, ar, ac, lda), randMat(r, ty, br, bc, ldb), randMat(r, ty, m, n, ldc)
		alpha, beta := randScalar(r), randScalar(r)
		device := r.Intn(2) == 0
		name := fmt.Sprintf("seed %d: %v %s%s m=%d n=%d k=%d lda=%d ldb=%d ldc=%d alpha=%v beta=%v device=%v", seed, ty, ta, tb, m, n, k, lda, ldb, ldc, alpha, beta, device)
		if beta == 0 && len(c) > 0 { // C is not read: NaN must not come through
			for j := 0; j < n; j++ {
				c[j*ldc] = math.NaN()
			}
		}
		pa, pb, pc := upload(t, g, ty, a), upload(t, g, ty, b), upload(t, g, ty, c)
		var err error
		switch {
		case device:
			al, be := scalars(t, g, ty, alpha, beta)
			err = h.GemmDevice(ty, ta, tb, m, n, k, al, pa, lda, pb, ldb, be, pc, ldc)
		case ty == blas.F32:
			err = h.Sgemm(ta, tb, m, n, k, float32(alpha), pa, lda, pb, ldb, float32(beta), pc, ldc)
		default:
			err = h.Dgemm(ta, tb, m, n, k, alpha, pa, lda, pb, ldb, beta, pc, ldc)
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := append([]float64(nil), c...)
		refGemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, want, ldc)
		compare(t, name, ty, download(t, g, ty, pc, len(c)), round(ty, want), k+2)
	}
}

func TestGemmStridedBatchedRandom(t *testing.T) {
	g := newGPU(t)
	h := openHandle(t, g)
	for seed := int64(0); seed < 60; seed++ {
		r := rand.New(rand.NewSource(seed))
		ty := []blas.Type{blas.F32, blas.F64}[seed%2]
		ta, tb := randTrans(r), randTrans(r)
		m, n, k := randDim(r), randDim(r), randDim(r)
		batch := r.Intn(4)
		ar, ac := m, k
		if ta != blas.NoTrans {
			ar, ac = k, m
		}
		br, bc := k, n
		if tb != blas.NoTrans {
			br, bc = n, k
		}
		lda, ldb, ldc := max(1, ar)+r.Intn(2), max(1, br)+r.Intn(2), max(1, m)+r.Intn(2)
		ext := func(rows, cols, ld int) int64 {
			if rows == 0 || cols == 0 {
				return 0
			}
			return int64((cols-1)*ld + rows)
		}
		sa, sb, sc := ext(ar, ac, lda)+int64(r.Intn(3)), ext(br, bc, ldb)+int64(r.Intn(3)), ext(m, n, ldc)+int64(r.Intn(3))
		if r.Intn(3) == 0 {
			sa = 0 // one A for every batch
		}
		total := func(e, s int64) int {
			if batch == 0 || e == 0 {
				return 0
			}
			return int(int64(batch-1)*s + e)
		}
		fill := func(e, s int64, rows, cols, ld int) []float64 {
			v := make([]float64, total(e, s))
			for i := range v {
				v[i] = gap
			}
			for bi := 0; bi < batch && e > 0; bi++ {
				copy(v[int64(bi)*s:], randMat(r, ty, rows, cols, ld)[:e])
			}
			return v
		}
		a, b, c := fill(ext(ar, ac, lda), sa, ar, ac, lda), fill(ext(br, bc, ldb), sb, br, bc, ldb), fill(ext(m, n, ldc), sc, m, n, ldc)
		alpha, beta := randScalar(r), randScalar(r)
		name := fmt.Sprintf("seed %d: %v %s%s m=%d n=%d k=%d batch=%d strides %d %d %d", seed, ty, ta, tb, m, n, k, batch, sa, sb, sc)
		pa, pb, pc := upload(t, g, ty, a), upload(t, g, ty, b), upload(t, g, ty, c)
		var err error
		if ty == blas.F32 {
			err = h.SgemmStridedBatched(ta, tb, m, n, k, float32(alpha), pa, lda, sa, pb, ldb, sb, float32(beta), pc, ldc, sc, batch)
		} else {
			err = h.DgemmStridedBatched(ta, tb, m, n, k, alpha, pa, lda, sa, pb, ldb, sb, beta, pc, ldc, sc, batch)
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := append([]float64(nil), c...)
		for bi := 0; bi < batch && m > 0 && n > 0; bi++ {
			var ab, bb []float64
			if len(a) > 0 {
				ab = a[int64(bi)*sa:]
			}
			if len(b) > 0 {
				bb = b[int64(bi)*sb:]
			}
			refGemm(ta, tb, m, n, k, alpha, ab, lda, bb, ldb, beta, want[int64(bi)*sc:], ldc)
		}
		compare(t, name, ty, download(t, g, ty, pc, len(c)), round(ty, want), k+2)
	}
}

// randVec is a vector of n elements with increment inc, gaps filled.
func randVec(r *rand.Rand, ty blas.Type, n, inc int) []float64 {
	if n == 0 {
		return nil
	}
	abs := max(inc, -inc)
	v := make([]float64, (n-1)*abs+1)
	vals := randVals(r, ty, n)
	for i := range v {
		v[i] = gap
	}
	for i := 0; i < n; i++ {
		v[i*abs] = vals[i]
	}
	return v
}

func TestGemvRandom(t *testing.T) {
	g := newGPU(t)
	h := openHandle(t, g)
	for seed := int64(0); seed < 120; seed++ {
		r := rand.New(rand.NewSource(seed))
		ty := []blas.Type{blas.F32, blas.F64}[seed%2]
		ta := randTrans(r)
		m, n := randDim(r), randDim(r)
		lda := max(1, m) + r.Intn(3)
		incx, incy := randInc(r, false), randInc(r, false)
		lx, ly := n, m
		if ta != blas.NoTrans {
			lx, ly = m, n
		}
		a, x, y := randMat(r, ty, m, n, lda), randVec(r, ty, lx, incx), randVec(r, ty, ly, incy)
		alpha, beta := randScalar(r), randScalar(r)
		device := r.Intn(2) == 0
		name := fmt.Sprintf("seed %d: %v %s m=%d n=%d lda=%d incx=%d incy=%d alpha=%v beta=%v device=%v", seed, ty, ta, m, n, lda, incx, incy, alpha, beta, device)
		pa, px, py := upload(t, g, ty, a), upload(t, g, ty, x), upload(t, g, ty, y)
		var err error
		switch {
		case device:
			al, be := scalars(t, g, ty, alpha, beta)
			err = h.GemvDevice(ty, ta, m, n, al, pa, lda, px, incx, be, py, incy)
		case ty == blas.F32:
			err = h.Sgemv(ta, m, n, float32(alpha), pa, lda, px, incx, float32(beta), py, incy)
		default:
			err = h.Dgemv(ta, m, n, alpha, pa, lda, px, incx, beta, py, incy)
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := append([]float64(nil), y...)
		if m > 0 && n > 0 {
			refGemv(ta, m, n, alpha, a, lda, x, incx, beta, want, incy)
		}
		compare(t, name, ty, download(t, g, ty, py, len(y)), round(ty, want), max(m, n)+2)
	}
}

func TestLevel1Random(t *testing.T) {
	g := newGPU(t)
	h := openHandle(t, g)
	res := upload(t, g, blas.F64, []float64{0})
	for seed := int64(0); seed < 160; seed++ {
		r := rand.New(rand.NewSource(seed))
		ty := []blas.Type{blas.F32, blas.F64}[seed%2]
		n := r.Intn(20)
		if r.Intn(5) == 0 {
			n = 0
		}
		incx, incy := randInc(r, false), randInc(r, false)
		alpha := randScalar(r)
		device := r.Intn(2) == 0
		name := fmt.Sprintf("seed %d: %v n=%d incx=%d incy=%d alpha=%v device=%v", seed, ty, n, incx, incy, alpha, device)
		x, y := randVec(r, ty, n, incx), randVec(r, ty, n, incy)
		px, py := upload(t, g, ty, x), upload(t, g, ty, y)

		// dot
		want := refDot(n, x, incx, y, incy)
		var got float64
		var err error
		switch {
		case device:
			if err = h.DotDevice(ty, n, px, incx, py, incy, res); err == nil {
				got = download(t, g, ty, res, 1)[0]
			}
		case ty == blas.F32:
			var f float32
			f, err = h.Sdot(n, px, incx, py, incy)
			got = float64(f)
		default:
			got, err = h.Ddot(n, px, incx, py, incy)
		}
		if err != nil || !near(got, want, float64(n), tolOf(ty)) {
			t.Fatalf("%s: dot = %v, %v; want %v", name, got, err, want)
		}

		// nrm2 takes a positive increment
		pinc := max(incx, -incx)
		want = refNrm2(n, x, pinc)
		switch {
		case device:
			if err = h.Nrm2Device(ty, n, px, pinc, res); err == nil {
				got = download(t, g, ty, res, 1)[0]
			}
		case ty == blas.F32:
			var f float32
			f, err = h.Snrm2(n, px, pinc)
			got = float64(f)
		default:
			got, err = h.Dnrm2(n, px, pinc)
		}
		if err != nil || !near(got, want, float64(n), tolOf(ty)) {
			t.Fatalf("%s: nrm2 = %v, %v; want %v", name, got, err, want)
		}

		// axpy
		switch {
		case device:
			al, _ := scalars(t, g, ty, alpha, 0)
			err = h.AxpyDevice(ty, n, al, px, incx, py, incy)
		case ty == blas.F32:
			err = h.Saxpy(n, float32(alpha), px, incx, py, incy)
		default:
			err = h.Daxpy(n, alpha, px, incx, py, incy)
		}
		if err != nil {
			t.Fatalf("%s: axpy: %v", name, err)
		}
		wy := append([]float64(nil), y...)
		refAxpy(n, alpha, x, incx, wy, incy)
		compare(t, name+": axpy", ty, download(t, g, ty, py, len(y)), round(ty, wy), 3)

		// scal
		switch {
		case device:
			al, _ := scalars(t, g, ty, alpha, 0)
			err = h.ScalDevice(ty, n, al, px, pinc)
		case ty == blas.F32:
			err = h.Sscal(n, float32(alpha), px, pinc)
		default:
			err = h.Dscal(n, alpha, px, pinc)
		}
		if err != nil {
			t.Fatalf("%s: scal: %v", name, err)
		}
		wx := append([]float64(nil), x...)
		for i := 0; i < n; i++ {
			wx[i*pinc] *= alpha
		}
		compare(t, name+": scal", ty, download(t, g, ty, px, len(x)), round(ty, wx), 2)
	}
}

func TestGemmExRandom(t *testing.T) {
	g := newGPU(t)
	h := openHandle(t, g)
	for seed := int64(0); seed < 60; seed++ {
		r := rand.New(rand.NewSource(seed))
		in := []blas.Type{blas.F16, blas.BF16}[seed%2]
		out := in
		if r.Intn(2) == 0 {
			out = blas.F32
		}
		ta, tb := randTrans(r), randTrans(r)
		m, n, k := randDim(r), randDim(r), randDim(r)
		ar, ac := m, k
		if ta != blas.NoTrans {
			ar, ac = k, m
		}
		br, bc := k, n
		if tb != blas.NoTrans {
			br, bc = n, k
		}
		lda, ldb, ldc := max(1, ar)+r.Intn(2), max(1, br)+r.Intn(2), max(1, m)+r.Intn(2)
		a, b, c := randMat(r, in, ar, ac, lda), randMat(r, in, br, bc, ldb), randMat(r, out, m, n, ldc)
		alpha, beta := randScalar(r), randScalar(r)
		name := fmt.Sprintf("seed %d: %v->%v %s%s m=%d n=%d k=%d alpha=%v beta=%v", seed, in, out, ta, tb, m, n, k, alpha, beta)
		// The gaps of C hold a value each type stores exactly.
		pa, pb, pc := upload(t, g, in, a), upload(t, g, in, b), upload(t, g, out, c)
		if err := h.GemmEx(ta, tb, m, n, k, float32(alpha), pa, lda, pb, ldb, float32(beta), pc, ldc, in, out); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := append([]float64(nil), c...)
		refGemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, want, ldc)
		// Exact inputs, sums of at most 9 products of quarters: exact in
		// float32, so the only rounding is C's type's.
		compare(t, name, out, download(t, g, out, pc, len(c)), round(out, round(blas.F32, want)), 0)
	}
}

// TestAlphaZeroReadsNothing: with alpha 0, gemv and axpy leave A and x
// unread, as reference BLAS does, so an Inf or a NaN there does not turn y
// into NaN: gemv computes beta*y, axpy leaves y as it is.
func TestAlphaZeroReadsNothing(t *testing.T) {
	g := newGPU(t)
	h := openHandle(t, g)
	inf := math.Inf(1)
	a := upload(t, g, blas.F64, []float64{inf, 1, 1, math.NaN()})
	x := upload(t, g, blas.F64, []float64{inf, 1})
	y := upload(t, g, blas.F64, []float64{3, 4})
	if err := h.Dgemv(blas.NoTrans, 2, 2, 0, a, 2, x, 1, 2, y, 1); err != nil {
		t.Fatal(err)
	}
	if got := download(t, g, blas.F64, y, 2); got[0] != 6 || got[1] != 8 {
		t.Errorf("gemv with alpha 0 and beta 2: y = %v, want [6 8]", got)
	}
	if err := h.Daxpy(2, 0, x, 1, y, 1); err != nil {
		t.Fatal(err)
	}
	if got := download(t, g, blas.F64, y, 2); got[0] != 6 || got[1] != 8 {
		t.Errorf("axpy with alpha 0: y = %v, want [6 8] as it was", got)
	}
}
