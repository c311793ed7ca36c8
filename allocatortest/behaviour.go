package allocatortest

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/oomhooks"
)

// testStatistics checks the arithmetic of Stats: allocations and bytes go
// up and down, peaks stay until ResetPeakStats sets them to the current
// values, and a device never used reports zero.
func testStatistics(t *testing.T, f *fixture) {
	if f.options.NoStatistics {
		t.Skip("the allocator documents that it keeps no statistics")
	}
	sizes := []uint64{1000, 3000, 1<<20 + 5, 5 << 20}
	var ptrs []gpumem.Ptr
	var sum uint64
	for _, n := range sizes {
		ptrs = append(ptrs, f.alloc(t, n, f.s))
		sum += n
	}
	st := f.a.Stats(f.dev)
	all := func(a gpumem.StatArray) gpumem.Stat { return a[gpumem.StatAll] }
	if c := all(st.Allocation).Current; c != int64(len(sizes)) {
		t.Errorf("Allocation.Current = %d after %d allocations", c, len(sizes))
	}
	if c := all(st.AllocatedBytes).Current; c < int64(sum) {
		t.Errorf("AllocatedBytes.Current = %d, less than the %d bytes asked for", c, sum)
	}
	if c := all(st.RequestedBytes).Current; c != int64(sum) {
		t.Errorf("RequestedBytes.Current = %d, want the %d bytes asked for", c, sum)
	}
	peak := all(st.AllocatedBytes).Peak
	if peak < all(st.AllocatedBytes).Current {
		t.Errorf("AllocatedBytes.Peak %d below Current %d", peak, all(st.AllocatedBytes).Current)
	}
	f.free(t, ptrs[3], f.s)
	f.free(t, ptrs[2], f.s)
	st2 := f.a.Stats(f.dev)
	if c := all(st2.Allocation).Current; c != 2 {
		t.Errorf("Allocation.Current = %d after freeing 2 of 4", c)
	}
	if all(st2.AllocatedBytes).Current >= all(st.AllocatedBytes).Current {
		t.Errorf("AllocatedBytes.Current did not go down: %d then %d", all(st.AllocatedBytes).Current, all(st2.AllocatedBytes).Current)
	}
	if c := all(st2.RequestedBytes).Current; c != int64(sizes[0]+sizes[1]) {
		t.Errorf("RequestedBytes.Current = %d, want %d", c, sizes[0]+sizes[1])
	}
	if p := all(st2.AllocatedBytes).Peak; p != peak {
		t.Errorf("AllocatedBytes.Peak changed from %d to %d on frees", peak, p)
	}
	f.a.ResetPeakStats(f.dev)
	st3 := f.a.Stats(f.dev)
	if a := all(st3.AllocatedBytes); a.Peak != a.Current {
		t.Errorf("after ResetPeakStats, AllocatedBytes.Peak = %d, Current = %d", a.Peak, a.Current)
	}
	if a := all(st3.Allocation); a.Peak != a.Current {
		t.Errorf("after ResetPeakStats, Allocation.Peak = %d, Current = %d", a.Peak, a.Current)
	}
	f.free(t, ptrs[0], f.s)
	f.free(t, ptrs[1], f.s)
	st4 := f.a.Stats(f.dev)
	for name, a := range map[string]gpumem.StatArray{"Allocation": st4.Allocation, "AllocatedBytes": st4.AllocatedBytes, "RequestedBytes": st4.RequestedBytes} {
		if c := all(a).Current; c != 0 {
			t.Errorf("%s.Current = %d after every allocation was freed", name, c)
		}
	}
	if c := all(st4.Allocation).Allocated; c < int64(len(sizes)) {
		t.Errorf("Allocation.Allocated = %d, want at least %d", c, len(sizes))
	}
	unused := f.dev + 1
	if st := f.a.Stats(unused); st != (gpumem.MemoryStats{}) {
		t.Errorf("Stats(%d) of a device never used = %+v, want zero", unused, st)
	}
	f.a.ResetPeakStats(unused) // does nothing
}

// testEmptyCache frees everything, waits for the streams, and empties the
// cache: nothing is then reserved.
func testEmptyCache(t *testing.T, f *fixture) {
	must(t, f.a.EmptyCache(), "EmptyCache of an unused allocator")
	p := f.alloc(t, 3<<20, f.s)
	q := f.alloc(t, 1000, f.s2)
	f.free(t, p, f.s)
	f.free(t, q, f.s2)
	must(t, f.b.StreamSynchronize(f.s), "StreamSynchronize")
	must(t, f.b.StreamSynchronize(f.s2), "StreamSynchronize")
	must(t, f.a.EmptyCache(), "EmptyCache")
	if !f.options.NoStatistics {
		if r := f.a.Stats(f.dev).ReservedBytes[gpumem.StatAll].Current; r != 0 {
			t.Errorf("ReservedBytes.Current = %d after EmptyCache with nothing allocated", r)
		}
	}
	f.roundTrip(t, "EmptyCache")
}

// big is a size of which two do not fit on the device.
func (f *fixture) big() uint64 { return f.total / 5 * 3 }

// testOOMHandler fills the device, and lets the handler free the memory:
// the allocation then succeeds.
func testOOMHandler(t *testing.T, f *fixture) {
	n := f.big()
	p := f.alloc(t, n, f.s)
	var mu sync.Mutex
	calls := 0
	freed := false
	f.a.SetOOMHandler(func(dev int, size uint64, attempt int) bool {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if dev != f.dev || size != n {
			t.Errorf("handler called with device %d, size %d; want %d, %d", dev, size, f.dev, n)
		}
		if !freed {
			freed = true
			if err := f.a.Deallocate(p, f.s); err != nil {
				t.Errorf("Deallocate in the handler: %v", err)
			}
			return true
		}
		return false
	})
	q, err := f.a.Allocate(n, f.s)
	if err != nil {
		t.Fatalf("Allocate after the handler freed memory: %v (handler called %d times)", err, calls)
	}
	if calls == 0 {
		t.Error("the allocation succeeded without the handler freeing memory")
	}
	f.a.SetOOMHandler(nil)
	f.free(t, q, f.s)
}

// testOOMRetryBound installs a handler that always asks for a retry: the
// allocation fails after at most oomhooks.MaxAttempts calls, told attempts
// 0, 1, 2... in order.
func testOOMRetryBound(t *testing.T, f *fixture) {
	n := f.big()
	p := f.alloc(t, n, f.s)
	var mu sync.Mutex
	calls := 0
	f.a.SetOOMHandler(func(dev int, size uint64, attempt int) bool {
		mu.Lock()
		defer mu.Unlock()
		if attempt != calls {
			t.Errorf("handler call %d was told attempt %d; attempts count from 0, one per call", calls, attempt)
		}
		calls++
		return calls <= 4*oomhooks.MaxAttempts // past that, the bound is broken; stop
	})
	_, err := f.a.Allocate(n, f.s)
	wantIs(t, err, gpumem.ErrOutOfMemory, "Allocate with a handler that frees nothing")
	if calls == 0 {
		t.Error("the handler was not called")
	}
	f.check(t, UnboundedOOMRetry, calls <= oomhooks.MaxAttempts,
		"the handler was called %d times for one allocation; want at most %d", calls, oomhooks.MaxAttempts)
	f.a.SetOOMHandler(nil)
	f.free(t, p, f.s)
}

// testOOMObservers checks that observers hear of each failure once, with
// the device and size, and that the failure is counted.
func testOOMObservers(t *testing.T, f *fixture) {
	n := f.big()
	p := f.alloc(t, n, f.s)
	var mu sync.Mutex
	var told []*gpumem.OutOfMemoryError
	f.a.AddOOMObserver(func(e *gpumem.OutOfMemoryError) {
		mu.Lock()
		told = append(told, e)
		mu.Unlock()
	})
	_, err := f.a.Allocate(n, f.s)
	wantIs(t, err, gpumem.ErrOutOfMemory, "Allocate past the device's memory")
	var oom *gpumem.OutOfMemoryError
	if !errors.As(err, &oom) {
		t.Fatalf("the failure %v is no *OutOfMemoryError", err)
	}
	if oom.Requested != n || oom.Device != f.dev {
		t.Errorf("the error says %d bytes on device %d; want %d on %d", oom.Requested, oom.Device, n, f.dev)
	}
	mu.Lock()
	if len(told) != 1 {
		t.Errorf("observers told %d times of one failure", len(told))
	} else if told[0].Requested != n {
		t.Errorf("observer told of %d bytes, want %d", told[0].Requested, n)
	}
	mu.Unlock()
	if !f.options.NoStatistics {
		if k := f.a.Stats(f.dev).NumOOMs; k < 1 {
			t.Errorf("NumOOMs = %d after a failure", k)
		}
	}
	f.free(t, p, f.s)
}

// span is a live allocation, for the overlap check.
type span struct{ p, end gpumem.Ptr }

// testConcurrent allocates and frees from many goroutines, each on its own
// stream and the shared ones, while others read statistics and empty the
// cache; no two live allocations may overlap.
func testConcurrent(t *testing.T, f *fixture) {
	const workers, rounds = 8, 150
	var mu sync.Mutex
	live := map[gpumem.Ptr]span{}
	claim := func(p gpumem.Ptr, n uint64) {
		mu.Lock()
		defer mu.Unlock()
		s := span{p, p + gpumem.Ptr(n)}
		for _, o := range live {
			if s.p < o.end && o.p < s.end {
				t.Errorf("allocation [%#x, %#x) overlaps live [%#x, %#x)", uintptr(s.p), uintptr(s.end), uintptr(o.p), uintptr(o.end))
			}
		}
		live[p] = s
	}
	release := func(p gpumem.Ptr) {
		mu.Lock()
		delete(live, p)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			_ = f.a.Stats(f.dev)
			if err := f.a.EmptyCache(); err != nil {
				t.Errorf("EmptyCache: %v", err)
				return
			}
		}
	}()
	var workersWG sync.WaitGroup
	for w := 0; w < workers; w++ {
		workersWG.Add(1)
		go func(seed uint64) {
			defer workersWG.Done()
			own, err := f.b.StreamCreate(f.dev, gpumem.StreamNonBlocking, 0)
			if err != nil {
				t.Errorf("StreamCreate: %v", err)
				return
			}
			defer func() {
				_ = f.b.StreamSynchronize(own)
				_ = f.b.StreamDestroy(own)
			}()
			rng := rand.New(rand.NewPCG(seed, 1))
			streams := []gpumem.Stream{own, own, f.s, f.s2}
			type held struct {
				p gpumem.Ptr
				s gpumem.Stream
			}
			var mine []held
			for i := 0; i < rounds; i++ {
				if len(mine) < 6 && (len(mine) == 0 || rng.IntN(2) == 0) {
					n := 1 + rng.Uint64N(1<<18)
					s := streams[rng.IntN(len(streams))]
					p, err := f.a.Allocate(n, s)
					if err != nil {
						t.Errorf("Allocate(%d): %v", n, err)
						return
					}
					claim(p, n)
					mine = append(mine, held{p, s})
					if rng.IntN(4) == 0 {
						if err := f.a.RecordStream(p, streams[rng.IntN(len(streams))]); err != nil {
							t.Errorf("RecordStream: %v", err)
						}
					}
					continue
				}
				k := rng.IntN(len(mine))
				h := mine[k]
				mine = append(mine[:k], mine[k+1:]...)
				release(h.p)
				if err := f.a.Deallocate(h.p, streams[rng.IntN(len(streams))]); err != nil {
					t.Errorf("Deallocate: %v", err)
				}
			}
			for _, h := range mine {
				release(h.p)
				if err := f.a.Deallocate(h.p, h.s); err != nil {
					t.Errorf("Deallocate: %v", err)
				}
			}
		}(uint64(w))
	}
	workersWG.Wait()
	close(done)
	wg.Wait()
	if !f.options.NoStatistics {
		if c := f.a.Stats(f.dev).Allocation[gpumem.StatAll].Current; c != 0 {
			t.Errorf("Allocation.Current = %d after every goroutine freed its allocations", c)
		}
	}
}

// testCloseReleases closes the allocator with allocations still live: the
// leak check at the end of the subtest finds the device empty.
func testCloseReleases(t *testing.T, f *fixture) {
	f.alloc(t, 1000, f.s)
	f.alloc(t, 3<<20, f.s2)
	p := f.alloc(t, 1<<20, f.s)
	must(t, f.a.RecordStream(p, f.s2), "RecordStream")
	must(t, f.a.Close(), "Close with live allocations")
}
