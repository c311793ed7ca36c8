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
		New:     config.Builder(optionsFromConf, New),
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

// optionsFromConf is OptionsFromConf with Force set when the backend key
// names managed: naming the allocator is the opt-in.
func optionsFromConf(c config.Conf) (Options, error) {
	o, err := OptionsFromConf(c)
	o.Force = c.Backend == config.BackendManaged
	return o, err
}
