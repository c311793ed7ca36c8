package caching_test

import (
	"encoding/json"
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/config"
	"github.com/gpumem/gpumem/sim"
)

// The allocator runs on any gpumem.Backend: gpumem.Open for a real GPU, or
// the simulator, as here.
func Example() {
	g := sim.NewDefault()
	defer g.Close()
	a, err := caching.New(g, caching.DefaultOptions())
	if err != nil {
		panic(err)
	}
	defer a.Close()
	s := gpumem.Stream{Device: 0} // the default stream of device 0
	p, err := a.Allocate(1000, s)
	if err != nil {
		panic(err)
	}
	q, _ := a.Allocate(3000, s) // carved from the same 2 MiB small segment
	st := a.Stats(0)
	fmt.Println("allocated:", st.AllocatedBytes[gpumem.StatAll].Current, "reserved:", st.ReservedBytes[gpumem.StatAll].Current)
	_ = a.Deallocate(p, s)
	_ = a.Deallocate(q, s)
	r, _ := a.Allocate(1000, s) // a cache hit: the same memory, no device call
	fmt.Println("reused:", r == p)
	_ = a.Deallocate(r, s)
	// Output:
	// allocated: 4096 reserved: 16777216
	// reused: true
}

// Record that a second stream uses an allocation: its memory is reused only
// after that stream has finished the work queued before the free.
func ExampleAllocator_RecordStream() {
	g := sim.NewDefault()
	defer g.Close()
	a, _ := caching.New(g, caching.Options{})
	defer a.Close()
	main := gpumem.Stream{Device: 0}
	side, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	defer g.StreamDestroy(side)
	p, _ := a.Allocate(1<<20, main)
	_ = a.RecordStream(p, side)
	_ = a.Deallocate(p, main)
	_ = g.StreamSynchronize(side)
	q, _ := a.Allocate(1<<20, main) // the side stream's event has completed
	fmt.Println("reused after the side stream:", q == p)
	_ = a.Deallocate(q, main)
	// Output: reused after the side stream: true
}

// Graph captures allocate from a private pool that lives as long as the graph.
func ExampleAllocator_BeginCapture() {
	g := sim.NewDefault()
	defer g.Close()
	a, _ := caching.New(g, caching.DefaultOptions())
	defer a.Close()
	s, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	defer g.StreamDestroy(s)
	_ = g.StreamBeginCapture(s, gpumem.CaptureModeRelaxed)
	pool, _ := a.BeginCapture(s, 0)
	p, _ := a.Allocate(4096, s)
	_ = a.Deallocate(p, s)
	graph, _ := g.StreamEndCapture(s)
	_ = a.EndCapture(s)
	fmt.Println("segments while the graph lives:", a.Stats(0).Segment[gpumem.StatAll].Current)
	_ = g.GraphDestroy(graph)
	_ = a.ReleasePool(pool)
	fmt.Println("after releasing its pool:", a.Stats(0).Segment[gpumem.StatAll].Current)
	// Output:
	// segments while the graph lives: 1
	// after releasing its pool: 0
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
	// gpumem: allocator configuration: throttle_ratio:0.5: does not apply to the caching allocator (it applies to asyncpool)
}

// Statistics marshal to JSON with PyTorch's names.
func ExampleAllocator_Stats() {
	var st gpumem.MemoryStats
	st.AllocatedBytes.Add(gpumem.StatSmall, 512)
	b, _ := json.Marshal(st.AllocatedBytes[gpumem.StatAll])
	fmt.Println(string(b))
	// Output: {"current":512,"peak":512,"allocated":512,"freed":0}
}
