package caching

import (
	"math/rand"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/fakegpu"
)

// TestRandomInvariants drives the allocator with random allocations, frees,
// stream uses and cache flushes, with backend failures injected, checking
// every invariant after every operation and that nothing leaks at Close.
func TestRandomInvariants(t *testing.T) {
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"pytorch", Options{}},
		{"default", DefaultOptions()},
		{"growable", Options{GrowSegments: true, ReleaseBeforeGrow: true, CrossStreamReuse: true}},
		{"max-split", Options{MaxSplitSize: 30 << 20, CrossStreamReuse: true, RoundupPower2Divisions: []Division{{UpToMB: 0, Divisions: 4}}}},
		{"expandable", expandableOptions()},
		{"expandable-handle-chunks", expandableHandleChunks(4)},
		{"gc-fraction", Options{GarbageCollectionThreshold: 0.6, PerProcessMemoryFraction: 0.9, ReleaseBeforeGrow: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(1))
			f := fakegpu.New(512 << 20)
			for op, n := range map[string]int{"Malloc": 7, "EventRecord": 3, "MemCreate": 5, "MemMap": 9, "MemSetAccess": 11} {
				f.FailCall(op, n)
			}
			c.opts.HistorySize = 64
			a, err := New(f, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			streams := fakeStreams()
			type liveAlloc struct {
				p gpumem.Ptr
				s gpumem.Stream
			}
			var live []liveAlloc
			for i := 0; i < 3000; i++ {
				switch r := rng.Intn(100); {
				case r < 50:
					size := uint64(rng.Intn(1 << 20))
					if rng.Intn(4) == 0 {
						size = uint64(rng.Intn(60 << 20))
					}
					size++
					s := streams[rng.Intn(4)]
					p, err := a.Allocate(size, s)
					if err != nil {
						continue // out of memory or an injected failure
					}
					live = append(live, liveAlloc{p, s})
				case r < 90 && len(live) > 0:
					k := rng.Intn(len(live))
					l := live[k]
					live = append(live[:k], live[k+1:]...)
					if rng.Intn(5) == 0 {
						_ = a.RecordStream(l.p, streams[rng.Intn(4)])
					}
					fs := l.s
					if rng.Intn(6) == 0 {
						fs = streams[rng.Intn(4)]
					}
					_ = a.Deallocate(l.p, fs)
				case r < 92:
					_ = a.EmptyCache()
				}
				checkInvariants(t, a)
			}
			if st := a.Stats(0); c.opts.GrowSegments && !c.opts.ExpandableSegments && st.SegmentGrowths == 0 {
				t.Error("no segment grew")
			}
			if st := a.Stats(0); c.opts.ExpandableSegments && c.opts.CrossStreamReuse && st.CrossStreamReuses == 0 {
				t.Error("no stream borrowed another's memory")
			}
			if len(a.History()) != 64 {
				t.Errorf("history holds %d entries, want the ring's 64", len(a.History()))
			}
			for _, l := range live {
				if err := a.Deallocate(l.p, l.s); err != nil {
					t.Fatal(err)
				}
			}
			checkInvariants(t, a)
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			if f.Allocations() != 0 || f.Handles() != 0 || f.Mappings() != 0 || f.Events() != 0 {
				t.Errorf("leaked: %d allocations, %d handles, %d mappings, %d events", f.Allocations(), f.Handles(), f.Mappings(), f.Events())
			}
		})
	}
}

// TestConcurrent runs many goroutines on one allocator; run under -race.
func TestConcurrent(t *testing.T) {
	f := fakegpu.New(4 << 30)
	a, err := New(f, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	for g := 0; g < 8; g++ {
		go func(g int) {
			rng := rand.New(rand.NewSource(int64(g)))
			s := gpumem.Stream{Handle: uintptr(g%3 + 1)}
			var mine []gpumem.Ptr
			for i := 0; i < 500; i++ {
				if len(mine) > 0 && rng.Intn(2) == 0 {
					k := rng.Intn(len(mine))
					if err := a.Deallocate(mine[k], s); err != nil {
						done <- err
						return
					}
					mine = append(mine[:k], mine[k+1:]...)
					continue
				}
				p, err := a.Allocate(uint64(rng.Intn(8<<20)+1), s)
				if err != nil {
					done <- err
					return
				}
				mine = append(mine, p)
			}
			for _, p := range mine {
				_ = a.Deallocate(p, s)
			}
			done <- nil
		}(g)
	}
	for g := 0; g < 8; g++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	checkInvariants(t, a)
	if n := a.Stats(0).Allocation[0].Current; n != 0 {
		t.Errorf("%d allocations live after every goroutine freed its own", n)
	}
	if err := a.Close(); err != nil || f.Allocations() != 0 {
		t.Errorf("close: %v, %d segments leaked", err, f.Allocations())
	}
}
