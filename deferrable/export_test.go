package deferrable

import "os"

// SetReserveSpace replaces the disk tier's space reservation until the
// returned function restores it.
func SetReserveSpace(f func(f *os.File, off, n int64) error) (restore func()) {
	old := reserveSpace
	reserveSpace = f
	return func() { reserveSpace = old }
}

// SetOpenTmpfile replaces the disk tier's O_TMPFILE open until the returned
// function restores it.
func SetOpenTmpfile(f func(dir string) (*os.File, error)) (restore func()) {
	old := openTmpfile
	openTmpfile = f
	return func() { openTmpfile = old }
}

// DiskFileUnnamed reports whether the manager's disk file was opened with no
// name (O_TMPFILE).
func DiskFileUnnamed(m *Manager) bool { return m.disk != nil && m.disk.path == "" }
