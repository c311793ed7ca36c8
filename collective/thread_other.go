//go:build !linux

package collective

// threadID is 0 for every thread: without cgo these systems offer no
// thread id, so a simulator group open on one goroutine takes the calls of
// every goroutine until it ends. Programs whose groups do not overlap in
// time behave as on Linux.
func threadID() int { return 0 }
