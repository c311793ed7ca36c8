package deferrable_test

import (
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/deferrable"
	"github.com/gpumem/gpumem/sim"
)

// A buffer spilled to the host comes back on the next Acquire, its content intact.
func Example() {
	g := sim.NewDefault()
	defer g.Close()
	m, err := deferrable.New(g, 0, deferrable.Options{})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	s := gpumem.Stream{Device: 0}

	buf, _ := m.Alloc(1<<20, s)
	p, _ := buf.Acquire(s)
	g.MemsetAsync(p, 42, buf.Size(), s) // work through the address while held
	buf.Release()

	freed, _ := m.Spill(1 << 20)
	fmt.Println("spilled", freed, "bytes; buffer on", buf.Where())

	p, _ = buf.Acquire(s)
	b := make([]byte, 1)
	g.StreamSynchronize(s)
	g.CopyFromDevice(b, p)
	buf.Release()
	fmt.Println("back on", buf.Where(), "holding", b[0])
	// Output:
	// spilled 1048576 bytes; buffer on host
	// back on device holding 42
}

// Other allocators spill deferrable buffers when they run out of memory.
func ExampleManager_OOMHandler() {
	g, _ := sim.New(sim.Config{Devices: []sim.DeviceConfig{{Capacity: 8 << 20}}})
	defer g.Close()
	res := deferrable.NewDeviceResource(g)
	defer res.Close()
	m, _ := deferrable.New(g, 0, deferrable.Options{Resource: res})
	defer m.Close()
	s := gpumem.Stream{Device: 0}
	for i := 0; i < 3; i++ {
		m.Alloc(2<<20, s)
	}
	res.SetOOMHandler(m.OOMHandler())
	p, err := res.Allocate(6<<20, s)
	fmt.Println("allocated:", err == nil, "spilled:", m.Stats().Host.Bytes>>20, "MiB")
	res.Deallocate(p, s)
	// Output:
	// allocated: true spilled: 4 MiB
}

// LockAndLaunchAsync holds buffers on a stream until it passes the work.
func ExampleManager_LockAndLaunchAsync() {
	g := sim.NewDefault()
	defer g.Close()
	m, _ := deferrable.New(g, 0, deferrable.Options{})
	defer m.Close()
	s, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	defer g.StreamDestroy(s)
	x, _ := m.Alloc(4096, s)
	y, _ := m.Alloc(4096, s)
	m.LockAndLaunchAsync(s, func(s gpumem.Stream, ptrs []gpumem.Ptr) error {
		return g.MemcpyAsync(ptrs[1], ptrs[0], 4096, s)
	}, x, y)
	fmt.Println("locked while queued:", x.Locked(), y.Locked())
	m.SyncAndUnlock(s)
	fmt.Println("locked after the stream passed:", x.Locked(), y.Locked())
	// Output:
	// locked while queued: true true
	// locked after the stream passed: false false
}
