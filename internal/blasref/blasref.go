// Package blasref is a straightforward BLAS in float64 loops, column-major
// as the libraries are, written apart from the blas package's simulator
// kernels: the simulator tests and the GPU tests check the package against
// it. It is for tests only.
package blasref

// Gemm computes C = alpha*op(A)*op(B) + beta*C for m x n C, where op(X) is X
// or, with the matching trans flag, its transpose. With beta 0, C is not
// read (as in BLAS: NaN in C does not propagate).
func Gemm(transA, transB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			var s float64
			for l := 0; l < k; l++ {
				ai, bi := i+l*lda, l+j*ldb
				if transA {
					ai = l + i*lda
				}
				if transB {
					bi = j + l*ldb
				}
				av, bv := a[ai], b[bi]
				s += av * bv
			}
			if beta == 0 {
				c[i+j*ldc] = alpha * s
			} else {
				c[i+j*ldc] = alpha*s + beta*c[i+j*ldc]
			}
		}
	}
}
