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
		New:  config.Builder(OptionsFromConf, New),
		Doc:  "PyTorch's caching allocator: best-fit blocks split from cached segments, stream-ordered reuse",
	})
}
