package main

import (
	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/config"
)

func init() {
	gpumem.RegisterAllocator(gpumem.AllocatorInfo{Name: config.BackendCaching, New: func(b gpumem.Backend, conf string) (gpumem.Allocator, error) {
		c, err := config.Parse(conf)
		if err != nil {
			return nil, err
		}
		o, err := caching.OptionsFromConf(c)
		if err != nil {
			return nil, err
		}
		return caching.New(b, o)
	}})
}
