package blas

import "github.com/gpumem/gpumem"

// kind is a routine family.
type kind int

const (
	kAxpy kind = iota + 1
	kDot
	kNrm2
	kScal
	kGemv
	kGemm    // gemm and strided-batched gemm (batch > 0)
	kGemmEx  // float16/bfloat16 gemm, float32 scalars and accumulation
	numKinds // the number of kinds plus one
)

// call is one routine call as both engines take it: checked by check
// before an engine sees it. Vectors are x and y; matrices a, b and c.
type call struct {
	routine string
	kind    kind
	t       Type // element type (GemmEx: of A and B)
	out     Type // GemmEx: C's type
	mode    PointerMode

	ta, tb  Transpose
	m, n, k int

	alpha, beta   float64    // host mode
	alphaP, betaP gpumem.Ptr // device mode

	a, b, c       gpumem.Ptr
	lda, ldb, ldc int
	sa, sb, sc    int64 // strides in elements (batched gemm)
	batch         int   // strided: the batch count (0 does nothing)
	strided       bool  // a strided-batched gemm

	x, y       gpumem.Ptr
	incx, incy int

	res    gpumem.Ptr // device mode: where Dot and Nrm2 write
	result float64    // host mode: what Dot and Nrm2 returned
}

// batches is the number of gemms the call makes.
func (c *call) batches() int {
	if c.strided {
		return c.batch
	}
	return 1
}

// stored returns the stored shape (rows, cols) of a matrix that op makes
// rows x cols.
func stored(t Transpose, rows, cols int) (int, int) {
	if t.transposed() {
		return cols, rows
	}
	return rows, cols
}

// gemvLens returns the lengths of x and y of a gemv of an m x n A.
func gemvLens(t Transpose, m, n int) (lx, ly int) {
	if t.transposed() {
		return m, n
	}
	return n, m
}
