package deferrable

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/gpumem/gpumem/internal/extent"
)

// diskStore is the disk tier: one file in a private directory, holding every
// spilled buffer as an extent. The file is created 0600 in a directory made
// 0700 by os.MkdirTemp, then unlinked at once (with its directory) where the
// OS allows it, so that a crash leaves nothing behind; the open descriptor
// keeps the data. Close removes whatever is left.
type diskStore struct {
	mu       sync.Mutex
	dir      string
	path     string
	f        *os.File
	unlinked bool
	end      uint64      // file length in use
	free     extent.List // first fit, the free extents below end
}

func newDiskStore(parent string) (*diskStore, error) {
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

// alloc reserves size bytes of the file (first fit, else at the end).
func (d *diskStore) alloc(size uint64) extent.Extent {
	d.mu.Lock()
	defer d.mu.Unlock()
	if off, ok := d.free.Take(size); ok {
		return extent.Extent{Off: off, Size: size}
	}
	e := extent.Extent{Off: d.end, Size: size}
	d.end += size
	return e
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
	err := d.f.Close()
	if !d.unlinked {
		if e := os.Remove(d.path); e != nil && err == nil && !os.IsNotExist(e) {
			err = e
		}
	}
	if d.dir != "" {
		if e := os.RemoveAll(d.dir); e != nil && err == nil {
			err = e
		}
	}
	if err != nil {
		return fmt.Errorf("deferrable: disk tier: close: %w", err)
	}
	return nil
}
