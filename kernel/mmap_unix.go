//go:build linux || darwin || freebsd || netbsd || openbsd

package kernel

import (
	"fmt"
	"syscall"
)

// mapPages maps n bytes (a whole number of pages) of zeroed, private,
// read-write memory outside the Go heap.
func mapPages(n int) ([]byte, error) {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("kernel: mapping %d bytes for arguments: %w", n, err)
	}
	return b, nil
}

// unmapPages releases a mapping of mapPages.
func unmapPages(b []byte) error {
	if err := syscall.Munmap(b); err != nil {
		return fmt.Errorf("kernel: unmapping arguments: %w", err)
	}
	return nil
}

func pageSize() int { return syscall.Getpagesize() }
