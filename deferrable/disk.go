package deferrable

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/extent"
)

// ErrDiskFull is returned (wrapped, with the system's own error, such as
// ENOSPC) when the disk tier cannot reserve the file space of a spill. It
// matches gpumem.ErrOutOfMemory: like a full host tier, a full disk is a tier
// out of room, and the spill fails before any byte is copied, with the buffer
// left where it was.
var ErrDiskFull = fmt.Errorf("deferrable: disk tier: no space left for the spill file: %w", gpumem.ErrOutOfMemory)

// diskStore is the disk tier: one file holding every spilled buffer as an
// extent. Where the file system allows it (Linux, O_TMPFILE), the file is
// made in Options.DiskDir with no name at all, so that a crash leaves nothing
// behind; elsewhere it is created 0600 in a private directory made 0700 by
// os.MkdirTemp and unlinked at once (with its directory) where the OS allows
// it. Either way the open descriptor keeps the data, and Close removes
// whatever is left. The file's space is reserved (fallocate on Linux) as it
// grows, so a full disk fails the spill that grows it, not a write halfway
// through a copy.
type diskStore struct {
	mu       sync.Mutex
	dir      string
	path     string
	f        *os.File
	unlinked bool
	end      uint64      // file length in use
	free     extent.List // first fit, the free extents below end
}

// reserveSpace reserves the file's space for bytes [off, off+n) so that later
// writes there cannot fail for lack of room: fallocate(2) on Linux, nothing
// elsewhere. It returns errors.ErrUnsupported where the file system cannot
// reserve space (the spill then goes on without a reservation). A variable so
// that tests can make the disk full.
var reserveSpace = fallocate

// openTmpfile opens an unnamed file in dir (O_TMPFILE). A variable so that
// tests can take the fallback path.
var openTmpfile = openUnnamed

func newDiskStore(parent string) (*diskStore, error) {
	if f, err := openTmpfile(parent); err == nil {
		return &diskStore{f: f, unlinked: true}, nil
	} else if !errors.Is(err, errors.ErrUnsupported) {
		return nil, fmt.Errorf("deferrable: disk tier: %w", err)
	}
	dir, err := os.MkdirTemp(parent, "gpumem-deferrable-")
	if err != nil {
		return nil, fmt.Errorf("deferrable: disk tier: %w", err)
	}
	path := filepath.Join(dir, "spill")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("deferrable: disk tier: %w", err)
	}
	d := &diskStore{dir: dir, path: path, f: f}
	if os.Remove(path) == nil {
		d.unlinked = true
		if os.Remove(dir) == nil {
			d.dir = ""
		}
	}
	return d, nil
}

// alloc reserves size bytes of the file (first fit, else at the end, the
// file's space then reserved). A disk that cannot hold them is an error
// matching ErrDiskFull (and gpumem.ErrOutOfMemory).
func (d *diskStore) alloc(size uint64) (extent.Extent, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if off, ok := d.free.Take(size); ok {
		return extent.Extent{Off: off, Size: size}, nil
	}
	e := extent.Extent{Off: d.end, Size: size}
	if err := reserveSpace(d.f, int64(e.Off), int64(size)); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		// fallocate may have reserved part of the range: give it back.
		_ = d.f.Truncate(int64(d.end))
		return extent.Extent{}, fmt.Errorf("%w: %s at offset %d: %w", ErrDiskFull, gpumem.FormatBytes(size), e.Off, err)
	}
	d.end += size
	return e, nil
}

// release returns an extent, coalescing neighbours and shortening the file
// when the tail is free.
func (d *diskStore) release(x extent.Extent) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.free.Put(x.Off, x.Size)
	if end := d.free.TrimTail(d.end); end != d.end {
		d.end = end
		_ = d.f.Truncate(int64(d.end)) // only gives space back; failure is harmless
	}
}

func (d *diskStore) writeAt(p []byte, off uint64) error {
	if _, err := d.f.WriteAt(p, int64(off)); err != nil {
		return fmt.Errorf("deferrable: disk tier: write: %w", err)
	}
	return nil
}

func (d *diskStore) readAt(p []byte, off uint64) error {
	if _, err := d.f.ReadAt(p, int64(off)); err != nil {
		return fmt.Errorf("deferrable: disk tier: read: %w", err)
	}
	return nil
}

func (d *diskStore) close() error {
	// A file whose Close failed is closed all the same (os.File releases
	// its descriptor either way): a second close removes what is left.
	err := d.f.Close()
	if errors.Is(err, os.ErrClosed) {
		err = nil
	}
	if !d.unlinked {
		if e := os.Remove(d.path); e != nil && !os.IsNotExist(e) {
			err = errors.Join(err, e)
		} else {
			d.unlinked = true
		}
	}
	if d.dir != "" {
		if e := os.RemoveAll(d.dir); e != nil {
			err = errors.Join(err, e)
		} else {
			d.dir = ""
		}
	}
	if err != nil {
		return fmt.Errorf("deferrable: disk tier: close: %w", err)
	}
	return nil
}
