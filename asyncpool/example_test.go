package asyncpool_test

import (
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/config"
	"github.com/gpumem/gpumem/sim"
)

// Allocate on one stream, use the memory on a second, and free it: the free
// waits for both streams on the allocator's free stream.
func Example() {
	gpu, _ := sim.New(sim.Config{Devices: []sim.DeviceConfig{{Name: "demo", Capacity: 1 << 30}}})
	a, err := asyncpool.New(gpu, asyncpool.DefaultOptions())
	if err != nil {
		fmt.Println(err)
		return
	}
	main, _ := gpu.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	side, _ := gpu.StreamCreate(0, gpumem.StreamNonBlocking, 0)

	p, _ := a.Allocate(4<<20, main)
	_ = a.RecordStream(p, side) // side uses p too
	_ = a.Deallocate(p, main)   // freed once main and side are done

	_ = gpu.Drain()
	st := a.Stats(0)
	fmt.Println("peak requested:", gpumem.FormatBytes(uint64(st.RequestedBytes[gpumem.StatAll].Peak)))
	fmt.Println("free-stream frees:", a.Counters(0).CrossStreamFrees)

	_ = a.Close()
	_ = gpu.StreamDestroy(main)
	_ = gpu.StreamDestroy(side)
	// Output:
	// peak requested: 4.00 MiB
	// free-stream frees: 1
}

// Configure the allocator from GPUMEM_ALLOC_CONF's syntax.
func ExampleOptionsFromConf() {
	conf, _ := config.Parse("backend:asyncpool,release_threshold_mb:256,throttle_ratio:0.7")
	o, err := asyncpool.OptionsFromConf(conf)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(gpumem.FormatBytes(o.ReleaseThreshold), o.ThrottleRatio)
	// Output: 256.00 MiB 0.7
}

// Out-of-memory failures are *gpumem.OutOfMemoryError values, matched by
// gpumem.ErrOutOfMemory; an OOM handler may free memory and ask for a retry.
func ExampleAllocator_SetOOMHandler() {
	gpu, _ := sim.New(sim.Config{Devices: []sim.DeviceConfig{{Name: "demo", Capacity: 1 << 30}}})
	a, _ := asyncpool.New(gpu, asyncpool.DefaultOptions())
	s, _ := gpu.StreamCreate(0, gpumem.StreamNonBlocking, 0)

	cache, _ := a.Allocate(800<<20, s) // memory some cache of ours holds
	a.SetOOMHandler(func(dev int, requested uint64, attempt int) bool {
		if cache == 0 {
			return false
		}
		_ = a.Deallocate(cache, s) // drop the cache and try again
		cache = 0
		return true
	})
	p, err := a.Allocate(600<<20, s)
	fmt.Println("after dropping the cache:", err)
	_, err = a.Allocate(600<<20, s)
	var oom *gpumem.OutOfMemoryError
	fmt.Println("again:", errors.Is(err, gpumem.ErrOutOfMemory), errors.As(err, &oom) && oom.Requested == 600<<20)

	_ = a.Deallocate(p, s)
	_ = a.Close()
	_ = gpu.StreamDestroy(s)
	// Output:
	// after dropping the cache: <nil>
	// again: true true
}

// Memory allocated while a stream is captured belongs to the graph once the
// program frees it; the allocator frees it after the graph is destroyed.
func ExampleAllocator_BeginCapture() {
	gpu, _ := sim.New(sim.Config{Devices: []sim.DeviceConfig{{Name: "demo", Capacity: 1 << 30}}})
	a, _ := asyncpool.New(gpu, asyncpool.DefaultOptions())
	s, _ := gpu.StreamCreate(0, gpumem.StreamNonBlocking, 0)

	_ = a.BeginCapture(s, gpumem.CaptureModeGlobal)
	out, _ := a.Allocate(1<<20, s) // a graph allocation: the graph's output
	graph, _ := a.EndCapture(s)
	exec, _ := gpu.GraphInstantiate(graph)
	_ = gpu.GraphLaunch(exec, s)
	_ = a.Deallocate(out, s) // the graph owns it now
	fmt.Println("owned by the graph:", a.Counters(0).GraphOwned)

	_ = gpu.StreamSynchronize(s)
	_ = gpu.GraphExecDestroy(exec)
	_ = gpu.GraphDestroy(graph)
	_ = a.EmptyCache() // processes the destroyed graph: frees its memory
	fmt.Println("released after the graph went:", a.Counters(0).GraphReleased)

	_ = a.Close()
	_ = gpu.StreamDestroy(s)
	// Output:
	// owned by the graph: 1
	// released after the graph went: 1
}
