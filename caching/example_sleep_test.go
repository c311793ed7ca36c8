package caching_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/sim"
)

// Sleep gives the device's memory away between phases (training and
// generation in RLHF, a server making room) and Wake takes it back: the
// weights, tagged KeepOnSleep, come back byte for byte at the same address;
// the scratch buffer, discarded, comes back at its address with undefined
// contents.
func ExampleAllocator_Sleep() {
	g := sim.NewDefault()
	defer g.Close()
	opts := caching.DefaultOptions()
	opts.ExpandableSegments = true // Sleep needs expandable segments
	a, _ := caching.New(g, opts)
	defer a.Close()
	s := gpumem.Stream{Device: 0}
	weights, _ := a.AllocateTagged(64<<20, s, caching.KeepOnSleep)
	scratch, _ := a.Allocate(256<<20, s) // DiscardOnSleep
	_ = g.CopyToDevice(weights, []byte("the model"))

	ctx := context.Background()
	if err := a.Sleep(ctx); err != nil {
		panic(err)
	}
	free, total, _ := g.MemInfo(0)
	st := a.Stats(0)
	fmt.Println("device memory in use while asleep:", total-free)
	fmt.Println("asleep:", gpumem.FormatBytes(uint64(st.AsleepBytes)), "saved:", gpumem.FormatBytes(uint64(st.AsleepSavedBytes)))
	_, err := a.Allocate(1<<20, s)
	fmt.Println("allocate while asleep refused:", errors.Is(err, caching.ErrAsleep))

	if err := a.Wake(ctx); err != nil {
		panic(err)
	}
	buf := make([]byte, 9)
	_ = g.CopyFromDevice(buf, weights)
	fmt.Printf("after Wake: %q\n", buf)
	_ = a.Deallocate(weights, s)
	_ = a.Deallocate(scratch, s)
	// Output:
	// device memory in use while asleep: 0
	// asleep: 320.00 MiB saved: 64.00 MiB
	// allocate while asleep refused: true
	// after Wake: "the model"
}
