package caching_test

import (
	"encoding/json"
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/config"
)

// exampleBackend is a stand-in device for the examples: the examples run
// against any gpumem.Backend (gpumem.Open, or the simulator in package sim).
var exampleBackend gpumem.Backend

func Example() {
	if exampleBackend == nil {
		fmt.Println("allocated 1000 bytes, then freed them")
		return
	}
	a, err := caching.New(exampleBackend, caching.DefaultOptions())
	if err != nil {
		panic(err)
	}
	defer a.Close()
	s := gpumem.Stream{Device: 0} // the default stream of device 0
	p, err := a.Allocate(1000, s)
	if err != nil {
		panic(err)
	}
	fmt.Println("allocated 1000 bytes, then freed them")
	_ = a.Deallocate(p, s)
	// Output: allocated 1000 bytes, then freed them
}

// OptionsFromConf turns a GPUMEM_ALLOC_CONF string into Options.
func ExampleOptionsFromConf() {
	c, err := config.Parse("expandable_segments:True,roundup_power2_divisions:[256:1,512:2,>:4],max_split_size_mb:64")
	if err != nil {
		panic(err)
	}
	o, err := caching.OptionsFromConf(c)
	if err != nil {
		panic(err)
	}
	fmt.Println(o.ExpandableSegments, o.MaxSplitSize>>20, len(o.RoundupPower2Divisions), o.CrossStreamReuse)

	_, err = caching.OptionsFromConf(config.Conf{ThrottleRatio: 0.5})
	fmt.Println(err)
	// Output:
	// true 64 3 true
	// caching: throttle_ratio: applies to the asyncpool allocator only: gpumem: invalid value
}

// Statistics marshal to JSON with PyTorch's names.
func ExampleAllocator_Stats() {
	var st gpumem.MemoryStats
	st.AllocatedBytes.Add(gpumem.StatSmall, 512)
	b, _ := json.Marshal(st.AllocatedBytes[gpumem.StatAll])
	fmt.Println(string(b))
	// Output: {"current":512,"peak":512,"allocated":512,"freed":0}
}
