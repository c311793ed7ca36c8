package blas

import "github.com/gpumem/gpumem/bind"

// The rows every BLAS table has, in this order: cuBLAS, hipBLAS and rocBLAS
// are three libraries with one set of operations, so one engine calls any
// of them by these ids. A row a library lacks (hipBLAS 2's GemmEx_v2 in
// cuBLAS) has an empty symbol there.
const (
	opCreate bind.Op = iota
	opDestroy
	opSetStream
	opSetPointerMode
	opSetWorkspace
	opStatusName
	opVersion // cublasGetProperty; rocblas_get_version_string
	opVersionSize
	opSaxpy
	opDaxpy
	opSdot
	opDdot
	opSnrm2
	opDnrm2
	opSscal
	opDscal
	opSgemv
	opDgemv
	opSgemm
	opDgemm
	opSgemmStrided
	opDgemmStrided
	opGemmEx
	opGemmExV2

	numOps
)

// opNames are the rows' names, the Op column of every table.
var opNames = [numOps]string{
	"Create", "Destroy", "SetStream", "SetPointerMode", "SetWorkspace", "StatusName", "Version", "VersionSize",
	"Saxpy", "Daxpy", "Sdot", "Ddot", "Snrm2", "Dnrm2", "Sscal", "Dscal",
	"Sgemv", "Dgemv", "Sgemm", "Dgemm", "SgemmStridedBatched", "DgemmStridedBatched", "GemmEx", "GemmEx_v2",
}

// sym is one library's row for an op: its symbol, argument words, whether
// the binding needs it, and notes.
type sym struct {
	name     string
	args     int
	required bool
	notes    string
}

// newTable builds a library's table for vendor v from its rows in op order.
func newTable(name string, v bind.Vendor, rows [numOps]sym) *bind.Table {
	funcs := make([]bind.Func, numOps)
	for i, r := range rows {
		f := bind.Func{Op: opNames[i], Args: bind.Args(r.args), Notes: r.notes}
		f.Symbol[v] = r.name
		f.Required[v] = r.required && r.name != ""
		funcs[i] = f
	}
	return bind.NewTable(name, funcs...)
}

// dialect is how one library spells the enums the routines pass, as data:
// the transpose and pointer-mode values, and GemmEx's element and compute
// types, algorithm and calling shape.
type dialect struct {
	trans   [3]uintptr // NoTrans, Trans, ConjTrans
	pointer [2]uintptr // Host, Device
	// GemmEx: the type codes of F32, F64, F16, BF16 (indexed by Type), the
	// compute type of float32 accumulation, the default algorithm, and
	// which call shape the library's GemmEx has.
	exType    [5]uintptr
	exCompute uintptr
	exAlgo    uintptr
	exShape   exShape
	// setStreamResetsWorkspace: the library forgets its workspace when its
	// stream changes (cuBLAS), so the handle sets it again.
	setStreamResetsWorkspace bool
}

// exShape is the argument list of a library's GemmEx.
type exShape int

const (
	exNone   exShape = iota
	exCUDA           // cublasGemmEx, hipblasGemmEx(_v2): 19 words
	exCUDAV2         // hipblasGemmEx_v2 (hipBLAS 2.x): 19 words, hipDataType
	exRoc            // rocblas_gemm_ex: 24 words, D matrix and flags
)
