package asyncpool_test

import (
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/sim"
)

// nullCalls is the simulator with guarded calls that do nothing but hand
// out fresh addresses: what a pair costs over it is the allocator's own
// bookkeeping.
type nullCalls struct {
	*sim.GPU
	next gpumem.Ptr
}

func (n *nullCalls) MallocFromPoolAsyncUncaptured(size uint64, _ gpumem.MemPool, _ gpumem.Stream) (gpumem.Ptr, gpumem.CaptureStatus, error) {
	n.next += 1 << 21
	return n.next, gpumem.CaptureNone, nil
}

func (n *nullCalls) FreeAsyncUncaptured(gpumem.Ptr, gpumem.Stream) (gpumem.CaptureStatus, error) {
	return gpumem.CaptureNone, nil
}

// BenchmarkBookkeeping is the allocator's own cost per alloc+free pair:
// the backend's calls cost nothing. live allocations stay outstanding
// throughout, as in a real workload.
func BenchmarkBookkeeping(b *testing.B) {
	g, err := sim.New(sim.Config{NoStacks: true, Devices: []sim.DeviceConfig{{Name: "H200", Capacity: 140 * gib}}})
	if err != nil {
		b.Fatal(err)
	}
	n := &nullCalls{GPU: g, next: 1 << 40}
	a, err := asyncpool.New(n, asyncpool.DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		b.Fatal(err)
	}
	const live = 512
	held := make([]gpumem.Ptr, live)
	for i := range held {
		if held[i], err = a.Allocate(mib, s); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % live
		if err := a.Deallocate(held[j], s); err != nil {
			b.Fatal(err)
		}
		if held[j], err = a.Allocate(mib, s); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if st := a.Stats(0); st.NumDeviceAlloc != int64(b.N+live) {
		b.Fatalf("%d device allocations, want %d (the guarded path was not taken)", st.NumDeviceAlloc, b.N+live)
	}
}
