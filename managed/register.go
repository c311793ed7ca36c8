package managed

import (
	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/config"
)

// The allocator registers itself under config.BackendManaged. It is on, when
// a program runs every allocator without naming one, only while unified
// memory is enabled; a configuration whose backend key names it (as
// gpumem.NewNamedAllocator's does) is the opt-in and builds it regardless
// (Options.Force).
func init() {
	gpumem.RegisterAllocator(gpumem.AllocatorInfo{
		Name:    config.BackendManaged,
		New:     newFromConf,
		Enabled: enabledInfo,
		Doc:     "caching allocator over unified (managed) memory, with host-preferred and device-preferred pools",
	})
}

// enabledInfo reports whether unified memory is on and, when it is off, how
// to turn it on.
func enabledInfo() (bool, string) {
	if Enabled() {
		return true, ""
	}
	return false, "unified memory is not enabled: set " + EnvEnable + "=1 (or call managed.Enable(true)), or name the allocator (backend:managed)"
}

// newFromConf builds an allocator on b from a configuration string in
// GPUMEM_ALLOC_CONF syntax (see OptionsFromConf); a backend key naming
// managed forces it on (Options.Force).
func newFromConf(b gpumem.Backend, conf string) (gpumem.Allocator, error) {
	c, err := config.Parse(conf)
	if err != nil {
		return nil, err
	}
	o, err := OptionsFromConf(c)
	if err != nil {
		return nil, err
	}
	o.Force = c.Backend == config.BackendManaged
	a, err := New(b, o)
	if err != nil {
		return nil, err
	}
	return a, nil
}
