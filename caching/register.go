package caching

import (
	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/config"
)

// The caching allocator is what every allocator of the project is, and it
// keeps a history and takes snapshots.
var (
	_ gpumem.Allocator     = (*Allocator)(nil)
	_ gpumem.HistoryKeeper = (*Allocator)(nil)
	_ gpumem.Snapshotter   = (*Allocator)(nil)
)

func init() {
	gpumem.RegisterAllocator(gpumem.AllocatorInfo{
		Name: config.BackendCaching,
		New:  newFromConf,
		Doc:  "PyTorch's caching allocator: best-fit blocks split from cached segments, stream-ordered reuse",
	})
}

// newFromConf builds a caching allocator on b from a GPUMEM_ALLOC_CONF
// string, for the allocator registry.
func newFromConf(b gpumem.Backend, conf string) (gpumem.Allocator, error) {
	c, err := config.Parse(conf)
	if err != nil {
		return nil, err
	}
	o, err := OptionsFromConf(c)
	if err != nil {
		return nil, err
	}
	return New(b, o)
}
