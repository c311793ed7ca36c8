package asyncpool_test

import (
	"sync"
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
	lock *sync.Mutex // guards next when several goroutines allocate
}

func (n *nullCalls) MallocFromPoolAsyncUncaptured(size uint64, pool gpumem.MemPool, s gpumem.Stream) (gpumem.Ptr, gpumem.CaptureStatus, error) {
	p, err := n.MallocFromPoolAsync(size, pool, s)
	return p, gpumem.CaptureNone, err
}

func (n *nullCalls) FreeAsyncUncaptured(gpumem.Ptr, gpumem.Stream) (gpumem.CaptureStatus, error) {
	return gpumem.CaptureNone, nil
}

// The plain calls, which the allocator makes while no capture is open
// (CaptureCheckTracked), do nothing either.

func (n *nullCalls) MallocFromPoolAsync(uint64, gpumem.MemPool, gpumem.Stream) (gpumem.Ptr, error) {
	if n.lock != nil {
		n.lock.Lock()
		defer n.lock.Unlock()
	}
	n.next += 1 << 21
	return n.next, nil
}

func (n *nullCalls) FreeAsync(gpumem.Ptr, gpumem.Stream) error { return nil }

// CapturesOpen answers, as the vendor backends do, without a lock: no
// capture is ever begun here.
func (n *nullCalls) CapturesOpen() bool { return false }

// nullRig is an allocator over nullCalls on a simulated H200.
func nullRig(b *testing.B) (*sim.GPU, *nullCalls, *asyncpool.Allocator) {
	g, err := sim.New(sim.Config{NoStacks: true, Devices: []sim.DeviceConfig{{Name: "H200", Capacity: 140 * gib}}})
	if err != nil {
		b.Fatal(err)
	}
	n := &nullCalls{GPU: g, next: 1 << 40}
	a, err := asyncpool.New(n, asyncpool.DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	return g, n, a
}

// BenchmarkBookkeeping is the allocator's own cost per alloc+free pair:
// the backend's calls cost nothing. live allocations stay outstanding
// throughout, as in a real workload.
func BenchmarkBookkeeping(b *testing.B) {
	g, _, a := nullRig(b)
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

// BenchmarkBookkeepingParallel is BenchmarkBookkeeping from eight
// goroutines on a stream each, on one device: what the device's lock costs
// under contention (ns/op is per pair, all goroutines together).
func BenchmarkBookkeepingParallel(b *testing.B) {
	g, n, a := nullRig(b)
	var err error
	const workers, live = 8, 64
	streams := make([]gpumem.Stream, workers)
	for i := range streams {
		if streams[i], err = g.StreamCreate(0, gpumem.StreamNonBlocking, 0); err != nil {
			b.Fatal(err)
		}
	}
	var mu sync.Mutex // nullCalls' address counter
	n.lock = &mu
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(s gpumem.Stream) {
			defer wg.Done()
			held := make([]gpumem.Ptr, live)
			for i := range held {
				held[i], _ = a.Allocate(mib, s)
			}
			for i := 0; i < b.N/workers; i++ {
				j := i % live
				if err := a.Deallocate(held[j], s); err != nil {
					b.Error(err)
					return
				}
				var err error
				if held[j], err = a.Allocate(mib, s); err != nil {
					b.Error(err)
					return
				}
			}
			for _, p := range held {
				_ = a.Deallocate(p, s)
			}
		}(streams[w])
	}
	wg.Wait()
	b.StopTimer()
	if err := a.Close(); err != nil {
		b.Fatal(err)
	}
	for _, s := range streams {
		_ = g.StreamDestroy(s)
	}
	_ = g.Close()
}
