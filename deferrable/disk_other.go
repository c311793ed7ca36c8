//go:build !linux

package deferrable

import (
	"errors"
	"os"
)

// openUnnamed: only Linux has O_TMPFILE; the disk tier falls back to a file
// created and unlinked at once.
func openUnnamed(string) (*os.File, error) { return nil, errors.ErrUnsupported }

// fallocate: space is not reserved ahead outside Linux; a full disk then
// fails the write of a spill (the buffer stays where it was).
func fallocate(*os.File, int64, int64) error { return errors.ErrUnsupported }
