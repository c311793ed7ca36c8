package asyncpool

import (
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/adaptor"
	"github.com/gpumem/gpumem/config"
)

// The allocator registers itself under config.BackendAsyncPool, so that
// gpumem.NewAllocator(b, "backend:asyncpool,...") builds it from a
// configuration string. per_process_memory_fraction puts the shared limit
// adaptor over it (see "The memory-fraction cap" in the package doc).
func init() {
	gpumem.RegisterAllocator(gpumem.AllocatorInfo{
		Name: config.BackendAsyncPool,
		New:  newFromConf,
		Doc:  "stream-ordered pool allocator over the driver's memory pools (cuMemAllocFromPoolAsync)",
	})
}

// newFromConf builds the allocator a configuration string asks for: the
// pool allocator, under an adaptor.Limit of per_process_memory_fraction of
// each device when the key is set.
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
	f := c.PerProcessMemoryFraction
	if f == 0 {
		return a, nil
	}
	l, err := adaptor.NewLimitFraction(a, b, f, adaptor.LimitHint(fmt.Sprintf(
		"per_process_memory_fraction:%v caps the bytes this allocator hands out on each device: raise it in GPUMEM_ALLOC_CONF, or free memory.", f)))
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("asyncpool: per_process_memory_fraction: %w", err)
	}
	return l, nil
}
