//go:build !linux || !(amd64 || arm64)

package ccall

import "errors"

const shortSupported = false

func shortcall6(fn, a1, a2, a3, a4, a5, a6, stack uintptr) uintptr {
	return Call6(fn, a1, a2, a3, a4, a5, a6)
}

func shortpre6(pre, preArg, fn, a1, a2, a3, a4, a5, a6, stack uintptr) (r, failed uintptr) {
	r, preFailed := CallPre6(pre, preArg, fn, a1, a2, a3, a4, a5, a6)
	if preFailed {
		return r, 1
	}
	return r, 0
}

func shortout6(fn, a2, a3, a4, a5, a6, stack uintptr) (r, out uintptr) {
	return outCall(fn, a2, a3, a4, a5, a6)
}

func mapStack(int) (uintptr, error) { return 0, errors.New("ccall: no short calls on this platform") }
