package replay_test

import (
	"fmt"
	"strings"

	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/replay"
	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/trace"
)

func ExampleRun() {
	tr, err := trace.Read(strings.NewReader(`a 1 1048576 0
a 2 3145728 0
f 1 0
a 3 1048576 0
f 2 0
f 3 0
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	tr.Name = "tiny"
	gpu := sim.NewDefault() // a simulated 140 GiB device
	defer gpu.Close()
	alloc, err := caching.New(gpu, caching.Options{}) // PyTorch's defaults
	if err != nil {
		fmt.Println(err)
		return
	}
	// Run replays the trace, then closes the allocator.
	res, err := replay.Run(gpu, tr, alloc, replay.Options{Allocator: "caching"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s through %s on %s: %d pairs, floor %d, peak reserved %d, %d device allocations\n",
		res.Trace, res.Allocator, res.Backend, res.Pairs, res.PeakRequested, res.PeakReserved, res.DeviceAllocs)
	// Output:
	// tiny through caching on sim: 3 pairs, floor 4194304, peak reserved 23068672, 2 device allocations
}
