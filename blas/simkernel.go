package blas

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

// The Go kernel behind every routine on the simulator: a reference BLAS in
// straightforward loops, computing in float64 and rounding to the element
// type on the way out. It reads each operand's whole span with one checked
// access (so a span that leaves its allocation faults the kernel, as an
// out-of-bounds read faults a GPU) and writes back only the elements the
// routine writes: the gaps of a leading dimension or an increment are
// never touched.

// simArgs is a launch's scalar words, decoded.
type simArgs struct {
	kind                 kind
	t, out               Type
	ta, tb               Transpose
	m, n, k              int
	lda, ldb, ldc        int
	sa, sb, sc           int64
	batches, incx, incy  int
	alpha, beta          float64
	mode                 PointerMode
	a, b, c, aP, bP, res gpumem.Ptr
}

func runSimKernel(k *sim.KernelCall) {
	raw := k.Arg.Bytes(0)
	var f [numFields]uint64
	for i := range f {
		f[i] = binary.LittleEndian.Uint64(raw[8*i:])
	}
	s := simArgs{
		kind: kind(f[fKind]), t: Type(f[fType]), out: Type(f[fOut]), ta: Transpose(f[fTA]), tb: Transpose(f[fTB]),
		m: int(f[fM]), n: int(f[fN]), k: int(f[fK]), lda: int(f[fLda]), ldb: int(f[fLdb]), ldc: int(f[fLdc]),
		sa: int64(f[fSa]), sb: int64(f[fSb]), sc: int64(f[fSc]), batches: int(f[fBatches]),
		incx: int(int64(f[fIncx])), incy: int(int64(f[fIncy])),
		alpha: math.Float64frombits(f[fAlpha]), beta: math.Float64frombits(f[fBeta]), mode: PointerMode(f[fMode]),
		a: k.Arg.Ptr(pA), b: k.Arg.Ptr(pB), c: k.Arg.Ptr(pC), aP: k.Arg.Ptr(pAlpha), bP: k.Arg.Ptr(pBeta), res: k.Arg.Ptr(pRes),
	}
	switch s.kind {
	case kAxpy:
		if s.n == 0 {
			return
		}
		alpha := s.scalar(k, s.alpha, s.aP, s.t)
		if alpha == 0 {
			return // reference BLAS: y is left as it is
		}
		x, y := readVec(k, s.a, s.t, s.n, s.incx), readVec(k, s.b, s.t, s.n, s.incy)
		for i := range y {
			y[i] += alpha * x[i]
		}
		writeVec(k, s.b, s.t, s.incy, y)
	case kScal:
		if s.n == 0 {
			return
		}
		alpha := s.scalar(k, s.alpha, s.aP, s.t)
		x := readVec(k, s.a, s.t, s.n, s.incx)
		for i := range x {
			x[i] *= alpha
		}
		writeVec(k, s.a, s.t, s.incx, x)
	case kDot:
		var sum float64
		if s.n > 0 {
			x, y := readVec(k, s.a, s.t, s.n, s.incx), readVec(k, s.b, s.t, s.n, s.incy)
			for i := range x {
				sum += x[i] * y[i]
			}
		}
		writeScalar(k, s.res, s.t, sum)
	case kNrm2:
		var x []float64
		if s.n > 0 {
			x = readVec(k, s.a, s.t, s.n, s.incx)
		}
		writeScalar(k, s.res, s.t, nrm2(x))
	case kGemv:
		s.gemv(k)
	case kGemm, kGemmEx:
		for i := 0; i < s.batches; i++ {
			s.gemm(k, i)
		}
	}
}

// scalar is alpha or beta: the host value, or the one in device memory.
func (s *simArgs) scalar(k *sim.KernelCall, v float64, p gpumem.Ptr, t Type) float64 {
	if s.mode == Device {
		return readScalar(k, p, t)
	}
	return v
}

func (s *simArgs) gemv(k *sim.KernelCall) {
	if s.m == 0 || s.n == 0 {
		return
	}
	alpha, beta := s.scalar(k, s.alpha, s.aP, s.t), s.scalar(k, s.beta, s.bP, s.t)
	lx, ly := gemvLens(s.ta, s.m, s.n)
	a := readMat(k, s.a, s.t, s.m, s.n, s.lda)
	x := readVec(k, s.b, s.t, lx, s.incx)
	var y []float64
	if beta != 0 {
		y = readVec(k, s.c, s.t, ly, s.incy)
	} else {
		probeSpan(k, s.c, vecBytes(s.t, ly, s.incy))
		y = make([]float64, ly)
	}
	for i := range y {
		var sum float64
		for j := range x {
			if alpha == 0 {
				break // reference BLAS: A and x are not read, an Inf there adds no NaN
			}
			if s.ta.transposed() {
				sum += a[j+i*s.m] * x[j]
			} else {
				sum += a[i+j*s.m] * x[j]
			}
		}
		switch {
		case alpha == 0 && beta == 0:
			y[i] = 0
		case alpha == 0:
			y[i] = beta * y[i]
		case beta == 0:
			y[i] = alpha * sum
		default:
			y[i] = alpha*sum + beta*y[i]
		}
	}
	writeVec(k, s.c, s.t, s.incy, y)
}

// gemm computes batch i of a gemm.
func (s *simArgs) gemm(k *sim.KernelCall, i int) {
	if s.m == 0 || s.n == 0 {
		return
	}
	st := s.t // the scalars' and accumulation's type
	ct := s.t
	if s.kind == kGemmEx {
		st, ct = F32, s.out
	}
	alpha, beta := s.scalar(k, s.alpha, s.aP, st), s.scalar(k, s.beta, s.bP, st)
	cp := s.c.Add(uint64(int64(i) * s.sc * int64(ct.Size())))
	var c []float64
	if beta != 0 {
		c = readMat(k, cp, ct, s.m, s.n, s.ldc)
		for j := range c {
			c[j] *= beta
		}
	} else {
		probeSpan(k, cp, matBytes(ct, s.m, s.n, s.ldc))
		c = make([]float64, s.m*s.n)
	}
	if alpha != 0 && s.k > 0 {
		ar, ac := stored(s.ta, s.m, s.k)
		br, bc := stored(s.tb, s.k, s.n)
		a := readMat(k, s.a.Add(uint64(int64(i)*s.sa*int64(s.t.Size()))), s.t, ar, ac, s.lda)
		b := readMat(k, s.b.Add(uint64(int64(i)*s.sb*int64(s.t.Size()))), s.t, br, bc, s.ldb)
		for col := 0; col < s.n; col++ {
			for row := 0; row < s.m; row++ {
				var sum float64
				for l := 0; l < s.k; l++ {
					var av, bv float64 // op(A)[row][l], op(B)[l][col]
					if s.ta.transposed() {
						av = a[l+row*ar]
					} else {
						av = a[row+l*ar]
					}
					if s.tb.transposed() {
						bv = b[col+l*br]
					} else {
						bv = b[l+col*br]
					}
					sum += av * bv
				}
				c[row+col*s.m] += alpha * sum
			}
		}
	}
	writeMat(k, cp, ct, s.m, s.n, s.ldc, c)
}

// nrm2 is the Euclidean norm, scaled so that no square overflows.
func nrm2(x []float64) float64 {
	scale, ssq := 0.0, 1.0
	for _, v := range x {
		if v == 0 {
			continue
		}
		a := math.Abs(v)
		if scale < a {
			ssq = 1 + ssq*(scale/a)*(scale/a)
			scale = a
		} else {
			ssq += (a / scale) * (a / scale)
		}
	}
	return scale * math.Sqrt(ssq)
}

// decode reads one element of type t from b.
func decode(t Type, b []byte) float64 {
	switch t {
	case F32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	case F64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	case F16:
		return float64(F16ToFloat32(binary.LittleEndian.Uint16(b)))
	case BF16:
		return float64(BF16ToFloat32(binary.LittleEndian.Uint16(b)))
	}
	return 0
}

// encode writes v as one element of type t into b, rounding.
func encode(t Type, b []byte, v float64) {
	switch t {
	case F32:
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v)))
	case F64:
		binary.LittleEndian.PutUint64(b, math.Float64bits(v))
	case F16:
		binary.LittleEndian.PutUint16(b, F16FromFloat32(float32(v)))
	case BF16:
		binary.LittleEndian.PutUint16(b, BF16FromFloat32(float32(v)))
	}
}

func readScalar(k *sim.KernelCall, p gpumem.Ptr, t Type) float64 {
	b := make([]byte, t.Size())
	k.Read(p, b)
	return decode(t, b)
}

func writeScalar(k *sim.KernelCall, p gpumem.Ptr, t Type, v float64) {
	b := make([]byte, t.Size())
	encode(t, b, v)
	k.Write(p, b)
}

// vecIndex is the stored index of element i of an n-element vector with
// increment inc (BLAS: a negative increment starts from the end).
func vecIndex(i, n, inc int) int {
	if inc > 0 {
		return i * inc
	}
	return (n - 1 - i) * -inc
}

// readVec reads n elements (n > 0) with increment inc, in vector order.
func readVec(k *sim.KernelCall, p gpumem.Ptr, t Type, n, inc int) []float64 {
	abs := max(inc, -inc)
	size := t.Size()
	buf := readSpan(k, p, ((n-1)*abs+1)*size)
	v := make([]float64, n)
	for i := range v {
		o := vecIndex(i, n, inc) * size
		v[i] = decode(t, buf[o:o+size])
	}
	return v
}

// writeVec writes v with increment inc, touching only its elements.
func writeVec(k *sim.KernelCall, p gpumem.Ptr, t Type, inc int, v []float64) {
	n, size := len(v), t.Size()
	if inc == 1 || inc == -1 {
		buf := make([]byte, n*size)
		for i, x := range v {
			o := vecIndex(i, n, inc) * size
			encode(t, buf[o:o+size], x)
		}
		k.Write(p, buf)
		return
	}
	b := make([]byte, size)
	for i, x := range v {
		encode(t, b, x)
		k.Write(p.Add(uint64(vecIndex(i, n, inc)*size)), b)
	}
}

// readMat reads a rows x cols column-major matrix with leading dimension
// ld (rows, cols > 0) into a dense one (leading dimension rows).
func readMat(k *sim.KernelCall, p gpumem.Ptr, t Type, rows, cols, ld int) []float64 {
	size := t.Size()
	buf := readSpan(k, p, matBytes(t, rows, cols, ld))
	v := make([]float64, rows*cols)
	for j := 0; j < cols; j++ {
		for i := 0; i < rows; i++ {
			o := (i + j*ld) * size
			v[i+j*rows] = decode(t, buf[o:o+size])
		}
	}
	return v
}

// matBytes is the span of a rows x cols matrix with leading dimension ld.
func matBytes(t Type, rows, cols, ld int) int { return ((cols-1)*ld + rows) * t.Size() }

// vecBytes is the span of an n-element vector with increment inc.
func vecBytes(t Type, n, inc int) int { return ((n-1)*max(inc, -inc) + 1) * t.Size() }

// spanChunk is the most a kernel reads at once: what it sets aside for an
// operand grows only as reads of it succeed.
const spanChunk = 1 << 20

// readSpan reads n bytes at p chunk by chunk. A span that runs past its
// allocation faults the kernel at the first chunk outside it, before the
// kernel has set aside more memory than the allocation covers: Go checks
// shapes, not allocations, so a span may claim hundreds of GiB.
func readSpan(k *sim.KernelCall, p gpumem.Ptr, n int) []byte {
	var buf []byte
	for off := 0; off < n; {
		c := min(n-off, spanChunk)
		buf = slices.Grow(buf, c)[:off+c]
		k.Read(p.Add(uint64(off)), buf[off:])
		off += c
	}
	return buf
}

// probeSpan checks that n bytes at p lie in device memory, chunk by chunk,
// before the kernel sets aside a result it will write there.
func probeSpan(k *sim.KernelCall, p gpumem.Ptr, n int) {
	buf := make([]byte, min(n, spanChunk))
	for off := 0; off < n; {
		c := min(n-off, spanChunk)
		k.Read(p.Add(uint64(off)), buf[:c])
		off += c
	}
}

// writeMat writes a dense rows x cols matrix to one with leading dimension
// ld, column by column.
func writeMat(k *sim.KernelCall, p gpumem.Ptr, t Type, rows, cols, ld int, v []float64) {
	size := t.Size()
	col := make([]byte, rows*size)
	for j := 0; j < cols; j++ {
		for i := 0; i < rows; i++ {
			encode(t, col[i*size:(i+1)*size], v[i+j*rows])
		}
		k.Write(p.Add(uint64(j*ld*size)), col)
	}
}
