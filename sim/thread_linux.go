package sim

import "golang.org/x/sys/unix"

// threadRule reports whether the simulator can tell OS threads apart, and so
// enforces that a global or thread-local capture ends on the thread that
// began it.
const threadRule = true

// threadID is the calling OS thread's id (gettid(2)).
func threadID() int { return unix.Gettid() }
