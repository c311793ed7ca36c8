package caching

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/fakegpu"
	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/simtest"
)

// growOptions turns growable segments on with PyTorch's segment sizes, so
// that the cases below are easy to follow.
func growOptions() Options { return Options{GrowSegments: true, ReleaseBeforeGrow: true} }

// TestGrowableRules pins when a wholly free segment grows in place: state
// before (what is allocated and freed), one request, state after.
func TestGrowableRules(t *testing.T) {
	s1, s2 := gpumem.Stream{Handle: 1}, gpumem.Stream{Handle: 2}
	for _, c := range []struct {
		name string
		opts Options
		// before: a 100 MiB segment on s1, freed (wholly free) unless keep.
		keep   bool
		stream gpumem.Stream // where the 150 MiB request comes
		size   uint64
		// after
		grown    bool  // the request got the old segment's address
		segments int64 // segments held
		reserved int64
		frees    int64
	}{
		{"grows in place", growOptions(), false, s1, 150 << 20, true, 1, 150 << 20, 0},
		{"off: freed and replaced", Options{ReleaseBeforeGrow: true}, false, s1, 150 << 20, false, 1, 150 << 20, 1},
		{"off, PyTorch: a second segment", Options{}, false, s1, 150 << 20, false, 2, 250 << 20, 0},
		{"grows without release before growth", Options{GrowSegments: true}, false, s1, 150 << 20, true, 1, 150 << 20, 0},
		{"other stream: a new segment", growOptions(), false, s2, 150 << 20, false, 1, 150 << 20, 1},
		{"segment in use: a new segment", growOptions(), true, s1, 150 << 20, false, 2, 250 << 20, 0},
		{"smaller request: a cache hit", growOptions(), false, s1, 60 << 20, true, 1, 100 << 20, 0},
		{"max_split_size: oversize not grown", Options{GrowSegments: true, ReleaseBeforeGrow: true, MaxSplitSize: 120 << 20}, false, s1, 150 << 20, false, 1, 150 << 20, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := fakegpu.New(1 << 30)
			a, err := New(f, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			first, err := a.Allocate(100<<20, s1)
			if err != nil {
				t.Fatal(err)
			}
			if !c.keep {
				if err := a.Deallocate(first, s1); err != nil {
					t.Fatal(err)
				}
			}
			p, err := a.Allocate(c.size, c.stream)
			if err != nil {
				t.Fatal(err)
			}
			st := a.Stats(0)
			if got := p == first; got != c.grown {
				t.Errorf("request at the old segment's address: %v, want %v", got, c.grown)
			}
			if st.Segment[gpumem.StatAll].Current != c.segments || st.ReservedBytes[gpumem.StatAll].Current != c.reserved || st.NumDeviceFree != c.frees {
				t.Errorf("segments %d, reserved %d MiB, device frees %d; want %d, %d MiB, %d",
					st.Segment[gpumem.StatAll].Current, st.ReservedBytes[gpumem.StatAll].Current>>20, st.NumDeviceFree,
					c.segments, c.reserved>>20, c.frees)
			}
			wantGrowths := int64(0)
			if c.grown && c.size > 100<<20 {
				wantGrowths = 1
			}
			if st.SegmentGrowths != wantGrowths {
				t.Errorf("segment growths %d, want %d", st.SegmentGrowths, wantGrowths)
			}
			if wantGrowths == 1 && st.NumSyncAllStreams != 0 {
				t.Errorf("growing synchronized the device %d times", st.NumSyncAllStreams)
			}
			checkInvariants(t, a)
			if err := a.Deallocate(p, c.stream); err != nil {
				t.Fatal(err)
			}
			if c.keep {
				if err := a.Deallocate(first, s1); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
			if st := a.Stats(0); st.ReservedBytes[gpumem.StatAll].Current != 0 {
				t.Errorf("after EmptyCache reserved %d", st.ReservedBytes[gpumem.StatAll].Current)
			}
			if f.Mappings() != 0 || f.Handles() != 0 || f.Allocations() != 0 {
				t.Errorf("after EmptyCache: %d mappings, %d handles, %d allocations left", f.Mappings(), f.Handles(), f.Allocations())
			}
		})
	}
}

// TestGrowableFailures injects a failure into each call of a growth and of
// a growable segment's creation: the allocation still succeeds (a new
// segment, or a regular one) or fails cleanly, and nothing is leaked.
func TestGrowableFailures(t *testing.T) {
	s := gpumem.Stream{Handle: 1}
	for _, op := range []string{"MemCreate", "MemMap", "MemSetAccess", "MemAddressReserve"} {
		for _, call := range []int{1, 2} {
			t.Run(op, func(t *testing.T) {
				f := fakegpu.New(1 << 30)
				f.FailCall(op, call)
				a, err := New(f, growOptions())
				if err != nil {
					t.Fatal(err)
				}
				first, err := a.Allocate(100<<20, s)
				if err == nil {
					_ = a.Deallocate(first, s)
				}
				p, err := a.Allocate(150<<20, s)
				if err != nil {
					t.Fatalf("call %d of %s failing: %v", call, op, err)
				}
				checkInvariants(t, a)
				if err := a.Deallocate(p, s); err != nil {
					t.Fatal(err)
				}
				if err := a.Close(); err != nil {
					t.Fatal(err)
				}
				if f.Mappings() != 0 || f.Handles() != 0 || f.Allocations() != 0 || f.Used(0) != 0 {
					t.Errorf("call %d of %s failing: %d mappings, %d handles, %d allocations, %d bytes left",
						call, op, f.Mappings(), f.Handles(), f.Allocations(), f.Used(0))
				}
			})
		}
	}
}

// TestGrowableFallback: without a virtual memory API the allocator says so
// once and uses regular segments.
func TestGrowableFallback(t *testing.T) {
	f := fakegpu.New(1<<30, fakegpu.WithoutVMM())
	var logged int
	o := growOptions()
	o.Logf = func(string, ...any) { logged++ }
	a, err := New(f, o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s := gpumem.Stream{Handle: 1}
	p, err := a.Allocate(100<<20, s)
	if err != nil {
		t.Fatal(err)
	}
	if logged != 1 || f.Allocations() != 1 || f.Mappings() != 0 {
		t.Errorf("%d messages, %d regular allocations, %d mappings; want 1, 1, 0", logged, f.Allocations(), f.Mappings())
	}
	_ = a.Deallocate(p, s)
}

// TestGrowableSim grows a segment on the simulator and checks that the
// whole grown range is usable on the device (the simulator faults on an
// access to unmapped or inaccessible memory) and that nothing is leaked.
func TestGrowableSim(t *testing.T) {
	g, ss := newSim(t, 1<<30, false)
	a, err := New(g, growOptions())
	if err != nil {
		t.Fatal(err)
	}
	s := ss[0]
	p, err := a.Allocate(64<<20, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Deallocate(p, s); err != nil {
		t.Fatal(err)
	}
	q, err := a.Allocate(200<<20, s)
	if err != nil {
		t.Fatal(err)
	}
	if q != p || a.Stats(0).SegmentGrowths != 1 {
		t.Fatalf("not grown in place: %#x vs %#x, %d growths", uintptr(q), uintptr(p), a.Stats(0).SegmentGrowths)
	}
	if err := g.MemsetAsync(q, 7, 200<<20, s); err != nil {
		t.Fatal(err)
	}
	if err := g.Launch(s, q, 200<<20, func(mem []byte) {
		if mem[0] != 7 || mem[len(mem)-1] != 7 {
			t.Errorf("grown memory reads %d..%d, want 7", mem[0], mem[len(mem)-1])
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := g.StreamSynchronize(s); err != nil {
		t.Fatal(err)
	}
	if v := g.Violations(); len(v) != 0 {
		t.Fatalf("violations: %v", v)
	}
	checkInvariants(t, a)
	if err := a.Deallocate(q, s); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	closeSim(t, g, ss)

	// Without a virtual memory API: regular segments, nothing leaked.
	gNo := simtest.New(t, sim.Config{Devices: []sim.DeviceConfig{{Capacity: 1 << 30, NoVMM: true}}})
	b, err := New(gNo, growOptions())
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.Allocate(100<<20, gpumem.Stream{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Deallocate(r, gpumem.Stream{}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if l := gNo.Leaks(); len(l) != 0 {
		t.Error(l)
	}
}

// TestGrowableOutOfMemory: a growth the device cannot back falls back to
// the out-of-memory path, which frees the cached segment and retries; the
// error, when nothing helps, matches ErrOutOfMemory.
func TestGrowableOutOfMemory(t *testing.T) {
	f := fakegpu.New(300 << 20)
	a, err := New(f, growOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s := gpumem.Stream{Handle: 1}
	keep, err := a.Allocate(100<<20, s)
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Allocate(100<<20, s)
	if err != nil {
		t.Fatal(err)
	}
	_ = a.Deallocate(p, s)
	// 180 MiB: growing the free 100 MiB segment needs 80 MiB more (fits);
	q, err := a.Allocate(180<<20, s)
	if err != nil {
		t.Fatal(err)
	}
	if q != p {
		t.Errorf("not grown in place")
	}
	_ = a.Deallocate(q, s)
	// 250 MiB does not fit beside the live 100 MiB: growing fails, the
	// cached segment is freed and a new one does not fit either.
	_, err = a.Allocate(250<<20, s)
	var oom *gpumem.OutOfMemoryError
	if !errors.Is(err, gpumem.ErrOutOfMemory) || !errors.As(err, &oom) {
		t.Fatalf("got %v, want an out-of-memory error", err)
	}
	checkInvariants(t, a)
	_ = a.Deallocate(keep, s)
}
