package blas_test

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/blas"
	"github.com/gpumem/gpumem/internal/blasref"
	"github.com/gpumem/gpumem/sim"
)

// A straightforward BLAS in float64 loops, column-major, written apart from
// the package's simulator kernel: the tests compare the two.

func refGemm(ta, tb blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	blasref.Gemm(ta != blas.NoTrans, tb != blas.NoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// at is the stored index of element i of a vector of n with increment inc.
func at(i, n, inc int) int {
	if inc > 0 {
		return i * inc
	}
	return (n - 1 - i) * -inc
}

func refGemv(ta blas.Transpose, m, n int, alpha float64, a []float64, lda int, x []float64, incx int, beta float64, y []float64, incy int) {
	lx, ly := n, m
	if ta != blas.NoTrans {
		lx, ly = m, n
	}
	for i := 0; i < ly; i++ {
		var s float64
		for j := 0; j < lx; j++ {
			var av float64
			if ta != blas.NoTrans {
				av = a[j+i*lda]
			} else {
				av = a[i+j*lda]
			}
			s += av * x[at(j, lx, incx)]
		}
		yi := at(i, ly, incy)
		if beta == 0 {
			y[yi] = alpha * s
		} else {
			y[yi] = alpha*s + beta*y[yi]
		}
	}
}

func refAxpy(n int, alpha float64, x []float64, incx int, y []float64, incy int) {
	for i := 0; i < n; i++ {
		y[at(i, n, incy)] += alpha * x[at(i, n, incx)]
	}
}

func refDot(n int, x []float64, incx int, y []float64, incy int) float64 {
	var s float64
	for i := 0; i < n; i++ {
		s += x[at(i, n, incx)] * y[at(i, n, incy)]
	}
	return s
}

func refNrm2(n int, x []float64, incx int) float64 {
	var s float64
	for i := 0; i < n; i++ {
		v := x[i*incx]
		s += v * v
	}
	return math.Sqrt(s)
}

// Device memory of the simulator holding typed elements.

func newGPU(t testing.TB) *sim.GPU {
	t.Helper()
	g, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if v := g.Violations(); len(v) > 0 {
			t.Errorf("simulator violations: %v", v)
		}
		g.Close()
	})
	return g
}

func openHandle(t testing.TB, g *sim.GPU, opts ...blas.Option) *blas.Handle {
	t.Helper()
	h, err := blas.Open(g, 0, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func toBytes(ty blas.Type, v []float64) []byte {
	b := make([]byte, len(v)*ty.Size())
	for i, x := range v {
		o := b[i*ty.Size():]
		switch ty {
		case blas.F32:
			binary.LittleEndian.PutUint32(o, math.Float32bits(float32(x)))
		case blas.F64:
			binary.LittleEndian.PutUint64(o, math.Float64bits(x))
		case blas.F16:
			binary.LittleEndian.PutUint16(o, blas.F16FromFloat32(float32(x)))
		case blas.BF16:
			binary.LittleEndian.PutUint16(o, blas.BF16FromFloat32(float32(x)))
		}
	}
	return b
}

func fromBytes(ty blas.Type, b []byte) []float64 {
	v := make([]float64, len(b)/ty.Size())
	for i := range v {
		o := b[i*ty.Size():]
		switch ty {
		case blas.F32:
			v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(o)))
		case blas.F64:
			v[i] = math.Float64frombits(binary.LittleEndian.Uint64(o))
		case blas.F16:
			v[i] = float64(blas.F16ToFloat32(binary.LittleEndian.Uint16(o)))
		case blas.BF16:
			v[i] = float64(blas.BF16ToFloat32(binary.LittleEndian.Uint16(o)))
		}
	}
	return v
}

// upload copies v to new device memory as elements of type ty (nothing for
// an empty v: the pointer is 0).
func upload(t testing.TB, g *sim.GPU, ty blas.Type, v []float64) gpumem.Ptr {
	t.Helper()
	if len(v) == 0 {
		return 0
	}
	p, err := g.Malloc(0, uint64(len(v)*ty.Size()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Free(0, p) })
	if err := g.CopyToDevice(p, toBytes(ty, v)); err != nil {
		t.Fatal(err)
	}
	return p
}

func download(t testing.TB, g *sim.GPU, ty blas.Type, p gpumem.Ptr, n int) []float64 {
	t.Helper()
	if n == 0 {
		return nil
	}
	b := make([]byte, n*ty.Size())
	if err := g.CopyFromDevice(b, p); err != nil {
		t.Fatal(err)
	}
	return fromBytes(ty, b)
}

// round returns v as the type stores it.
func round(ty blas.Type, v []float64) []float64 { return fromBytes(ty, toBytes(ty, v)) }

// close reports whether got is within tolerance of want, relative to the
// size of the terms (scale).
func near(got, want, scale, tol float64) bool {
	if math.IsNaN(want) {
		return math.IsNaN(got)
	}
	return math.Abs(got-want) <= tol*(1+math.Abs(scale))
}
