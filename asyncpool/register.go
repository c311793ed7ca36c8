package asyncpool

import (
	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/config"
)

// The allocator registers itself under config.BackendAsyncPool, so that
// gpumem.NewAllocator(b, "backend:asyncpool,...") builds it from a
// configuration string.
func init() {
	gpumem.RegisterAllocator(gpumem.AllocatorInfo{
		Name: config.BackendAsyncPool,
		New:  newFromConf,
		Doc:  "stream-ordered pool allocator over the driver's memory pools (cuMemAllocFromPoolAsync)",
	})
}

// newFromConf builds an allocator on b from a configuration string in
// GPUMEM_ALLOC_CONF syntax (see OptionsFromConf).
func newFromConf(b gpumem.Backend, conf string) (gpumem.Allocator, error) {
	c, err := config.Parse(conf)
	if err != nil {
		return nil, err
	}
	o, err := OptionsFromConf(c)
	if err != nil {
		return nil, err
	}
	a, err := New(b, o)
	if err != nil {
		return nil, err
	}
	return a, nil
}
