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
		New:  config.Builder(OptionsFromConf, New),
		Doc:  "stream-ordered pool allocator over the driver's memory pools (cuMemAllocFromPoolAsync)",
	})
}
