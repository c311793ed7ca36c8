package blas

import "github.com/gpumem/gpumem"

// The routines, column-major as the libraries are: element (i, j) of a
// matrix with leading dimension ld is at index i + j*ld. Each is queued on
// the handle's stream; only Dot and Nrm2 with host scalars wait for the
// GPU, to return their result. Dimensions, leading dimensions, increments,
// strides and pointers are checked first (see the package overview); a
// failing check is an error matching gpumem.ErrInvalidValue and nothing is
// queued. Vectors follow BLAS's increments: a negative increment walks the
// vector from its last stored element (axpy, dot, gemv); nrm2 and scal take
// positive increments only.

// Saxpy computes y = alpha*x + y on n float32 elements.
func (h *Handle) Saxpy(n int, alpha float32, x gpumem.Ptr, incx int, y gpumem.Ptr, incy int) error {
	return h.axpy("Saxpy", F32, n, float64(alpha), 0, Host, x, incx, y, incy)
}

// Daxpy computes y = alpha*x + y on n float64 elements.
func (h *Handle) Daxpy(n int, alpha float64, x gpumem.Ptr, incx int, y gpumem.Ptr, incy int) error {
	return h.axpy("Daxpy", F64, n, alpha, 0, Host, x, incx, y, incy)
}

// AxpyDevice computes y = alpha*x + y on n elements of type t (F32, F64)
// with alpha read from device memory at alpha, without waiting.
func (h *Handle) AxpyDevice(t Type, n int, alpha, x gpumem.Ptr, incx int, y gpumem.Ptr, incy int) error {
	return h.axpy("AxpyDevice", t, n, 0, alpha, Device, x, incx, y, incy)
}

func (h *Handle) axpy(r string, t Type, n int, alpha float64, alphaP gpumem.Ptr, mode PointerMode, x gpumem.Ptr, incx int, y gpumem.Ptr, incy int) error {
	if err := h.lock(r); err != nil {
		return err
	}
	defer h.mu.Unlock()
	h.c = call{routine: r, kind: kAxpy, t: t, mode: mode, n: n, alpha: alpha, alphaP: alphaP, x: x, incx: incx, y: y, incy: incy}
	return h.do()
}

// Sdot returns the dot product of n float32 elements of x and y, waiting
// for it.
func (h *Handle) Sdot(n int, x gpumem.Ptr, incx int, y gpumem.Ptr, incy int) (float32, error) {
	r, err := h.dot("Sdot", kDot, F32, n, x, incx, y, incy, 0, Host)
	return float32(r), err
}

// Ddot returns the dot product of n float64 elements of x and y, waiting
// for it.
func (h *Handle) Ddot(n int, x gpumem.Ptr, incx int, y gpumem.Ptr, incy int) (float64, error) {
	return h.dot("Ddot", kDot, F64, n, x, incx, y, incy, 0, Host)
}

// DotDevice writes the dot product of n elements of type t of x and y to
// device memory at result, in stream order, without waiting.
func (h *Handle) DotDevice(t Type, n int, x gpumem.Ptr, incx int, y gpumem.Ptr, incy int, result gpumem.Ptr) error {
	_, err := h.dot("DotDevice", kDot, t, n, x, incx, y, incy, result, Device)
	return err
}

// Snrm2 returns the Euclidean norm of n float32 elements of x, waiting for
// it.
func (h *Handle) Snrm2(n int, x gpumem.Ptr, incx int) (float32, error) {
	r, err := h.dot("Snrm2", kNrm2, F32, n, x, incx, 0, 1, 0, Host)
	return float32(r), err
}

// Dnrm2 returns the Euclidean norm of n float64 elements of x, waiting for
// it.
func (h *Handle) Dnrm2(n int, x gpumem.Ptr, incx int) (float64, error) {
	return h.dot("Dnrm2", kNrm2, F64, n, x, incx, 0, 1, 0, Host)
}

// Nrm2Device writes the Euclidean norm of n elements of type t of x to
// device memory at result, without waiting.
func (h *Handle) Nrm2Device(t Type, n int, x gpumem.Ptr, incx int, result gpumem.Ptr) error {
	_, err := h.dot("Nrm2Device", kNrm2, t, n, x, incx, 0, 1, result, Device)
	return err
}

func (h *Handle) dot(r string, k kind, t Type, n int, x gpumem.Ptr, incx int, y gpumem.Ptr, incy int, res gpumem.Ptr, mode PointerMode) (float64, error) {
	if err := h.lock(r); err != nil {
		return 0, err
	}
	defer h.mu.Unlock()
	h.c = call{routine: r, kind: k, t: t, mode: mode, n: n, x: x, incx: incx, y: y, incy: incy, res: res}
	if err := h.do(); err != nil {
		return 0, err
	}
	return h.c.result, nil
}

// Sscal computes x = alpha*x on n float32 elements.
func (h *Handle) Sscal(n int, alpha float32, x gpumem.Ptr, incx int) error {
	return h.scal("Sscal", F32, n, float64(alpha), 0, Host, x, incx)
}

// Dscal computes x = alpha*x on n float64 elements.
func (h *Handle) Dscal(n int, alpha float64, x gpumem.Ptr, incx int) error {
	return h.scal("Dscal", F64, n, alpha, 0, Host, x, incx)
}

// ScalDevice computes x = alpha*x on n elements of type t, alpha in device
// memory.
func (h *Handle) ScalDevice(t Type, n int, alpha, x gpumem.Ptr, incx int) error {
	return h.scal("ScalDevice", t, n, 0, alpha, Device, x, incx)
}

func (h *Handle) scal(r string, t Type, n int, alpha float64, alphaP gpumem.Ptr, mode PointerMode, x gpumem.Ptr, incx int) error {
	if err := h.lock(r); err != nil {
		return err
	}
	defer h.mu.Unlock()
	h.c = call{routine: r, kind: kScal, t: t, mode: mode, n: n, alpha: alpha, alphaP: alphaP, x: x, incx: incx}
	return h.do()
}

// Sgemv computes y = alpha*op(A)*x + beta*y for an m x n float32 matrix A
// (op(A) is n x m when trans is Trans): x has n elements (m transposed),
// y m (n transposed). With beta 0, y is not read.
func (h *Handle) Sgemv(trans Transpose, m, n int, alpha float32, a gpumem.Ptr, lda int, x gpumem.Ptr, incx int, beta float32, y gpumem.Ptr, incy int) error {
	return h.gemv(call{routine: "Sgemv", t: F32, ta: trans, m: m, n: n, alpha: float64(alpha), a: a, lda: lda, x: x, incx: incx, beta: float64(beta), y: y, incy: incy})
}

// Dgemv is Sgemv on float64.
func (h *Handle) Dgemv(trans Transpose, m, n int, alpha float64, a gpumem.Ptr, lda int, x gpumem.Ptr, incx int, beta float64, y gpumem.Ptr, incy int) error {
	return h.gemv(call{routine: "Dgemv", t: F64, ta: trans, m: m, n: n, alpha: alpha, a: a, lda: lda, x: x, incx: incx, beta: beta, y: y, incy: incy})
}

// GemvDevice is Sgemv or Dgemv (t) with alpha and beta in device memory.
func (h *Handle) GemvDevice(t Type, trans Transpose, m, n int, alpha, a gpumem.Ptr, lda int, x gpumem.Ptr, incx int, beta, y gpumem.Ptr, incy int) error {
	return h.gemv(call{routine: "GemvDevice", t: t, mode: Device, ta: trans, m: m, n: n, alphaP: alpha, a: a, lda: lda, x: x, incx: incx, betaP: beta, y: y, incy: incy})
}

func (h *Handle) gemv(c call) error {
	if err := h.lock(c.routine); err != nil {
		return err
	}
	defer h.mu.Unlock()
	c.kind = kGemv
	h.c = c
	return h.do()
}

// Sgemm computes C = alpha*op(A)*op(B) + beta*C for float32 matrices, C m x
// n, op(A) m x k and op(B) k x n: A is stored m x k (k x m when transA is
// Trans) with leading dimension lda >= max(1, its rows), B k x n (n x k),
// C m x n with ldc >= max(1, m). With beta 0, C is not read.
func (h *Handle) Sgemm(transA, transB Transpose, m, n, k int, alpha float32, a gpumem.Ptr, lda int, b gpumem.Ptr, ldb int, beta float32, c gpumem.Ptr, ldc int) error {
	return h.gemm(call{routine: "Sgemm", t: F32, ta: transA, tb: transB, m: m, n: n, k: k, alpha: float64(alpha), a: a, lda: lda, b: b, ldb: ldb, beta: float64(beta), c: c, ldc: ldc})
}

// Dgemm is Sgemm on float64.
func (h *Handle) Dgemm(transA, transB Transpose, m, n, k int, alpha float64, a gpumem.Ptr, lda int, b gpumem.Ptr, ldb int, beta float64, c gpumem.Ptr, ldc int) error {
	return h.gemm(call{routine: "Dgemm", t: F64, ta: transA, tb: transB, m: m, n: n, k: k, alpha: alpha, a: a, lda: lda, b: b, ldb: ldb, beta: beta, c: c, ldc: ldc})
}

// GemmDevice is Sgemm or Dgemm (t) with alpha and beta in device memory.
func (h *Handle) GemmDevice(t Type, transA, transB Transpose, m, n, k int, alpha, a gpumem.Ptr, lda int, b gpumem.Ptr, ldb int, beta, c gpumem.Ptr, ldc int) error {
	return h.gemm(call{routine: "GemmDevice", t: t, mode: Device, ta: transA, tb: transB, m: m, n: n, k: k, alphaP: alpha, a: a, lda: lda, b: b, ldb: ldb, betaP: beta, c: c, ldc: ldc})
}

// SgemmStridedBatched computes batch Sgemms: the i-th reads A at a +
// i*strideA elements, B at b + i*strideB and writes C at c + i*strideC.
// Strides of A and B may be 0 (one matrix for every batch); C's must keep
// the results apart (at least C's extent, (n-1)*ldc + m).
func (h *Handle) SgemmStridedBatched(transA, transB Transpose, m, n, k int, alpha float32, a gpumem.Ptr, lda int, strideA int64, b gpumem.Ptr, ldb int, strideB int64, beta float32, c gpumem.Ptr, ldc int, strideC int64, batch int) error {
	return h.gemm(call{routine: "SgemmStridedBatched", t: F32, ta: transA, tb: transB, m: m, n: n, k: k, alpha: float64(alpha), a: a, lda: lda, sa: strideA, b: b, ldb: ldb, sb: strideB, beta: float64(beta), c: c, ldc: ldc, sc: strideC, batch: batch, strided: true})
}

// DgemmStridedBatched is SgemmStridedBatched on float64.
func (h *Handle) DgemmStridedBatched(transA, transB Transpose, m, n, k int, alpha float64, a gpumem.Ptr, lda int, strideA int64, b gpumem.Ptr, ldb int, strideB int64, beta float64, c gpumem.Ptr, ldc int, strideC int64, batch int) error {
	return h.gemm(call{routine: "DgemmStridedBatched", t: F64, ta: transA, tb: transB, m: m, n: n, k: k, alpha: alpha, a: a, lda: lda, sa: strideA, b: b, ldb: ldb, sb: strideB, beta: beta, c: c, ldc: ldc, sc: strideC, batch: batch, strided: true})
}

func (h *Handle) gemm(c call) error {
	if err := h.lock(c.routine); err != nil {
		return err
	}
	defer h.mu.Unlock()
	c.kind = kGemm
	h.c = c
	return h.do()
}

// GemmEx computes C = alpha*op(A)*op(B) + beta*C with A and B of type in
// (F16 or BF16), C of type out (in, or F32), accumulating in float32 with
// float32 alpha and beta: cublasGemmEx, hipblasGemmEx, rocblas_gemm_ex.
// Shapes are Sgemm's.
func (h *Handle) GemmEx(transA, transB Transpose, m, n, k int, alpha float32, a gpumem.Ptr, lda int, b gpumem.Ptr, ldb int, beta float32, c gpumem.Ptr, ldc int, in, out Type) error {
	if err := h.lock("GemmEx"); err != nil {
		return err
	}
	defer h.mu.Unlock()
	h.c = call{routine: "GemmEx", kind: kGemmEx, t: in, out: out, ta: transA, tb: transB, m: m, n: n, k: k, alpha: float64(alpha), a: a, lda: lda, b: b, ldb: ldb, beta: float64(beta), c: c, ldc: ldc}
	if in != F16 && in != BF16 {
		return invalid("GemmEx", "A and B of type %v (F16 or BF16)", in)
	}
	return h.do()
}
