package native

import (
	"github.com/gpumem/gpumem/internal/dl"
)

// Library is the seam between the backend and the dynamic loader: the real
// one is internal/dl's, tests use a fake. It is the Object of every bound
// library (package bind, the run-time compilers).
type Library = dl.Object

// Loader opens the first loadable library among candidates.
type Loader func(candidates ...string) (Library, error)

// DL is the Loader of real libraries, through internal/dl.
func DL(candidates ...string) (Library, error) { return dl.Load(candidates...) }
