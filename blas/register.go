package blas

import "github.com/gpumem/gpumem/bind"

func init() {
	bind.Register(bind.Binding{Name: "blas", Libraries: [bind.NumVendors][]*bind.Library{
		bind.CUDA: {CUBLAS},
		bind.HIP:  {HIPBLAS, ROCBLAS},
	}})
}
