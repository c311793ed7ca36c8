package telemetry

import (
	"sync"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

// Importing this package makes allocators' out-of-memory errors say what
// other processes hold on the device (gpumem.OutOfMemoryError.Others): it
// installs the root's OtherProcessesFunc. The simulator's accounting is
// read directly; a vendor backend's telemetry is opened on its first
// failure and kept for the process's life (one NVML or ROCm SMI per
// backend), a library that would not open is not tried again.
func init() {
	gpumem.SetOtherProcessesFunc(otherProcesses)
}

type openResult struct {
	once sync.Once
	t    *Telemetry
	err  error
}

var opened sync.Map // gpumem.Backend -> *openResult

func otherProcesses(b gpumem.Backend, dev int) (*gpumem.OtherProcessesMemory, error) {
	if g, ok := b.(*sim.GPU); ok {
		// Straight from the accounting: no simulated call is made (none
		// counted, none fault-injected).
		_, others, err := g.ProcessMemory(dev)
		if err != nil {
			return nil, err
		}
		m := &gpumem.OtherProcessesMemory{}
		for _, o := range others {
			m.Bytes += o.Bytes
			m.Processes = append(m.Processes, gpumem.ProcessMemory{PID: o.PID, Bytes: o.Bytes})
		}
		return m, nil
	}
	v, _ := opened.LoadOrStore(b, &openResult{})
	r := v.(*openResult)
	r.once.Do(func() { r.t, r.err = Open(b) })
	if r.err != nil {
		return nil, r.err
	}
	bytes, procs, err := r.t.Others(dev)
	if err != nil {
		return nil, err
	}
	m := &gpumem.OtherProcessesMemory{Bytes: bytes}
	for _, p := range procs {
		if !p.Unknown {
			m.Processes = append(m.Processes, gpumem.ProcessMemory{PID: p.PID, Bytes: p.UsedBytes})
		}
	}
	return m, nil
}
