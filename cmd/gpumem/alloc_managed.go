package main

import (
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/config"
	"github.com/gpumem/gpumem/managed"
)

func init() {
	gpumem.RegisterAllocator(gpumem.AllocatorInfo{Name: config.BackendManaged,
		New: func(b gpumem.Backend, conf string) (gpumem.Allocator, error) {
			c, err := config.Parse(conf)
			if err != nil {
				return nil, err
			}
			o, err := managed.OptionsFromConf(c)
			if err != nil {
				return nil, err
			}
			o.Force = c.Backend == config.BackendManaged
			return managed.New(b, o)
		},
		Enabled: func() (bool, string) {
			return managed.Enabled(), fmt.Sprintf("unified memory is not enabled (set %s=1, or name it with --allocator managed)", managed.EnvEnable)
		}})
}
