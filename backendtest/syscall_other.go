//go:build !linux

package backendtest

import (
	"os"
	"time"
)

// blockInSyscall makes a system call (stat of the working directory) and
// sleeps about 100 µs: the vendor backends the suite checks are Linux's, and
// elsewhere the churn only has to keep goroutines moving.
func blockInSyscall() {
	_, _ = os.Stat(".")
	time.Sleep(100 * time.Microsecond)
}
