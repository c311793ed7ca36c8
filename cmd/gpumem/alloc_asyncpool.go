package main

import (
	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/config"
)

func init() {
	gpumem.RegisterAllocator(gpumem.AllocatorInfo{Name: config.BackendAsyncPool, New: func(b gpumem.Backend, conf string) (gpumem.Allocator, error) {
		c, err := config.Parse(conf)
		if err != nil {
			return nil, err
		}
		o, err := asyncpool.OptionsFromConf(c)
		if err != nil {
			return nil, err
		}
		return asyncpool.New(b, o)
	}})
}
