package main

import (
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/config"
	"github.com/gpumem/gpumem/managed"
	"github.com/gpumem/gpumem/replay"
)

// The unified-memory allocator, for replay. Choosing it by name (--allocator
// managed or backend:managed) is the opt-in that GPUMEM_ENABLE_UNIFIED_MEMORY
// otherwise gives; when replay runs every allocator it is skipped unless that
// variable enables it.
func init() {
	replay.RegisterAllocator(config.BackendManaged, func(b gpumem.Backend, c config.Conf) (replay.Allocator, error) {
		o, err := managed.OptionsFromConf(c)
		if err != nil {
			return nil, err
		}
		o.Force = c.Backend == config.BackendManaged
		if !o.Force && !managed.Enabled() {
			return nil, fmt.Errorf("unified memory is not enabled (set %s=1, or name it with --allocator managed): %w", managed.EnvEnable, gpumem.ErrNotSupported)
		}
		a, err := managed.New(b, o)
		if err != nil {
			return nil, err
		}
		return a, nil
	})
}
