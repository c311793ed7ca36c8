package native

import (
	"github.com/gpumem/gpumem/internal/dl"
)

// Library is the seam between the backend and the dynamic loader: the real
// one wraps internal/dl, tests use a fake.
type Library interface {
	// Path is the library file as it was opened.
	Path() string
	// Sym returns the address of an exported symbol; a missing symbol is an
	// error matching gpumem.ErrNotSupported.
	Sym(name string) (uintptr, error)
	// Close releases the library.
	Close() error
}

// Loader opens the first loadable library among candidates.
type Loader func(candidates ...string) (Library, error)

type dlLibrary struct{ l *dl.Library }

func (d dlLibrary) Path() string                     { return d.l.Path }
func (d dlLibrary) Sym(name string) (uintptr, error) { return d.l.Sym(name) }
func (d dlLibrary) Close() error                     { return d.l.Close() }

// DL is the Loader of real libraries, through internal/dl.
func DL(candidates ...string) (Library, error) {
	l, err := dl.Open(candidates...)
	if err != nil {
		return nil, err
	}
	return dlLibrary{l}, nil
}
