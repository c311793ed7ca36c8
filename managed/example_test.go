package managed_test

import (
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/managed"
	"github.com/gpumem/gpumem/sim"
)

// A managed buffer moves between the device and the host without a copy:
// the same address, new advice and a prefetch.
func Example() {
	g := sim.NewDefault()
	defer g.Close()
	managed.Enable(true)
	defer managed.Enable(false)
	a, err := managed.New(g, managed.DefaultOptions())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()

	s := gpumem.Stream{Device: 0}
	buf, err := a.Alloc(64<<20, gpumem.DeviceLocation(0), s)
	if err != nil {
		fmt.Println(err)
		return
	}
	moved, err := buf.To(gpumem.HostLocation(), managed.ToOptions{Stream: s})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("same buffer:", moved == buf, "now at", buf.Location())
	fmt.Println("host bytes:", a.Residency()[gpumem.HostLocation()]>>20, "MiB")
	fmt.Println("verified:", a.VerifyResidency() == nil)
	_ = buf.Free()
	// Output:
	// same buffer: true now at host
	// host bytes: 64 MiB
	// verified: true
}

// Manage copies ordinary device memory into a managed buffer; Unmanage
// copies it back out into pinned host memory.
func ExampleAllocator_Manage() {
	g := sim.NewDefault()
	defer g.Close()
	a, _ := managed.New(g, managed.Options{Force: true})
	defer a.Close()
	s := gpumem.Stream{Device: 0}

	src, _ := g.Malloc(0, 4)
	_ = g.CopyToDevice(src, []byte("data"))
	buf, err := a.Manage(src, 4, gpumem.DeviceLocation(0), s)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("managed:", a.IsManaged(buf.Ptr), a.IsManaged(src))
	out, _ := a.Unmanage(buf, gpumem.HostLocation(), s)
	got := make([]byte, 4)
	_ = g.CopyFromDevice(got, out)
	fmt.Println(string(got))
	_ = g.FreeHost(out)
	_ = g.Free(0, src)
	_ = buf.Free()
	// Output:
	// managed: true false
	// data
}

// The oversubscription guard refuses managed memory beyond a share of the
// device unless the caller asks for oversubscription.
func ExampleOptions_guard() {
	g, _ := sim.New(sim.Config{Devices: []sim.DeviceConfig{{Capacity: 1 << 30}}})
	defer g.Close()
	a, _ := managed.New(g, managed.Options{Force: true, MaxDeviceFraction: 0.25})
	defer a.Close()
	_, err := a.Allocate(512<<20, gpumem.Stream{})
	fmt.Println(errors.Is(err, gpumem.ErrOutOfMemory))

	b, _ := managed.New(g, managed.Options{Force: true, AllowOversubscription: true})
	defer b.Close()
	p, err := b.Allocate(512<<20, gpumem.Stream{})
	fmt.Println(err == nil)
	_ = b.Deallocate(p, gpumem.Stream{})
	// Output:
	// true
	// true
}
