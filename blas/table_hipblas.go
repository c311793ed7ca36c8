package blas

import (
	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/bind"
)

// hipBLAS, from hipblas.h and hipblas-common.h (hipBLAS 0.x to 3.0, ROCm 5
// to 7). Its functions copy cuBLAS's signatures under hipblas names
// (hipblasCreate, hipblasSetStream(handle, hipStream_t), hipblasSaxpy ...,
// hipblasSgemmStridedBatched with long long strides); its enums are its own:
//
//	hipblasOperation_t   HIPBLAS_OP_N/T/C = 111/112/113
//	hipblasPointerMode_t HIPBLAS_POINTER_MODE_HOST/DEVICE = 0/1
//	hipblasGemmAlgo_t    HIPBLAS_GEMM_DEFAULT = 160
//	hipblasStatus_t      SUCCESS 0, NOT_INITIALIZED 1, ALLOC_FAILED 2, INVALID_VALUE 3,
//	                     MAPPING_ERROR 4, EXECUTION_FAILED 5, INTERNAL_ERROR 6,
//	                     NOT_SUPPORTED 7, ARCH_MISMATCH 8, HANDLE_IS_NULLPTR 9,
//	                     INVALID_ENUM 10, UNKNOWN 11
//
// GemmEx's types changed twice (hipBLAS CHANGELOG; hipblas.h of each):
//
//   - hipBLAS 0.x and 1.x (ROCm 5): hipblasGemmEx takes hipblasDatatype_t for
//     the matrices and the compute type: HIPBLAS_R_16F 150, R_32F 151,
//     R_64F 152, R_16B 168.
//   - hipBLAS 2.x (ROCm 6): hipblasGemmEx keeps that; hipblasGemmEx_v2 takes
//     hipDataType (HIP_R_32F 0, HIP_R_64F 1, HIP_R_16F 2, HIP_R_16BF 14) and
//     hipblasComputeType_t (HIPBLAS_COMPUTE_32F = 2).
//   - hipBLAS 3.0 (ROCm 7): the _v2 API is the only one, under the plain
//     name hipblasGemmEx; hipblasSetWorkspace(handle, void *, size_t) appears.
//
// The binding picks by what resolves: hipblasGemmEx_v2 present is 2.x;
// else hipblasSetWorkspace present is 3.0 and later; else 0.x/1.x.
var hipblasTable = newTable("hipblas", bind.HIP, [numOps]sym{
	opCreate:         {"hipblasCreate", 1, true, "creates the handle on the current device (made current by the call)"},
	opDestroy:        {"hipblasDestroy", 1, true, ""},
	opSetStream:      {"hipblasSetStream", 2, true, ""},
	opSetPointerMode: {"hipblasSetPointerMode", 2, true, "HOST 0, DEVICE 1"},
	opSetWorkspace:   {"hipblasSetWorkspace", 3, false, "hipBLAS 3.0+ (ROCm 7); its presence also selects GemmEx's hipDataType dialect"},
	opStatusName:     {"hipblasStatusToString", 1, false, "hipBLAS 0.46+"},
	opSaxpy:          {"hipblasSaxpy", 7, true, ""},
	opDaxpy:          {"hipblasDaxpy", 7, true, ""},
	opSdot:           {"hipblasSdot", 7, true, ""},
	opDdot:           {"hipblasDdot", 7, true, ""},
	opSnrm2:          {"hipblasSnrm2", 5, true, ""},
	opDnrm2:          {"hipblasDnrm2", 5, true, ""},
	opSscal:          {"hipblasSscal", 5, true, ""},
	opDscal:          {"hipblasDscal", 5, true, ""},
	opSgemv:          {"hipblasSgemv", 12, true, ""},
	opDgemv:          {"hipblasDgemv", 12, true, ""},
	opSgemm:          {"hipblasSgemm", 14, true, ""},
	opDgemm:          {"hipblasDgemm", 14, true, ""},
	opSgemmStrided:   {"hipblasSgemmStridedBatched", 18, true, "hipblasStride (int64_t) strides"},
	opDgemmStrided:   {"hipblasDgemmStridedBatched", 18, true, ""},
	opGemmEx:         {"hipblasGemmEx", 19, true, "hipblasDatatype_t before hipBLAS 3.0, hipDataType from 3.0"},
	opGemmExV2:       {"hipblasGemmEx_v2", 19, false, "hipBLAS 2.x only: hipDataType and hipblasComputeType_t"},
})

// hipblasDialects: 0.x/1.x, 2.x (GemmEx_v2), 3.0+.
var (
	hipblasDialectV1 = dialect{
		trans:     [3]uintptr{111, 112, 113},
		pointer:   [2]uintptr{0, 1},
		exType:    [5]uintptr{F32: 151, F64: 152, F16: 150, BF16: 168},
		exCompute: 151, // HIPBLAS_R_32F as the compute type
		exAlgo:    160,
		exShape:   exCUDA,
	}
	hipblasDialectV2 = dialect{
		trans:     [3]uintptr{111, 112, 113},
		pointer:   [2]uintptr{0, 1},
		exType:    [5]uintptr{F32: 0, F64: 1, F16: 2, BF16: 14},
		exCompute: 2, // HIPBLAS_COMPUTE_32F
		exAlgo:    160,
		exShape:   exCUDAV2,
	}
	hipblasDialectV3 = dialect{
		trans:     [3]uintptr{111, 112, 113},
		pointer:   [2]uintptr{0, 1},
		exType:    [5]uintptr{F32: 0, F64: 1, F16: 2, BF16: 14},
		exCompute: 2,
		exAlgo:    160,
		exShape:   exCUDA,
	}
)

// hipblasDialect picks the dialect of an opened hipBLAS by its symbols.
func hipblasDialect(l *bind.Lib) dialect {
	switch {
	case l.Has(opGemmExV2):
		return hipblasDialectV2
	case l.Has(opSetWorkspace):
		return hipblasDialectV3
	}
	return hipblasDialectV1
}

// HIPBLAS is the declaration of hipBLAS: libhipblas.so.3, .2, .1 or .0 (or
// the file GPUMEM_HIPBLAS_LIBRARY names). It loads rocBLAS itself.
var HIPBLAS = &bind.Library{
	Name:  "hipblas",
	Files: [bind.NumVendors][]string{bind.HIP: {"libhipblas.so.3", "libhipblas.so.2", "libhipblas.so.1", "libhipblas.so.0", "libhipblas.so"}},
	Env:   "GPUMEM_HIPBLAS_LIBRARY",
	Table: hipblasTable,
	Status: bind.Status{
		Name: bind.NameFunc(opStatusName),
		Sentinel: statusSentinel(map[int]error{
			1: gpumem.ErrNoDevice, 2: gpumem.ErrOutOfMemory, 3: gpumem.ErrInvalidValue, 7: gpumem.ErrNotSupported,
			8: gpumem.ErrNotSupported, 9: gpumem.ErrInvalidValue, 10: gpumem.ErrInvalidValue,
		}),
	},
}
