package deferrable

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openUnnamed opens a new, unnamed file in dir with O_TMPFILE: it has no
// directory entry, so nothing is left behind however the process ends. It
// returns an error matching errors.ErrUnsupported where the kernel or the
// file system does not support O_TMPFILE.
func openUnnamed(dir string) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		switch err {
		case unix.EOPNOTSUPP, unix.EISDIR, unix.EINVAL:
			// EISDIR: a kernel older than O_TMPFILE reads it as O_DIRECTORY.
			return nil, fmt.Errorf("open unnamed file in %s: %w (%w)", dir, errors.ErrUnsupported, err)
		}
		return nil, &os.PathError{Op: "open unnamed file in", Path: dir, Err: err}
	}
	return os.NewFile(uintptr(fd), dir+"/(O_TMPFILE)"), nil
}

// fallocate reserves the blocks of [off, off+n) of f (fallocate(2), mode 0,
// which also extends the file). A file system without fallocate gives an
// error matching errors.ErrUnsupported.
func fallocate(f *os.File, off, n int64) error {
	if n <= 0 {
		return nil
	}
	sc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("fallocate: %w", err)
	}
	var ferr error
	if err := sc.Control(func(fd uintptr) {
		for {
			ferr = unix.Fallocate(int(fd), 0, off, n)
			if ferr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return fmt.Errorf("fallocate: %w", err)
	}
	switch ferr {
	case nil:
		return nil
	case unix.EOPNOTSUPP, unix.ENOSYS:
		return fmt.Errorf("fallocate: %w (%w)", errors.ErrUnsupported, ferr)
	}
	return &os.PathError{Op: "fallocate", Path: f.Name(), Err: ferr}
}
