package main

import (
	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/config"
	"github.com/gpumem/gpumem/replay"
)

// The caching allocator (PyTorch's semantics), for replay.
func init() {
	replay.RegisterAllocator(config.BackendCaching, func(b gpumem.Backend, c config.Conf) (replay.Allocator, error) {
		o, err := caching.OptionsFromConf(c)
		if err != nil {
			return nil, err
		}
		a, err := caching.New(b, o)
		if err != nil {
			return nil, err
		}
		return a, nil
	})
}
