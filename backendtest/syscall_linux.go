package backendtest

import "golang.org/x/sys/unix"

// blockInSyscall blocks the calling thread in a system call for about 100 µs
// (nanosleep(2)), so that the scheduler hands its processor to another thread.
func blockInSyscall() {
	ts := unix.Timespec{Nsec: 100_000}
	_ = unix.Nanosleep(&ts, nil)
}
