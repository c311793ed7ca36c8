//go:build !linux && !windows

package sim

// threadRule reports whether the simulator can tell OS threads apart, and so
// enforces that a global or thread-local capture ends on the thread that
// began it. Here (macOS, the BSDs) the system interface without cgo offers
// no thread id, so the rule is not enforced: an end from another thread
// succeeds. Programs that keep to the rule behave the same everywhere; the
// simulator checks it on Linux and Windows.
const threadRule = false

// threadID is 0 for every thread.
func threadID() int { return 0 }
