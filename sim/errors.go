package sim

import (
	"fmt"

	"github.com/gpumem/gpumem"
)

// CUDA driver status codes the simulator reports (cuda.h's CUresult values).
const (
	codeSuccess                  = 0
	codeInvalidValue             = 1
	codeOutOfMemory              = 2
	codeNotInitialized           = 3
	codeDeinitialized            = 4
	codeNoDevice                 = 100
	codeInvalidDevice            = 101
	codeInvalidContext           = 201
	codeInvalidHandle            = 400
	codeNotFound                 = 500
	codeNotReady                 = 600
	codeIllegalAddress           = 700
	codePeerAccessAlreadyEnabled = 704
	codePeerAccessNotEnabled     = 705
	codePeerAccessUnsupported    = 217
	codeNotPermitted             = 800
	codeNotSupported             = 801
	codeStreamCaptureUnsupported = 900
	codeStreamCaptureInvalidated = 901
	codeStreamCaptureMerge       = 902
	codeStreamCaptureUnmatched   = 903
	codeStreamCaptureUnjoined    = 904
	codeStreamCaptureIsolation   = 905
	codeStreamCaptureImplicit    = 906
	codeCapturedEvent            = 907
	codeStreamCaptureWrongThread = 908
	codeUnknown                  = 999
)

var codeNames = map[int]string{
	codeSuccess:                  "CUDA_SUCCESS",
	codeInvalidValue:             "CUDA_ERROR_INVALID_VALUE",
	codeOutOfMemory:              "CUDA_ERROR_OUT_OF_MEMORY",
	codeNotInitialized:           "CUDA_ERROR_NOT_INITIALIZED",
	codeDeinitialized:            "CUDA_ERROR_DEINITIALIZED",
	codeNoDevice:                 "CUDA_ERROR_NO_DEVICE",
	codeInvalidDevice:            "CUDA_ERROR_INVALID_DEVICE",
	codeInvalidContext:           "CUDA_ERROR_INVALID_CONTEXT",
	codeInvalidHandle:            "CUDA_ERROR_INVALID_HANDLE",
	codeNotFound:                 "CUDA_ERROR_NOT_FOUND",
	codeNotReady:                 "CUDA_ERROR_NOT_READY",
	codeIllegalAddress:           "CUDA_ERROR_ILLEGAL_ADDRESS",
	codePeerAccessAlreadyEnabled: "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
	codePeerAccessNotEnabled:     "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
	codePeerAccessUnsupported:    "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
	codeNotPermitted:             "CUDA_ERROR_NOT_PERMITTED",
	codeNotSupported:             "CUDA_ERROR_NOT_SUPPORTED",
	codeStreamCaptureUnsupported: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
	codeStreamCaptureInvalidated: "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
	codeStreamCaptureMerge:       "CUDA_ERROR_STREAM_CAPTURE_MERGE",
	codeStreamCaptureUnmatched:   "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
	codeStreamCaptureUnjoined:    "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
	codeStreamCaptureIsolation:   "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
	codeStreamCaptureImplicit:    "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
	codeCapturedEvent:            "CUDA_ERROR_CAPTURED_EVENT",
	codeStreamCaptureWrongThread: "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
	codeUnknown:                  "CUDA_ERROR_UNKNOWN",
}

// sentinelOf maps a CUDA status code to the project's sentinel error. The
// capture-state errors (900..908) are misuse of the API in the current state
// and match ErrInvalidValue.
func sentinelOf(code int) error {
	switch code {
	case codeInvalidValue, codeInvalidDevice, codeInvalidContext, codeInvalidHandle,
		codeNotFound, codeIllegalAddress, codePeerAccessAlreadyEnabled,
		codePeerAccessNotEnabled, codeNotPermitted:
		return gpumem.ErrInvalidValue
	case codeOutOfMemory:
		return gpumem.ErrOutOfMemory
	case codeNoDevice:
		return gpumem.ErrNoDevice
	case codeNotSupported, codePeerAccessUnsupported:
		return gpumem.ErrNotSupported
	case codeDeinitialized, codeNotInitialized:
		return gpumem.ErrClosed
	}
	if code >= codeStreamCaptureUnsupported && code <= codeStreamCaptureWrongThread {
		return gpumem.ErrInvalidValue
	}
	return nil
}

// ErrorName returns CUDA's name for a status code, as cuGetErrorName does, or
// "" for a code CUDA does not define here.
func errorName(code int) string { return codeNames[code] }

// vendorErr is the *gpumem.Error a real driver would return for code.
func vendorErr(m method, code int) *gpumem.Error {
	return &gpumem.Error{Backend: "sim", Op: methodInfo[m].symbol, Code: code, Name: codeNames[code], Err: sentinelOf(code)}
}

// errf returns the vendor error for code wrapped with a sentence that says
// what was wrong; errors.As still finds the *gpumem.Error.
func errf(m method, code int, format string, args ...any) error {
	return fmt.Errorf("sim: %s: %s: %w", methodInfo[m].name, fmt.Sprintf(format, args...), vendorErr(m, code))
}
