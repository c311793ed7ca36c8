package symtab

import (
	"sort"

	"github.com/gpumem/gpumem"
)

// Status is one status code of a vendor: its number, the header's name for
// it and the gpumem sentinel it means.
type Status struct {
	Code int
	Name string // the header's identifier, e.g. CUDA_ERROR_OUT_OF_MEMORY
	Err  error  // the sentinel the code matches; nil for none
	// Closed marks the codes a library returns once it is shut down (not
	// initialised, deinitialised): they match gpumem.ErrClosed when the
	// backend is closed, and no sentinel before.
	Closed bool
}

// StatusTable is one vendor's status codes, in ascending order of Code:
// read by the backend (the sentinel of a failed call), by the simulator
// (which speaks CUDA's codes) and by the header tests.
type StatusTable struct {
	Vendor   Vendor
	Statuses []Status
}

// Lookup returns the entry for code.
func (t *StatusTable) Lookup(code int) (*Status, bool) {
	i := sort.Search(len(t.Statuses), func(i int) bool { return t.Statuses[i].Code >= code })
	if i < len(t.Statuses) && t.Statuses[i].Code == code {
		return &t.Statuses[i], true
	}
	return nil, false
}

// Sentinel returns the gpumem sentinel code means (nil for none); closed
// says whether the backend has been closed.
func (t *StatusTable) Sentinel(code int, closed bool) error {
	s, ok := t.Lookup(code)
	switch {
	case !ok:
		return nil
	case s.Closed && closed:
		return gpumem.ErrClosed
	}
	return s.Err
}

// Name returns the header's name for code, "" for a code the table lacks.
func (t *StatusTable) Name(code int) string {
	if s, ok := t.Lookup(code); ok {
		return s.Name
	}
	return ""
}

// Code returns the number of the status called name; a name the table lacks
// panics (a mistake in the program that names it).
func (t *StatusTable) Code(name string) int {
	for _, s := range t.Statuses {
		if s.Name == name {
			return s.Code
		}
	}
	panic("symtab: no " + t.Vendor.String() + " status named " + name)
}

// Statuses holds each vendor's status table, indexed by Vendor.
var Statuses = [NumVendors]*StatusTable{CUDA: &cudaStatuses, HIP: &hipStatuses}

// CUDA driver status codes (cuda.h's CUresult) that code outside this table
// names: the backends' shared checks and the simulator's errors.
const (
	CUDASuccess                  = 0
	CUDAInvalidValue             = 1
	CUDAOutOfMemory              = 2
	CUDANotInitialized           = 3
	CUDADeinitialized            = 4
	CUDANoDevice                 = 100
	CUDAInvalidDevice            = 101
	CUDAInvalidContext           = 201
	CUDAPeerAccessUnsupported    = 217
	CUDAInvalidHandle            = 400
	CUDANotFound                 = 500
	CUDANotReady                 = 600
	CUDAIllegalAddress           = 700
	CUDAPeerAccessAlreadyEnabled = 704
	CUDAPeerAccessNotEnabled     = 705
	CUDAAssert                   = 710
	CUDANotPermitted             = 800
	CUDANotSupported             = 801
	CUDAStreamCaptureUnsupported = 900
	CUDAStreamCaptureInvalidated = 901
	CUDAStreamCaptureMerge       = 902
	CUDAStreamCaptureUnmatched   = 903
	CUDAStreamCaptureUnjoined    = 904
	CUDAStreamCaptureIsolation   = 905
	CUDAStreamCaptureImplicit    = 906
	CUDACapturedEvent            = 907
	CUDAStreamCaptureWrongThread = 908
	CUDAUnknown                  = 999
)

// cudaStatuses is CUDA's table (cuda.h). The capture errors (900..908) are
// misuse of the API in the stream's current state: ErrInvalidValue.
var cudaStatuses = StatusTable{Vendor: CUDA, Statuses: []Status{
	{Code: CUDASuccess, Name: "CUDA_SUCCESS"},
	{Code: CUDAInvalidValue, Name: "CUDA_ERROR_INVALID_VALUE", Err: gpumem.ErrInvalidValue},
	{Code: CUDAOutOfMemory, Name: "CUDA_ERROR_OUT_OF_MEMORY", Err: gpumem.ErrOutOfMemory},
	{Code: CUDANotInitialized, Name: "CUDA_ERROR_NOT_INITIALIZED", Closed: true},
	{Code: CUDADeinitialized, Name: "CUDA_ERROR_DEINITIALIZED", Closed: true},
	{Code: CUDANoDevice, Name: "CUDA_ERROR_NO_DEVICE", Err: gpumem.ErrNoDevice},
	{Code: CUDAInvalidDevice, Name: "CUDA_ERROR_INVALID_DEVICE", Err: gpumem.ErrInvalidValue},
	{Code: CUDAInvalidContext, Name: "CUDA_ERROR_INVALID_CONTEXT", Err: gpumem.ErrInvalidValue},
	{Code: CUDAPeerAccessUnsupported, Name: "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", Err: gpumem.ErrNotSupported},
	{Code: CUDAInvalidHandle, Name: "CUDA_ERROR_INVALID_HANDLE", Err: gpumem.ErrInvalidValue},
	{Code: CUDANotFound, Name: "CUDA_ERROR_NOT_FOUND", Err: gpumem.ErrInvalidValue},
	{Code: CUDANotReady, Name: "CUDA_ERROR_NOT_READY"},
	{Code: CUDAIllegalAddress, Name: "CUDA_ERROR_ILLEGAL_ADDRESS"},
	{Code: CUDAPeerAccessAlreadyEnabled, Name: "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"},
	{Code: CUDAPeerAccessNotEnabled, Name: "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", Err: gpumem.ErrInvalidValue},
	{Code: CUDAAssert, Name: "CUDA_ERROR_ASSERT"},
	{Code: CUDANotPermitted, Name: "CUDA_ERROR_NOT_PERMITTED", Err: gpumem.ErrInvalidValue},
	{Code: CUDANotSupported, Name: "CUDA_ERROR_NOT_SUPPORTED", Err: gpumem.ErrNotSupported},
	{Code: CUDAStreamCaptureUnsupported, Name: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", Err: gpumem.ErrInvalidValue},
	{Code: CUDAStreamCaptureInvalidated, Name: "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", Err: gpumem.ErrInvalidValue},
	{Code: CUDAStreamCaptureMerge, Name: "CUDA_ERROR_STREAM_CAPTURE_MERGE", Err: gpumem.ErrInvalidValue},
	{Code: CUDAStreamCaptureUnmatched, Name: "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", Err: gpumem.ErrInvalidValue},
	{Code: CUDAStreamCaptureUnjoined, Name: "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", Err: gpumem.ErrInvalidValue},
	{Code: CUDAStreamCaptureIsolation, Name: "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", Err: gpumem.ErrInvalidValue},
	{Code: CUDAStreamCaptureImplicit, Name: "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", Err: gpumem.ErrInvalidValue},
	{Code: CUDACapturedEvent, Name: "CUDA_ERROR_CAPTURED_EVENT", Err: gpumem.ErrInvalidValue},
	{Code: CUDAStreamCaptureWrongThread, Name: "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", Err: gpumem.ErrInvalidValue},
	{Code: CUDAUnknown, Name: "CUDA_ERROR_UNKNOWN"},
}}

// hipStatuses is HIP's table (hip_runtime_api.h; checked against the header
// in hip's tests). HIP numbers most codes as CUDA does.
var hipStatuses = StatusTable{Vendor: HIP, Statuses: []Status{
	{Code: 0, Name: "hipSuccess"},
	{Code: 1, Name: "hipErrorInvalidValue", Err: gpumem.ErrInvalidValue},
	{Code: 2, Name: "hipErrorOutOfMemory", Err: gpumem.ErrOutOfMemory},
	{Code: 3, Name: "hipErrorNotInitialized", Closed: true},
	{Code: 4, Name: "hipErrorDeinitialized", Closed: true},
	{Code: 17, Name: "hipErrorInvalidDevicePointer", Err: gpumem.ErrInvalidValue},
	{Code: 100, Name: "hipErrorNoDevice", Err: gpumem.ErrNoDevice},
	{Code: 101, Name: "hipErrorInvalidDevice", Err: gpumem.ErrInvalidValue},
	{Code: 201, Name: "hipErrorInvalidContext", Err: gpumem.ErrInvalidValue},
	{Code: 400, Name: "hipErrorInvalidHandle", Err: gpumem.ErrInvalidValue},
	{Code: 500, Name: "hipErrorNotFound", Err: gpumem.ErrInvalidValue},
	{Code: 600, Name: "hipErrorNotReady"},
	{Code: 704, Name: "hipErrorPeerAccessAlreadyEnabled"},
	{Code: 705, Name: "hipErrorPeerAccessNotEnabled", Err: gpumem.ErrInvalidValue},
	{Code: 801, Name: "hipErrorNotSupported", Err: gpumem.ErrNotSupported},
	{Code: 900, Name: "hipErrorStreamCaptureUnsupported", Err: gpumem.ErrInvalidValue},
	{Code: 901, Name: "hipErrorStreamCaptureInvalidated", Err: gpumem.ErrInvalidValue},
	{Code: 902, Name: "hipErrorStreamCaptureMerge", Err: gpumem.ErrInvalidValue},
	{Code: 903, Name: "hipErrorStreamCaptureUnmatched", Err: gpumem.ErrInvalidValue},
	{Code: 904, Name: "hipErrorStreamCaptureUnjoined", Err: gpumem.ErrInvalidValue},
	{Code: 905, Name: "hipErrorStreamCaptureIsolation", Err: gpumem.ErrInvalidValue},
	{Code: 906, Name: "hipErrorStreamCaptureImplicit", Err: gpumem.ErrInvalidValue},
	{Code: 907, Name: "hipErrorCapturedEvent", Err: gpumem.ErrInvalidValue},
	{Code: 908, Name: "hipErrorStreamCaptureWrongThread", Err: gpumem.ErrInvalidValue},
}}
