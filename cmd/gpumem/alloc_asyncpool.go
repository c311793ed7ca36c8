package main

import (
	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/config"
	"github.com/gpumem/gpumem/replay"
)

// The stream-ordered pool allocator, for replay.
func init() {
	replay.RegisterAllocator(config.BackendAsyncPool, func(b gpumem.Backend, c config.Conf) (replay.Allocator, error) {
		o, err := asyncpool.OptionsFromConf(c)
		if err != nil {
			return nil, err
		}
		a, err := asyncpool.New(b, o)
		if err != nil {
			return nil, err
		}
		return a, nil
	})
}
