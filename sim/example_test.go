package sim_test

import (
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

func Example() {
	g := sim.NewDefault()
	defer g.Close()
	s, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	p, _ := g.MallocAsync(1<<20, s)
	_ = g.MemsetAsync(p, 0x2a, 1<<20, s)
	_ = g.StreamSynchronize(s)
	out := make([]byte, 3)
	_ = g.CopyFromDevice(out, p)
	fmt.Println(out)
	_ = g.FreeAsync(p, s)
	_ = g.StreamDestroy(s)
	fmt.Println("leaks:", len(g.Leaks()))
	// Output:
	// [42 42 42]
	// leaks: 0
}

// In Manual mode nothing runs until the test steps the streams, so a test
// can force the interleaving that exposes a bug: here a free on one stream
// that overtakes a use on another.
func Example_manual() {
	g, _ := sim.New(sim.Config{Manual: true})
	a, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	b, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	p, _ := g.MallocAsync(4096, a)
	_ = g.MemsetAsync(p, 1, 4096, a)
	_ = g.FreeAsync(p, b) // not ordered after the memset: a bug
	g.Step(b)             // the free runs first
	_ = g.Drain()
	for _, v := range g.Violations() {
		fmt.Println(v.Op, v.Stream == a)
	}
	// Output:
	// MemsetAsync true
}

func ExampleGPU_InjectFault() {
	g := sim.NewDefault()
	g.InjectFault("Malloc", 2, nil)
	_, err1 := g.Malloc(0, 512)
	_, err2 := g.Malloc(0, 512)
	fmt.Println(err1 == nil, errors.Is(err2, gpumem.ErrOutOfMemory))
	fmt.Println(err2)
	// Output:
	// true true
	// gpumem: sim: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2)
}

func ExampleGPU_Tag() {
	g, _ := sim.New(sim.Config{Manual: true})
	s, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	segment, _ := g.Malloc(0, 2<<20)
	block := segment.Add(4096)
	_ = g.Tag(block, 4096, 1) // a caching allocator hands the block out
	_ = g.Launch(s, block, 4096, func(mem []byte) { mem[0] = 1 })
	_ = g.Untag(block) // and takes it back before the kernel ran
	_ = g.Drain()
	fmt.Println(len(g.Violations()))
	// Output:
	// 1
}

func ExampleGPU_Residency() {
	g := sim.NewDefault()
	s, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	p, _ := g.MallocManaged(0, 4<<20)
	_ = g.Prefetch(p, 4<<20, gpumem.DeviceLocation(0), s)
	_ = g.StreamSynchronize(s)
	fmt.Println(g.Residency(p, 4<<20)[gpumem.DeviceLocation(0)] >> 20)
	// Output:
	// 4
}
