package blas

import (
	"runtime"
	"strings"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/bind"
)

// rocBLAS, from rocblas-auxiliary.h, rocblas-functions.h and
// rocblas-types.h (rocBLAS 2.x to 5.x, ROCm 5 to 7), with rocblas_int the
// default int32 (not the ILP64 build):
//
//	rocblas_status rocblas_create_handle(rocblas_handle *handle);
//	rocblas_status rocblas_destroy_handle(rocblas_handle handle);
//	rocblas_status rocblas_set_stream(rocblas_handle handle, hipStream_t stream);
//	rocblas_status rocblas_set_pointer_mode(rocblas_handle handle, rocblas_pointer_mode pointer_mode);
//	rocblas_status rocblas_set_workspace(rocblas_handle handle, void *addr, size_t size);
//	const char *rocblas_status_to_string(rocblas_status status);
//	rocblas_status rocblas_get_version_string_size(size_t *len);
//	rocblas_status rocblas_get_version_string(char *buf, size_t len);
//	rocblas_saxpy, rocblas_sdot, rocblas_snrm2, rocblas_sscal, rocblas_sgemv, rocblas_sgemm:
//	    cuBLAS's argument lists;
//	rocblas_sgemm_strided_batched: cuBLAS's, strides rocblas_stride (int64_t);
//	rocblas_status rocblas_gemm_ex(rocblas_handle handle, rocblas_operation trans_a, rocblas_operation trans_b,
//	    rocblas_int m, rocblas_int n, rocblas_int k, const void *alpha,
//	    const void *a, rocblas_datatype a_type, rocblas_int lda,
//	    const void *b, rocblas_datatype b_type, rocblas_int ldb, const void *beta,
//	    const void *c, rocblas_datatype c_type, rocblas_int ldc,
//	    void *d, rocblas_datatype d_type, rocblas_int ldd,
//	    rocblas_datatype compute_type, rocblas_gemm_algo algo, int32_t solution_index, uint32_t flags);
//
// Enums: rocblas_operation_none/transpose/conjugate_transpose = 111/112/113;
// rocblas_pointer_mode_host/device = 0/1; rocblas_datatype_f16_r 150,
// f32_r 151, f64_r 152, bf16_r 168; rocblas_gemm_algo_standard 0;
// rocblas_gemm_flags_none 0. Statuses: success 0, invalid_handle 1,
// not_implemented 2, invalid_pointer 3, invalid_size 4, memory_error 5,
// internal_error 6, perf_degraded 7, ..., invalid_value 11,
// excluded_from_build 14, arch_mismatch 15.
var rocblasTable = newTable("rocblas", bind.HIP, [numOps]sym{
	opCreate:         {"rocblas_create_handle", 1, true, "creates the handle on the current device (made current by the call)"},
	opDestroy:        {"rocblas_destroy_handle", 1, true, ""},
	opSetStream:      {"rocblas_set_stream", 2, true, ""},
	opSetPointerMode: {"rocblas_set_pointer_mode", 2, true, "host 0, device 1"},
	opSetWorkspace:   {"rocblas_set_workspace", 3, false, "the handle's workspace from a gpumem allocator"},
	opStatusName:     {"rocblas_status_to_string", 1, false, ""},
	opVersion:        {"rocblas_get_version_string", 2, false, "the version without a device"},
	opVersionSize:    {"rocblas_get_version_string_size", 1, false, ""},
	opSaxpy:          {"rocblas_saxpy", 7, true, ""},
	opDaxpy:          {"rocblas_daxpy", 7, true, ""},
	opSdot:           {"rocblas_sdot", 7, true, ""},
	opDdot:           {"rocblas_ddot", 7, true, ""},
	opSnrm2:          {"rocblas_snrm2", 5, true, ""},
	opDnrm2:          {"rocblas_dnrm2", 5, true, ""},
	opSscal:          {"rocblas_sscal", 5, true, ""},
	opDscal:          {"rocblas_dscal", 5, true, ""},
	opSgemv:          {"rocblas_sgemv", 12, true, ""},
	opDgemv:          {"rocblas_dgemv", 12, true, ""},
	opSgemm:          {"rocblas_sgemm", 14, true, ""},
	opDgemm:          {"rocblas_dgemm", 14, true, ""},
	opSgemmStrided:   {"rocblas_sgemm_strided_batched", 18, true, "rocblas_stride (int64_t) strides"},
	opDgemmStrided:   {"rocblas_dgemm_strided_batched", 18, true, ""},
	opGemmEx:         {"rocblas_gemm_ex", 24, true, "D = C in place: d, d_type, ldd repeat c's"},
})

var rocblasDialect = dialect{
	trans:     [3]uintptr{111, 112, 113},
	pointer:   [2]uintptr{0, 1},
	exType:    [5]uintptr{F32: 151, F64: 152, F16: 150, BF16: 168},
	exCompute: 151,
	exAlgo:    0,
	exShape:   exRoc,
}

// ROCBLAS is the declaration of rocBLAS: librocblas.so.5, .4, .3 or .0 (or
// the file GPUMEM_ROCBLAS_LIBRARY names), used on HIP where hipBLAS is
// absent.
var ROCBLAS = &bind.Library{
	Name:  "rocblas",
	Files: [bind.NumVendors][]string{bind.HIP: {"librocblas.so.5", "librocblas.so.4", "librocblas.so.3", "librocblas.so.0", "librocblas.so"}},
	Env:   "GPUMEM_ROCBLAS_LIBRARY",
	Table: rocblasTable,
	Status: bind.Status{
		Name: bind.NameFunc(opStatusName),
		Sentinel: statusSentinel(map[int]error{
			1: gpumem.ErrInvalidValue, 2: gpumem.ErrNotSupported, 3: gpumem.ErrInvalidValue, 4: gpumem.ErrInvalidValue,
			5: gpumem.ErrOutOfMemory, 11: gpumem.ErrInvalidValue, 14: gpumem.ErrNotSupported, 15: gpumem.ErrNotSupported,
		}),
	},
	Version: rocblasVersion,
}

// rocblasVersion reads rocblas_get_version_string ("4.4.1.2b1c...").
func rocblasVersion(l *bind.Lib) (string, error) {
	n := new(uint64)
	escape(n)
	if err := l.Check(opVersionSize, addr(n)); err != nil {
		return "", err
	}
	size := *n
	if size == 0 || size > 4096 {
		size = 256
	}
	buf := make([]byte, size)
	err := l.Check(opVersion, addr(&buf[0]), uintptr(size))
	runtime.KeepAlive(buf)
	if err != nil {
		return "", err
	}
	s := string(buf)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	return s, nil
}
