//go:build !linux

package dl

import (
	"errors"
	"runtime"
)

// errNoLoader: the vendor backends call CUDA and HIP through internal/ccall,
// whose trampolines exist for Linux's calling conventions only (and neither
// vendor ships its Linux libraries elsewhere). So outside Linux every Open
// fails, with an error matching gpumem.ErrLibraryNotFound, and the simulator
// is the backend there; the packages still build.
var errNoLoader = errors.New("vendor libraries are loaded on Linux only, not on " + runtime.GOOS)

func sysDlopen(string) (uintptr, error)         { return 0, errNoLoader }
func sysDlsym(uintptr, string) (uintptr, error) { return 0, errNoLoader }
func sysDlclose(uintptr) error                  { return errNoLoader }
