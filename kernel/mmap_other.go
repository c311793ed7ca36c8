//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package kernel

import (
	"fmt"

	"github.com/gpumem/gpumem"
)

// mapPages has no memory outside the Go heap to offer on this system: the
// vendor backends do not exist here either.
func mapPages(n int) ([]byte, error) {
	return nil, fmt.Errorf("kernel: argument memory outside the Go heap on this system: %w", gpumem.ErrNotSupported)
}

func unmapPages([]byte) error { return nil }

func pageSize() int { return 4096 }
