package collective

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/bind"
)

// The functions gpumem calls, as nccl.h declares them (NVIDIA/nccl
// src/nccl.h.in, 2.18 to 2.29) and RCCL's copy of that header declares them
// (ROCm/rccl src/nccl.h.in, ROCm 5.4 to 6.x; RCCL keeps NCCL's names,
// signatures and enum values):
//
//	ncclResult_t ncclGetVersion(int *version);
//	ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId);
//	ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);
//	ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
//	                                    ncclConfig_t *config);                        // 2.14+
//	ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist);
//	ncclResult_t ncclCommFinalize(ncclComm_t comm);                                   // 2.14+
//	ncclResult_t ncclCommDestroy(ncclComm_t comm);
//	ncclResult_t ncclCommAbort(ncclComm_t comm);
//	ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError);
//	ncclResult_t ncclCommCount(const ncclComm_t comm, int *count);
//	ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device);
//	ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank);
//	const char  *ncclGetErrorString(ncclResult_t result);
//	const char  *ncclGetLastError(ncclComm_t comm);                                   // 2.13+
//	ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
//	                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
//	ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
//	                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
//	ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
//	                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
//	ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
//	                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
//	ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
//	                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
//	ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
//	                      ncclComm_t comm, cudaStream_t stream);                      // 2.7+
//	ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
//	                      ncclComm_t comm, cudaStream_t stream);                      // 2.7+
//	ncclResult_t ncclGroupStart(void);
//	ncclResult_t ncclGroupEnd(void);
//	ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle); // 2.19+
//	ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle);                       // 2.19+
//
// ncclUniqueId is struct { char internal[128]; }, passed by value to
// ncclCommInitRank (see uniqueid_amd64.go and uniqueid_arm64.go for how
// each ABI passes it). cudaStream_t and hipStream_t are the stream handles
// gpumem.Stream carries; 0 is the legacy default stream on both. Every enum
// is a C int; size_t is one word.
const (
	opGetVersion bind.Op = iota
	opGetUniqueID
	opCommInitRank
	opCommInitRankConfig
	opCommInitAll
	opCommFinalize
	opCommDestroy
	opCommAbort
	opCommGetAsyncError
	opCommCount
	opCommCuDevice
	opCommUserRank
	opGetErrorString
	opGetLastError
	opAllReduce
	opBroadcast
	opReduce
	opAllGather
	opReduceScatter
	opSend
	opRecv
	opGroupStart
	opGroupEnd
	opCommRegister
	opCommDeregister
)

func row(op, sym string, args int, required bool, notes string) bind.Func {
	f := bind.Func{Op: op, Symbol: bind.Symbols(sym, sym), Args: bind.Args(args), Notes: notes}
	if required {
		f.Required = bind.Both
	}
	return f
}

// Table is the collectives' functions: NCCL's column for CUDA, RCCL's for
// HIP, the same symbols in both.
var Table = bind.NewTable("collectives",
	row("GetVersion", "ncclGetVersion", 1, true, "int *version: NCCL_VERSION_CODE (RCCL reports the NCCL version it derives from)"),
	row("GetUniqueId", "ncclGetUniqueId", 1, true, "ncclUniqueId *: 128 bytes"),
	row("CommInitRank", "ncclCommInitRank", initRankArgs, true, "ncclUniqueId by value: "+idABI),
	row("CommInitRankConfig", "ncclCommInitRankConfig", initRankConfigArgs, false, "2.14+; not called (comms are blocking, the default)"),
	row("CommInitAll", "ncclCommInitAll", 3, true, "one process, several devices"),
	row("CommFinalize", "ncclCommFinalize", 1, false, "2.14+ (not in RCCL 5.4)"),
	row("CommDestroy", "ncclCommDestroy", 1, true, ""),
	row("CommAbort", "ncclCommAbort", 1, true, ""),
	row("CommGetAsyncError", "ncclCommGetAsyncError", 2, true, "ncclResult_t *"),
	row("CommCount", "ncclCommCount", 2, true, ""),
	row("CommCuDevice", "ncclCommCuDevice", 2, true, ""),
	row("CommUserRank", "ncclCommUserRank", 2, true, ""),
	row("GetErrorString", "ncclGetErrorString", 1, true, "names a status with no device"),
	row("GetLastError", "ncclGetLastError", 1, false, "2.13+; the message of the last failure"),
	row("AllReduce", "ncclAllReduce", 7, true, ""),
	row("Broadcast", "ncclBroadcast", 7, true, ""),
	row("Reduce", "ncclReduce", 8, true, ""),
	row("AllGather", "ncclAllGather", 6, true, "sendcount elements from each rank"),
	row("ReduceScatter", "ncclReduceScatter", 7, true, "recvcount elements to each rank"),
	row("Send", "ncclSend", 6, true, "2.7+"),
	row("Recv", "ncclRecv", 6, true, "2.7+"),
	row("GroupStart", "ncclGroupStart", 0, true, "thread-local group state"),
	row("GroupEnd", "ncclGroupEnd", 0, true, ""),
	row("CommRegister", "ncclCommRegister", 4, false, "2.19+; user buffer registration"),
	row("CommDeregister", "ncclCommDeregister", 2, false, "2.19+"),
)

// ncclResult_t (nccl.h; RCCL 5.4 stops at ncclRemoteError, 6.x adds
// ncclInProgress, NCCL 2.23+ adds ncclTimeout).
const (
	resSuccess            = 0
	resUnhandledCudaError = 1
	resSystemError        = 2
	resInternalError      = 3
	resInvalidArgument    = 4
	resInvalidUsage       = 5
	resRemoteError        = 6
	resInProgress         = 7 // non-blocking communicators only; gpumem's are blocking
	resTimeout            = 8
)

var resultNames = map[int]string{
	resSuccess: "ncclSuccess", resUnhandledCudaError: "ncclUnhandledCudaError", resSystemError: "ncclSystemError",
	resInternalError: "ncclInternalError", resInvalidArgument: "ncclInvalidArgument", resInvalidUsage: "ncclInvalidUsage",
	resRemoteError: "ncclRemoteError", resInProgress: "ncclInProgress", resTimeout: "ncclTimeout",
}

// sentinel is the gpumem sentinel a status means.
func sentinel(code int) error {
	switch code {
	case resInvalidArgument, resInvalidUsage:
		return gpumem.ErrInvalidValue
	}
	return nil
}

// statusName names a status: the enum's name, and the library's
// description from ncclGetErrorString.
func statusName(l *bind.Lib, code int) string {
	desc := ""
	if r, err := l.Call(opGetErrorString, uintptr(uint32(int32(code)))); err == nil {
		desc = bind.CString(r)
	}
	name := resultNames[code]
	switch {
	case name == "":
		return desc
	case desc == "" || strings.EqualFold(desc, name):
		return name
	}
	return name + ": " + desc
}

// versionOf asks ncclGetVersion, which needs no device.
func versionOf(l *bind.Lib) (string, error) {
	v := new(int32)
	escape(v)
	err := l.Check(opGetVersion, uintptr(unsafe.Pointer(v)))
	code := int(*v)
	if err != nil {
		return "", err
	}
	return versionString(code), nil
}

// versionString decodes NCCL_VERSION_CODE: X*1000+Y*100+Z up to 2.8,
// X*10000+Y*100+Z from 2.9.
func versionString(code int) string {
	if code >= 10000 {
		return fmt.Sprintf("%d.%d.%d", code/10000, code/100%100, code%100)
	}
	return fmt.Sprintf("%d.%d.%d", code/1000, code/100%10, code%100)
}

// NCCL is NVIDIA's collective library; GPUMEM_NCCL_LIBRARY names a file
// to load instead of libnccl.so.2.
var NCCL = &bind.Library{
	Name:    "nccl",
	Files:   [bind.NumVendors][]string{bind.CUDA: {"libnccl.so.2", "libnccl.so"}},
	Env:     "GPUMEM_NCCL_LIBRARY",
	Table:   Table,
	Status:  bind.Status{Success: resSuccess, Name: statusName, Sentinel: sentinel},
	Version: versionOf,
}

// RCCL is AMD's collective library; GPUMEM_RCCL_LIBRARY names a file to
// load instead of librccl.so.1.
var RCCL = &bind.Library{
	Name:    "rccl",
	Files:   [bind.NumVendors][]string{bind.HIP: {"librccl.so.1", "librccl.so"}},
	Env:     "GPUMEM_RCCL_LIBRARY",
	Table:   Table,
	Status:  bind.Status{Success: resSuccess, Name: statusName, Sentinel: sentinel},
	Version: versionOf,
}

func init() {
	bind.Register(bind.Binding{Name: "collectives", Libraries: [bind.NumVendors][]*bind.Library{
		bind.CUDA: {NCCL}, bind.HIP: {RCCL},
	}})
}

var never bool

//lint:ignore U1000 written (never, in fact) so that escape's argument escapes
var sink any

// escape moves x to the heap, so that C may write through its address.
func escape(x any) {
	if never {
		sink = x
	}
}
