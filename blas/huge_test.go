package blas_test

import (
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/blas"
)

// Shapes that pass Go's checks (Go cannot see an allocation's size) but
// span far more than their small allocations fault the simulator's kernel,
// as they would fault a GPU, without the simulator first setting aside
// memory for the whole span: hundreds of GiB would end the process.
func TestHugeSpansFault(t *testing.T) {
	T, N := blas.Trans, blas.NoTrans
	cases := []struct {
		name string
		call func(h *blas.Handle, p gpumem.Ptr) error
	}{
		{"dot strided x", func(h *blas.Handle, p gpumem.Ptr) error {
			_, err := h.Sdot(1<<30, p, 1<<8, p, 1)
			return err
		}},
		{"nrm2", func(h *blas.Handle, p gpumem.Ptr) error { _, err := h.Dnrm2(1<<30, p, 1<<8); return err }},
		{"axpy", func(h *blas.Handle, p gpumem.Ptr) error { return h.Saxpy(1<<30, 1, p, 1<<8, p, 1<<8) }},
		{"scal", func(h *blas.Handle, p gpumem.Ptr) error { return h.Dscal(1<<30, 2, p, 1<<8) }},
		{"gemv y, beta 0", func(h *blas.Handle, p gpumem.Ptr) error {
			return h.Dgemv(T, 1, 1<<31-1, 1, p, 1, p, 1, 0, p, 1<<8)
		}},
		{"gemm C, beta 0", func(h *blas.Handle, p gpumem.Ptr) error {
			return h.Sgemm(N, N, 1<<16, 1<<16, 1, 1, p, 1<<16, p, 1, 0, p, 1<<16)
		}},
		{"gemm A, lda", func(h *blas.Handle, p gpumem.Ptr) error {
			return h.Dgemm(N, N, 1, 1, 1<<30, 1, p, 1, p, 1<<30, 1, p, 1)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newFaultingGPU(t)
			h := openHandle(t, g)
			p, err := g.Malloc(0, 256)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Free(0, p)
			err = c.call(h, p)
			if err == nil {
				err = g.StreamSynchronize(gpumem.Stream{})
			}
			if err == nil || !strings.Contains(err.Error(), "past the end") {
				t.Errorf("%v; want a fault past the end of the allocation", err)
			}
		})
	}
}
