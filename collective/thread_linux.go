package collective

import "golang.org/x/sys/unix"

// threadID is the calling OS thread's id: the simulator's groups belong to
// a thread, as NCCL's do.
func threadID() int { return unix.Gettid() }
