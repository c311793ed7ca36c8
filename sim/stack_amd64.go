package sim

// fpwalk is implemented in stack_amd64.s.
//
//go:noescape
func fpwalk(buf *uintptr, max, skip int) int

// callerPCs stores the return addresses of the frames above the caller's
// caller (skip more frames skipped) into pcs, walking frame pointers: about
// 15 ns for 8 frames, where runtime.Callers takes about 750 ns.
//
//go:noinline
func callerPCs(skip int, pcs []uintptr) int {
	return fpwalk(&pcs[0], len(pcs), skip+1)
}
