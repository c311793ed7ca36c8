package adaptor_test

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/adaptor"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/sim"
)

// newCaching returns a caching allocator over a simulated device of 256 MiB.
func newCaching() (*sim.GPU, *caching.Allocator) {
	g, err := sim.New(sim.Config{Devices: []sim.DeviceConfig{{Capacity: 256 << 20}}})
	if err != nil {
		panic(err)
	}
	a, err := caching.New(g, caching.DefaultOptions())
	if err != nil {
		panic(err)
	}
	return g, a
}

// A Limit of 1 MiB refuses the allocation that would pass it, without
// asking the allocator beneath.
func ExampleLimit() {
	g, up := newCaching()
	defer g.Close()
	l, err := adaptor.NewLimit(up, 1<<20)
	if err != nil {
		panic(err)
	}
	defer l.Close() // closes up too
	s := gpumem.Stream{Device: 0}
	p, _ := l.Allocate(600<<10, s)
	_, err = l.Allocate(600<<10, s)
	var oom *gpumem.OutOfMemoryError
	fmt.Println(errors.Is(err, gpumem.ErrOutOfMemory), errors.As(err, &oom) && oom.Limit == 1<<20)
	fmt.Println("used:", l.Used(0), "upstream allocations:", up.Stats(0).Allocation[gpumem.StatAll].Allocated)
	_ = l.Deallocate(p, s)
	// Output:
	// true true
	// used: 614400 upstream allocations: 1
}

// A Statistics counts what passes through it, as asked: the caching
// allocator beneath rounds each request up to 512 bytes.
func ExampleStatistics() {
	g, up := newCaching()
	defer g.Close()
	st, err := adaptor.NewStatistics(up)
	if err != nil {
		panic(err)
	}
	defer st.Close()
	s := gpumem.Stream{Device: 0}
	p, _ := st.Allocate(1000, s)
	q, _ := st.Allocate(3000, s)
	fmt.Println("through the adaptor:", st.Stats(0).AllocatedBytes[gpumem.StatAll].Current)
	fmt.Println("in the allocator:", up.Stats(0).AllocatedBytes[gpumem.StatAll].Current)
	_ = st.Deallocate(p, s)
	_ = st.Deallocate(q, s)
	fmt.Println("peak:", st.Stats(0).AllocatedBytes[gpumem.StatAll].Peak)
	// Output:
	// through the adaptor: 4000
	// in the allocator: 4096
	// peak: 4000
}

// A Recorder writes the trace that `gpumem replay` replays; a free on
// another stream than the allocation's names that stream.
func ExampleRecorder() {
	g, up := newCaching()
	defer g.Close()
	var buf bytes.Buffer
	r, err := adaptor.NewRecorder(up, &buf)
	if err != nil {
		panic(err)
	}
	side, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	main := gpumem.Stream{Device: 0}
	p, _ := r.Allocate(1000, main)
	q, _ := r.Allocate(5000, side)
	_ = r.Deallocate(p, main)
	_ = r.Deallocate(q, main) // last used on the main stream
	_ = r.Close()
	_ = g.StreamDestroy(side)
	fmt.Print(buf.String())
	// Output:
	// a 0 1000 0
	// a 1 5000 1
	// f 0 0
	// f 1 0
}

// An OnOOM calls its handler when the allocator runs out of memory; here
// the handler drops a cache of the program's own, and the allocation is
// retried.
func ExampleOnOOM() {
	g, up := newCaching()
	defer g.Close()
	s := gpumem.Stream{Device: 0}
	var cache gpumem.Ptr
	var o *adaptor.OnOOM
	o, err := adaptor.NewOnOOM(up, func(dev int, size uint64, attempt int) bool {
		if cache == 0 {
			return false
		}
		fmt.Println("dropping the cache; attempt", attempt)
		_ = o.Deallocate(cache, s)
		cache = 0
		return true
	})
	if err != nil {
		panic(err)
	}
	defer o.Close()
	cache, _ = o.Allocate(200<<20, s)
	p, err := o.Allocate(200<<20, s)
	fmt.Println(err, "retries:", o.Stats(0).NumAllocRetries-up.Stats(0).NumAllocRetries)
	_ = o.Deallocate(p, s)
	// Output:
	// dropping the cache; attempt 0
	// <nil> retries: 1
}
