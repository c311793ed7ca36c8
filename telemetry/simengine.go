package telemetry

import (
	"fmt"
	"os"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

// simEngine reads the simulator's accounting.
type simEngine struct{ g *sim.GPU }

func (e *simEngine) name() string    { return "sim" }
func (e *simEngine) library() string { return "" }
func (e *simEngine) close() error    { return nil }

func (e *simEngine) device(dev int) (DeviceStats, error) {
	var s DeviceStats
	free, total, err := e.g.MemInfo(dev)
	if err != nil {
		return s, fmt.Errorf("gpumem: telemetry: sim: %w", err)
	}
	s.MemoryUsed, s.MemoryTotal = total-free, total
	s.Supported = FieldMemory
	if name, err := e.g.DeviceName(dev); err == nil {
		s.Name = name
	}
	s.PCIBusID = pciBusID(e.g, dev)
	if khz, err := e.g.DeviceAttribute(dev, gpumem.AttrClockRateKHz); err == nil {
		s.ClockSMMHz = khz / 1000
		s.Supported |= FieldClockSM
	}
	if khz, err := e.g.DeviceAttribute(dev, gpumem.AttrMemoryClockRateKHz); err == nil {
		s.ClockMemMHz = khz / 1000
		s.Supported |= FieldClockMem
	}
	return s, nil
}

func (e *simEngine) processes(dev int) ([]Process, error) {
	self, others, err := e.g.ProcessMemory(dev)
	if err != nil {
		return nil, fmt.Errorf("gpumem: telemetry: sim: %w", err)
	}
	var ps []Process
	if self > 0 {
		// As a driver lists a process only once it holds memory there.
		ps = append(ps, Process{PID: os.Getpid(), UsedBytes: self})
	}
	for _, o := range others {
		ps = append(ps, Process{PID: o.PID, UsedBytes: o.Bytes})
	}
	return ps, nil
}
