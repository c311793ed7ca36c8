//go:build linux || darwin || freebsd || netbsd || openbsd

package kernel

import (
	"fmt"
	"golang.org/x/sys/unix"
)

// mapPages maps n bytes (a whole number of pages) of zeroed, private,
// read-write memory outside the Go heap.
func mapPages(n int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("kernel: mapping %d bytes for arguments: %w", n, err)
	}
	return b, nil
}

// unmapPages releases a mapping of mapPages.
func unmapPages(b []byte) error {
	if err := unix.Munmap(b); err != nil {
		return fmt.Errorf("kernel: unmapping arguments: %w", err)
	}
	return nil
}

func pageSize() int { return unix.Getpagesize() }
