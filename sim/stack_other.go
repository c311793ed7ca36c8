//go:build !amd64

package sim

import "runtime"

// callerPCs stores the return addresses of the frames above the caller's
// caller (skip more frames skipped) into pcs.
//
//go:noinline
func callerPCs(skip int, pcs []uintptr) int {
	return runtime.Callers(skip+3, pcs)
}
