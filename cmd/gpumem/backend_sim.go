package main

import (
	"fmt"

	"github.com/gpumem/gpumem"
	_ "github.com/gpumem/gpumem/all" // every backend, for gpumem.Open
	"github.com/gpumem/gpumem/sim"
)

// The simulator, with the device count and capacity the flags ask for.
func init() {
	maxSimCapacity = sim.MaxCapacity
	openSim = func(devices int, capacity uint64) (gpumem.Backend, error) {
		cfg := sim.Config{Devices: make([]sim.DeviceConfig, devices)}
		for i := range cfg.Devices {
			cfg.Devices[i] = sim.DeviceConfig{Capacity: capacity}
			if capacity != sim.DefaultCapacity {
				cfg.Devices[i].Name = fmt.Sprintf("Simulated GPU (%s)", gpumem.FormatBytes(capacity))
			}
		}
		cfg.NoStacks = true // replays make many allocations; nothing here reports leaks
		g, err := sim.New(cfg)
		if err != nil {
			return nil, err
		}
		return g, nil
	}
}
