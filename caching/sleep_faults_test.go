package caching

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

// Faults part way leave a consistent state: a Sleep that cannot save stays
// awake; one whose unmapping fails is undone; a Wake that cannot map or
// copy stays asleep, and a later Wake succeeds with the contents intact.
func TestSleepWakeFaults(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		op       string
		nth      []int
		inSleep  bool
		asleepAt bool // asleep after the failed call
	}{
		{"MallocHost", []int{1}, true, false},
		{"MemcpyAsync", []int{2}, true, false},
		{"StreamCreate", []int{1}, true, false},
		{"MemUnmap", []int{1}, true, false},    // the run's unmap; chunk by chunk follows
		{"MemUnmap", []int{1, 2}, true, false}, // the run's and its first chunk's: undone by a wake
		{"MemCreate", []int{3}, false, true},
		{"MemMap", []int{2}, false, true},
		{"MemSetAccess", []int{1}, false, true},
		{"MemcpyAsync", []int{1}, false, true},
	} {
		t.Run(c.op, func(t *testing.T) {
			t.Parallel()
			g, a, ss := newSleepSim(t, 1<<30)
			allocs := fillSleepWorkload(t, g, a, ss, 30, 2, false)
			if !c.inSleep {
				if err := a.Sleep(ctx); err != nil {
					t.Fatal(err)
				}
			} else if err := a.EmptyCache(); err != nil {
				// Sleep's own release of the cache makes no call then:
				// the faults hit what Sleep does after it.
				t.Fatal(err)
			}
			for _, n := range c.nth {
				g.InjectFault(c.op, n, nil)
			}
			var err error
			if c.inSleep {
				err = a.Sleep(ctx)
			} else {
				err = a.Wake(ctx)
			}
			if c.op == "MemUnmap" && len(c.nth) == 1 {
				// The run falls back to chunk by chunk: no error.
				if err != nil {
					t.Fatalf("Sleep after a failed run unmap: %v", err)
				}
				if !a.Asleep(0) {
					t.Fatal("not asleep")
				}
			} else {
				if err == nil {
					t.Fatalf("no error from the fault in %s", c.op)
				}
				if a.Asleep(0) != c.asleepAt {
					t.Fatalf("asleep %v after %v", a.Asleep(0), err)
				}
			}
			g.ClearFaults()
			st := a.Stats(0)
			if a.Asleep(0) {
				if st.AsleepBytes != st.ReservedBytes[gpumem.StatAll].Current || usedBytes(t, g) != 0 {
					t.Fatalf("asleep with %d asleep bytes of %d reserved, %d used", st.AsleepBytes, st.ReservedBytes[gpumem.StatAll].Current, usedBytes(t, g))
				}
				if err := a.Wake(ctx); err != nil {
					t.Fatal(err)
				}
			} else if st.AsleepBytes != 0 || usedBytes(t, g) != uint64(st.ReservedBytes[gpumem.StatAll].Current) {
				t.Fatalf("awake with %d asleep bytes, %d used, %d reserved", st.AsleepBytes, usedBytes(t, g), st.ReservedBytes[gpumem.StatAll].Current)
			}
			for i, x := range allocs {
				if !x.keep {
					continue
				}
				if !holds(t, g, x.p, x.data) {
					t.Fatalf("kept allocation %d changed", i)
				}
			}
			for _, x := range allocs {
				if err := a.Deallocate(x.p, x.s); err != nil {
					t.Fatal(err)
				}
			}
			checkInvariants(t, a)
		})
	}
}

// Sleep, Wake, allocations and frees from many goroutines (run with -race).
func TestSleepConcurrent(t *testing.T) {
	_, a, ss := newSleepSim(t, 2<<30)
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			s := ss[w%len(ss)]
			var mine []gpumem.Ptr
			for i := 0; i < 200; i++ {
				p, err := a.AllocateTagged(uint64(1+i%7)<<18, s, SleepTag(i%2))
				switch {
				case err == nil:
					mine = append(mine, p)
				case !errors.Is(err, ErrAsleep):
					t.Error(err)
					return
				}
				if len(mine) > 8 {
					if err := a.Deallocate(mine[0], s); err != nil {
						t.Error(err)
						return
					}
					mine = mine[1:]
				}
			}
			for _, p := range mine {
				if err := a.Deallocate(p, s); err != nil {
					t.Error(err)
				}
			}
		}(w)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 20; i++ {
			if err := a.Sleep(ctx); err != nil {
				t.Error(err)
				return
			}
			_ = a.Stats(0)
			_ = a.Asleep(0)
			if err := a.Wake(ctx); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	checkInvariants(t, a)
}

// TestFailedDeviceWaitReleasesNothing: when the device cannot be waited
// for, EmptyCache and Sleep unmap nothing (work queued before may still use
// the memory) and say so; the kernel that was queued then runs on memory
// that is still there.
func TestFailedDeviceWaitReleasesNothing(t *testing.T) {
	for _, sleep := range []bool{false, true} {
		g, s, a := faultRig(t, true, true)
		p, err := a.AllocateTagged(1<<20, s, KeepOnSleep)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Launch(s, p, 1<<20, func(m []byte) { m[0]++ }); err != nil { // queued: Manual
			t.Fatal(err)
		}
		if !sleep {
			if err := a.Deallocate(p, s); err != nil { // same stream: cached at once
				t.Fatal(err)
			}
		}
		g.InjectFault("DeviceSynchronize", 1, nil)
		if sleep {
			err = a.Sleep(context.Background())
		} else {
			err = a.EmptyCache()
		}
		g.ClearFaults()
		if err == nil {
			t.Errorf("sleep %v: the device could not be waited for, and no error was returned", sleep)
		}
		if a.Asleep(0) {
			t.Errorf("the device is asleep after a Sleep that could not wait for it")
		}
		if err := g.Drain(); err != nil {
			t.Fatal(err)
		}
		if v := g.Violations(); len(v) != 0 {
			t.Errorf("sleep %v: the queued kernel touched memory that was gone: %.200s", sleep, v[0])
		}
		if sleep {
			if err := a.Deallocate(p, s); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if err := g.StreamDestroy(s); err != nil {
			t.Fatal(err)
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRefusedReleasesAreTriedAgain: physical memory or a virtual range
// whose release the device refused is kept and released again later
// (EmptyCache, Close), not forgotten: nothing leaks past Close.
func TestRefusedReleasesAreTriedAgain(t *testing.T) {
	for _, c := range []struct {
		op  string
		exp bool
	}{{"MemRelease", false}, {"MemAddressFree", false}, {"MemRelease", true}, {"MemAddressFree", true}} {
		g, s, a := faultRig(t, false, c.exp)
		p, err := a.Allocate(30<<20, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Deallocate(p, s); err != nil {
			t.Fatal(err)
		}
		for n := 1; n <= 4; n++ { // the chunks' releases and EmptyCache's own retry fail
			g.InjectFault(c.op, n, nil)
		}
		_ = a.EmptyCache()
		g.ClearFaults()
		if c.op == "MemRelease" {
			// Given up but held by the device: out of reserved, counted
			// as unreleased until a retry releases it.
			st := a.Stats(0)
			if st.ReservedBytes[gpumem.StatAll].Current != 0 || st.UnreleasedBytes <= 0 || uint64(st.UnreleasedBytes) > usedBytes(t, g) {
				t.Errorf("expandable %v: after a refused release %d reserved, %d unreleased, %d used on the device",
					c.exp, st.ReservedBytes[gpumem.StatAll].Current, st.UnreleasedBytes, usedBytes(t, g))
			}
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
			if st := a.Stats(0); st.UnreleasedBytes != 0 || usedBytes(t, g) != 0 {
				t.Errorf("expandable %v: after the retry %d unreleased, %d used", c.exp, st.UnreleasedBytes, usedBytes(t, g))
			}
		}
		if err := a.Close(); err != nil {
			t.Errorf("%s refused once (expandable %v): Close: %v", c.op, c.exp, err)
		}
		if err := g.StreamDestroy(s); err != nil {
			t.Fatal(err)
		}
		if l := g.Leaks(); len(l) != 0 {
			t.Errorf("%s refused once (expandable %v): leaked past Close: %.160s", c.op, c.exp, l[0])
		}
		_ = g.Close()
	}
}

// faultRig is a 1 GiB simulator (Manual: work runs only when drained), a
// stream of it, and an allocator with expandable segments or not, for the
// tests of injected failures above, which close all three themselves.
func faultRig(t *testing.T, manual, expandable bool) (*sim.GPU, gpumem.Stream, *Allocator) {
	t.Helper()
	g, err := sim.New(sim.Config{Manual: manual, Devices: []sim.DeviceConfig{{Capacity: 1 << 30}}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.ExpandableSegments = expandable
	a, err := New(g, o)
	if err != nil {
		t.Fatal(err)
	}
	return g, s, a
}

// TestRefusedSleepBufferFreeIsKept: a pinned save buffer the driver refuses
// to free after Wake is kept, not forgotten: the next Sleep reuses it
// without pinning more, and a later free (here at Close) gives it back, so
// nothing leaks (the simulator's leak check at cleanup).
func TestRefusedSleepBufferFreeIsKept(t *testing.T) {
	ctx := context.Background()
	g, a, ss := newSleepSim(t, 1<<30)
	allocs := fillSleepWorkload(t, g, a, ss, 30, 5, false)
	if err := a.Sleep(ctx); err != nil {
		t.Fatal(err)
	}
	g.InjectFault("FreeHost", 1, nil)
	if err := a.Wake(ctx); err != nil {
		t.Fatalf("Wake with the buffer's free refused: %v (the wake itself succeeded)", err)
	}
	g.ClearFaults()
	pinned := g.Calls("MallocHost")
	if err := a.Sleep(ctx); err != nil {
		t.Fatal(err)
	}
	if n := g.Calls("MallocHost") - pinned; n != 0 {
		t.Errorf("the second Sleep pinned %d more buffers instead of reusing the kept one", n)
	}
	if err := a.Wake(ctx); err != nil {
		t.Fatal(err)
	}
	for i, x := range allocs {
		if x.keep && !holds(t, g, x.p, x.data) {
			t.Fatalf("kept allocation %d changed", i)
		}
	}
}

// TestRefusedSleepBufferFreeAtClose: Close reports a save buffer it could
// not free.
func TestRefusedSleepBufferFreeAtClose(t *testing.T) {
	ctx := context.Background()
	o := expandableOptions()
	o.KeepSleepBuffer = true
	g, a, ss := newSleepSimWith(t, 1<<30, o)
	fillSleepWorkload(t, g, a, ss, 10, 6, false)
	if err := a.Sleep(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Wake(ctx); err != nil {
		t.Fatal(err)
	}
	g.InjectFault("FreeHost", 1, nil)
	err := a.Close()
	g.ClearFaults()
	if err == nil {
		t.Error("Close with the save buffer's free refused = nil, want the error")
	}
	if n := g.Calls("FreeHost"); n != 1 {
		t.Errorf("%d FreeHost calls, want the one refused", n)
	}
	// The buffer is still known: free it, or the leak check fails.
	h := a.devs[0].sleep.host
	if h == 0 {
		t.Fatal("the refused buffer was forgotten")
	}
	if err := g.FreeHost(h); err != nil {
		t.Fatal(err)
	}
}

// TestSleepRefusedReleaseIsKept: a release that Sleep's device refuses is
// counted as unreleased, not forgotten; the sleep and the wake go on, and
// EmptyCache releases it.
func TestSleepRefusedReleaseIsKept(t *testing.T) {
	ctx := context.Background()
	g, a, ss := newSleepSim(t, 1<<30)
	allocs := fillSleepWorkload(t, g, a, ss, 30, 7, true)
	g.InjectFault("MemRelease", 1, nil)
	if err := a.Sleep(ctx); err != nil {
		t.Fatal(err)
	}
	g.ClearFaults()
	st := a.Stats(0)
	if st.UnreleasedBytes <= 0 || usedBytes(t, g) != uint64(st.UnreleasedBytes) {
		t.Errorf("asleep with a refused release: %d unreleased, %d used on the device", st.UnreleasedBytes, usedBytes(t, g))
	}
	if err := a.Wake(ctx); err != nil {
		t.Fatal(err)
	}
	for i, x := range allocs {
		if x.keep && !holds(t, g, x.p, x.data) {
			t.Fatalf("kept allocation %d changed", i)
		}
	}
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(0); st.UnreleasedBytes != 0 || usedBytes(t, g) != uint64(st.ReservedBytes[gpumem.StatAll].Current) {
		t.Errorf("after EmptyCache: %d unreleased, %d used, %d reserved", st.UnreleasedBytes, usedBytes(t, g), st.ReservedBytes[gpumem.StatAll].Current)
	}
}
