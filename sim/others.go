package sim

import (
	"fmt"
	"os"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// OtherProcess is memory another process holds on a simulated device, as
// NVML or ROCm SMI would list it: the simulator models a shared GPU with
// it.
type OtherProcess struct {
	PID   int
	Bytes uint64
}

// SetOtherProcesses models other processes holding memory on device dev,
// replacing what was set before (nil: none). Their bytes are taken from the
// device's capacity as this process's allocations are: MemInfo's free
// memory shrinks by them and allocations fail sooner, as on a shared GPU.
// It fails with an error matching gpumem.ErrOutOfMemory, changing nothing,
// when they do not fit beside what this process holds, and with one
// matching gpumem.ErrInvalidValue for a device out of range, a PID that is
// not positive, is this process's, or is listed twice. It is not a CUDA
// call: it is neither counted nor fault-injectable.
func (g *GPU) SetOtherProcesses(dev int, procs []OtherProcess) error {
	if g == nil {
		return errNil("SetOtherProcesses")
	}
	if g.closed.Load() {
		return fmt.Errorf("gpumem: sim: SetOtherProcesses: the simulated GPU is closed: %w", gpumem.ErrClosed)
	}
	if dev < 0 || dev >= len(g.devs) {
		return fmt.Errorf("gpumem: sim: SetOtherProcesses: device %d does not exist (the machine has %d): %w", dev, len(g.devs), gpumem.ErrInvalidValue)
	}
	var total uint64
	seen := make(map[int]bool, len(procs))
	self := os.Getpid()
	for _, p := range procs {
		if p.PID <= 0 || p.PID == self || seen[p.PID] {
			return fmt.Errorf("gpumem: sim: SetOtherProcesses: PID %d is not positive, is this process's or is listed twice: %w", p.PID, gpumem.ErrInvalidValue)
		}
		seen[p.PID] = true
		if total+p.Bytes < total {
			return fmt.Errorf("gpumem: sim: SetOtherProcesses: the processes' bytes overflow: %w", gpumem.ErrInvalidValue)
		}
		total += p.Bytes
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	d := g.devs[dev]
	old := othersBytes(d.others)
	mine := d.used - old
	if total > d.cfg.Capacity-mine {
		return fmt.Errorf("gpumem: sim: SetOtherProcesses: %s of other processes do not fit beside the %s this process holds on device %d (capacity %s): %w",
			gpumem.FormatBytes(total), gpumem.FormatBytes(mine), dev, gpumem.FormatBytes(d.cfg.Capacity), gpumem.ErrOutOfMemory)
	}
	if mine+total+d.resident > d.cfg.Capacity {
		g.evict(d, mine+total+d.resident-d.cfg.Capacity, nil)
	}
	d.used = mine + total
	d.others = append([]OtherProcess(nil), procs...)
	return nil
}

// ProcessMemory reports device dev's memory by process, from the
// simulator's accounting: self is what this process holds (device
// allocations, pools' reserves, physical allocations, graph allocations and
// managed memory resident on the device: MemInfo's used memory less the
// other processes'), others a copy of what SetOtherProcesses set. It is
// what the telemetry package reports for a simulated device. It is not
// counted as a CUDA call but fails as one on a closed machine.
func (g *GPU) ProcessMemory(dev int) (self uint64, others []OtherProcess, err error) {
	if g == nil {
		return 0, nil, errNil("ProcessMemory")
	}
	if g.closed.Load() {
		return 0, nil, errf(symtab.MemInfo, symtab.CUDADeinitialized, "the simulated GPU is closed")
	}
	d, err := g.device(symtab.MemInfo, dev)
	if err != nil {
		return 0, nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	o := othersBytes(d.others)
	self = d.used - o + d.resident
	if self > d.cfg.Capacity-o {
		self = d.cfg.Capacity - o
	}
	return self, append([]OtherProcess(nil), d.others...), nil
}

func othersBytes(ps []OtherProcess) uint64 {
	var n uint64
	for _, p := range ps {
		n += p.Bytes
	}
	return n
}
