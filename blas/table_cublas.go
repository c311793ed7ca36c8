package blas

import (
	"fmt"
	"runtime"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/bind"
)

// cuBLAS, from cublas_api.h (CUDA 11.0 to 13.0; the signatures the binding
// calls are the same in all of them):
//
//	cublasStatus_t cublasCreate_v2(cublasHandle_t *handle);
//	cublasStatus_t cublasDestroy_v2(cublasHandle_t handle);
//	cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId);
//	cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode);
//	cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace, size_t workspaceSizeInBytes);
//	const char *cublasGetStatusName(cublasStatus_t status);
//	cublasStatus_t cublasGetProperty(libraryPropertyType type, int *value);
//	cublasStatus_t cublasSaxpy_v2(cublasHandle_t handle, int n, const float *alpha, const float *x, int incx, float *y, int incy);
//	cublasStatus_t cublasSdot_v2(cublasHandle_t handle, int n, const float *x, int incx, const float *y, int incy, float *result);
//	cublasStatus_t cublasSnrm2_v2(cublasHandle_t handle, int n, const float *x, int incx, float *result);
//	cublasStatus_t cublasSscal_v2(cublasHandle_t handle, int n, const float *alpha, float *x, int incx);
//	cublasStatus_t cublasSgemv_v2(cublasHandle_t handle, cublasOperation_t trans, int m, int n, const float *alpha,
//	                              const float *A, int lda, const float *x, int incx, const float *beta, float *y, int incy);
//	cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
//	                              int m, int n, int k, const float *alpha, const float *A, int lda,
//	                              const float *B, int ldb, const float *beta, float *C, int ldc);
//	cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
//	                              int m, int n, int k, const float *alpha, const float *A, int lda, long long int strideA,
//	                              const float *B, int ldb, long long int strideB, const float *beta,
//	                              float *C, int ldc, long long int strideC, int batchCount);
//	cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
//	                            int m, int n, int k, const void *alpha, const void *A, cudaDataType Atype, int lda,
//	                            const void *B, cudaDataType Btype, int ldb, const void *beta,
//	                            void *C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType, cublasGemmAlgo_t algo);
//
// (the D routines take double). Enums: CUBLAS_OP_N/T/C = 0/1/2;
// CUBLAS_POINTER_MODE_HOST/DEVICE = 0/1; cudaDataType (library_types.h)
// CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16F = 2, CUDA_R_16BF = 14;
// CUBLAS_COMPUTE_32F = 68 (cublasComputeType_t, CUDA 11+); CUBLAS_GEMM_DEFAULT
// = -1; libraryPropertyType MAJOR_VERSION/MINOR_VERSION/PATCH_LEVEL = 0/1/2.
// Statuses: SUCCESS 0, NOT_INITIALIZED 1, ALLOC_FAILED 3, INVALID_VALUE 7,
// ARCH_MISMATCH 8, MAPPING_ERROR 11, EXECUTION_FAILED 13, INTERNAL_ERROR 14,
// NOT_SUPPORTED 15, LICENSE_ERROR 16.
var cublasTable = newTable("cublas", bind.CUDA, [numOps]sym{
	opCreate:         {"cublasCreate_v2", 1, true, "creates the handle on the current device (made current by the call)"},
	opDestroy:        {"cublasDestroy_v2", 1, true, ""},
	opSetStream:      {"cublasSetStream_v2", 2, true, "also resets the workspace to cuBLAS's own pool: the handle sets it again"},
	opSetPointerMode: {"cublasSetPointerMode_v2", 2, true, "HOST 0, DEVICE 1"},
	opSetWorkspace:   {"cublasSetWorkspace_v2", 3, false, "CUDA 11+: the handle's workspace from a gpumem allocator"},
	opStatusName:     {"cublasGetStatusName", 1, false, "CUDA 11.4+: errors name the status with it"},
	opVersion:        {"cublasGetProperty", 2, false, "MAJOR 0, MINOR 1, PATCH 2: the version without a device"},
	opSaxpy:          {"cublasSaxpy_v2", 7, true, ""},
	opDaxpy:          {"cublasDaxpy_v2", 7, true, ""},
	opSdot:           {"cublasSdot_v2", 7, true, "result: host (blocks) or device pointer, as the pointer mode says"},
	opDdot:           {"cublasDdot_v2", 7, true, ""},
	opSnrm2:          {"cublasSnrm2_v2", 5, true, ""},
	opDnrm2:          {"cublasDnrm2_v2", 5, true, ""},
	opSscal:          {"cublasSscal_v2", 5, true, ""},
	opDscal:          {"cublasDscal_v2", 5, true, ""},
	opSgemv:          {"cublasSgemv_v2", 12, true, ""},
	opDgemv:          {"cublasDgemv_v2", 12, true, ""},
	opSgemm:          {"cublasSgemm_v2", 14, true, ""},
	opDgemm:          {"cublasDgemm_v2", 14, true, ""},
	opSgemmStrided:   {"cublasSgemmStridedBatched", 18, true, "strides are long long"},
	opDgemmStrided:   {"cublasDgemmStridedBatched", 18, true, ""},
	opGemmEx:         {"cublasGemmEx", 19, true, "cudaDataType and cublasComputeType_t (CUDA 11+)"},
})

var cublasDialect = dialect{
	trans:                    [3]uintptr{0, 1, 2},
	pointer:                  [2]uintptr{0, 1},
	exType:                   [5]uintptr{F32: 0, F64: 1, F16: 2, BF16: 14},
	exCompute:                68,
	exAlgo:                   uintptr(uint32(0xffffffff)), // CUBLAS_GEMM_DEFAULT = -1
	exShape:                  exCUDA,
	setStreamResetsWorkspace: true,
}

// CUBLAS is the declaration of cuBLAS: libcublas.so.13, .12 or .11 (or the
// file GPUMEM_CUBLAS_LIBRARY names). Its file depends on libcublasLt of the
// same version, which the loader finds beside it or on its search path.
var CUBLAS = &bind.Library{
	Name:  "cublas",
	Files: [bind.NumVendors][]string{bind.CUDA: {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"}},
	Env:   "GPUMEM_CUBLAS_LIBRARY",
	Table: cublasTable,
	Status: bind.Status{
		Name: bind.NameFunc(opStatusName),
		Sentinel: statusSentinel(map[int]error{
			1: gpumem.ErrNoDevice, 3: gpumem.ErrOutOfMemory, 7: gpumem.ErrInvalidValue,
			8: gpumem.ErrNotSupported, 15: gpumem.ErrNotSupported,
		}),
	},
	Version: cublasVersion,
}

// cublasVersion asks cublasGetProperty for major, minor and patch: no
// handle, so no device, is needed.
func cublasVersion(l *bind.Lib) (string, error) {
	v := new([3]int32)
	escape(v)
	for i := range v {
		if err := l.Check(opVersion, uintptr(i), addr(&v[i])); err != nil {
			return "", err
		}
	}
	runtime.KeepAlive(v)
	return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]), nil
}

// statusSentinel returns a Status.Sentinel from a table of codes.
func statusSentinel(m map[int]error) func(int) error {
	return func(code int) error { return m[code] }
}
