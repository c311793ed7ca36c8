package telemetry_test

import (
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/telemetry"
)

// On the simulator, telemetry is the simulator's accounting: here another
// process holds 6 GiB of a 16 GiB device, and this one allocates 2 GiB.
func Example() {
	g, _ := sim.New(sim.Config{Devices: []sim.DeviceConfig{{Name: "Simulated GPU", Capacity: 16 << 30}}})
	defer g.Close()
	_ = g.SetOtherProcesses(0, []sim.OtherProcess{{PID: 4242, Bytes: 6 << 30}})
	p, _ := g.Malloc(0, 2<<30)
	defer g.Free(0, p)

	t, err := telemetry.Open(g)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer t.Close()
	s, _ := t.Device(0)
	fmt.Printf("%s: %s of %s used\n", s.Name, gpumem.FormatBytes(s.MemoryUsed), gpumem.FormatBytes(s.MemoryTotal))
	self, _, _ := t.Self(0)
	fmt.Println("this process:", gpumem.FormatBytes(self))
	others, procs, _ := t.Others(0)
	fmt.Println("other processes:", gpumem.FormatBytes(others), procs)
	fmt.Println("readings:", s.Supported)
	// Output:
	// Simulated GPU: 8.00 GiB of 16.00 GiB used
	// this process: 2.00 GiB
	// other processes: 6.00 GiB [{4242 6442450944 false}]
	// readings: memory|clock_sm|clock_mem
}
