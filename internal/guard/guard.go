// Package guard names the optional backend calls that make a stream-ordered
// allocation or free only when the stream is not being captured into a
// graph, asking and acting in one step.
//
// The asyncpool allocator must know, before each allocation and free,
// whether the stream is being captured: a capture changes what the call
// means (a graph memory node instead of memory of its own) and what the
// allocator must do around it. Asked as a separate backend call, the
// question costs a transition into the vendor library of its own; a
// backend that implements Backend asks it in the same transition as the
// call (internal/native does, through ccall.CallGuard6), and the simulator
// implements it for tests.
package guard

import "github.com/gpumem/gpumem"

// Backend is implemented by backends that can make a guarded call.
type Backend interface {
	// GuardedCalls reports whether the calls below work on this backend
	// (the vendor library has the capture-status query).
	GuardedCalls() bool
	// MallocFromPoolAsyncUncaptured is MallocFromPoolAsync made only if s is
	// not being captured. A stream whose capture is active or invalidated
	// gets that status back, with no allocation and no error.
	MallocFromPoolAsyncUncaptured(size uint64, pool gpumem.MemPool, s gpumem.Stream) (gpumem.Ptr, gpumem.CaptureStatus, error)
	// FreeAsyncUncaptured is FreeAsync made only if s is not being
	// captured, as above.
	FreeAsyncUncaptured(p gpumem.Ptr, s gpumem.Stream) (gpumem.CaptureStatus, error)
	// CapturesOpen reports whether a capture begun through the backend
	// (or, for the vendor backends, through any of them in the process)
	// may still be open. While it reports false, no stream is being
	// captured except by a capture begun outside gpumem, and an allocator
	// that trusts it may make the plain calls without asking.
	CapturesOpen() bool
}
