// Package clock stamps memory-history entries with one clock read.
//
// time.Now reads two clocks, the wall clock and the monotonic one; on
// virtual machines whose clock source is not readable from user space each
// read is a system call of a few hundred nanoseconds, and allocators stamp
// every allocation and free while their history is on. Now reads only the
// monotonic clock and adds it to a wall time read once, when the package
// starts: the stamps are wall times that never go backwards (a later
// adjustment of the system clock does not move them), as PyTorch's
// approximate clock does with the time-stamp counter.
package clock

import "time"

var base = time.Now()

// Now returns the wall time of the process start plus the monotonic time
// elapsed since, with one clock read. The result carries a monotonic reading,
// so Sub and Before between two stamps use the monotonic clock.
func Now() time.Time { return base.Add(time.Since(base)) }
