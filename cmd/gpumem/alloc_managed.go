package main

import (
	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/config"
	"github.com/gpumem/gpumem/managed"
	"github.com/gpumem/gpumem/replay"
)

// The managed (unified-memory) allocator, for replay. Naming it with
// --allocator managed enables unified memory for the run; the
// oversubscription guard stays on.
func init() {
	replay.RegisterAllocator(config.BackendManaged, func(b gpumem.Backend, c config.Conf) (replay.Allocator, error) {
		o, err := managed.OptionsFromConf(c)
		if err != nil {
			return nil, err
		}
		o.Force = true
		a, err := managed.New(b, o)
		if err != nil {
			return nil, err
		}
		return a, nil
	})
}
