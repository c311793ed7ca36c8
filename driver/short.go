package driver

import (
	"sync"

	"github.com/gpumem/gpumem/internal/ccall"
)

// HoldShortCalls makes the backend's short calls (see the package
// documentation) ordinary ones until release is called. Call it before
// handing the driver a Go function by means other than gpumem's own (a
// purego callback given to cuLaunchHostFunc through a binding of your
// own, say) or before making the device wait on host memory a goroutine
// will write, and release once neither can happen any more. Holds nest;
// calling release more than once releases once.
func HoldShortCalls() (release func()) {
	ccall.HoldShort()
	var once sync.Once
	return func() { once.Do(ccall.ReleaseShort) }
}

// ShortCalls reports whether a short call made now would take the short
// path: no hold (HoldShortCalls or a registered callback of gpumem's), the
// platform has short calls (linux/amd64 and linux/arm64) and
// GPUMEM_SHORT_CALLS is not 0.
func ShortCalls() bool { return ccall.ShortEnabled() }
