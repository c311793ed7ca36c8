package deferrable_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/deferrable"
	"github.com/gpumem/gpumem/sim"
)

// Hostile uses of a manager: a panicking launch function, a second Close.
func TestHostileManager(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, g *sim.GPU, m *deferrable.Manager, s gpumem.Stream)
	}{
		{"LockAndLaunch whose function panics unlocks, then panics on", func(t *testing.T, g *sim.GPU, m *deferrable.Manager, s gpumem.Stream) {
			a, _ := m.Alloc(mib, s)
			b, _ := m.Alloc(mib, s)
			func() {
				defer func() {
					if r := recover(); r != "kernel bug" {
						t.Errorf("recovered %v, want the function's panic", r)
					}
				}()
				m.LockAndLaunch(func([]gpumem.Ptr) error { panic("kernel bug") }, a, b)
			}()
			if st := m.Stats(); st.SyncLocks != 0 {
				t.Errorf("%d holds left after the panic", st.SyncLocks)
			}
			if err := a.MoveTo(deferrable.TierHost); err != nil {
				t.Errorf("buffer still locked after the panic: %v", err)
			}
		}},
		{"LockAndLaunchAsync whose function panics releases on the stream", func(t *testing.T, g *sim.GPU, m *deferrable.Manager, s gpumem.Stream) {
			a, _ := m.Alloc(mib, s)
			func() {
				defer func() { _ = recover() }()
				m.LockAndLaunchAsync(s, func(gpumem.Stream, []gpumem.Ptr) error { panic("kernel bug") }, a)
			}()
			if st := m.Stats(); st.AsyncLocks != 0 {
				t.Errorf("%d asynchronous holds left after the panic", st.AsyncLocks)
			}
		}},
		{"a spill the host arena cannot place goes to disk, a fallback and no failure", func(t *testing.T, g *sim.GPU, m *deferrable.Manager, s gpumem.Stream) {
			a, _ := m.Alloc(mib, s)
			g.InjectFault("MallocHost", 1, gpumem.ErrOutOfMemory)
			if n, err := m.Spill(mib); err != nil || n != mib {
				t.Fatalf("Spill: %d, %v", n, err)
			}
			if a.Where() != deferrable.TierDisk {
				t.Fatalf("buffer on %v, want disk", a.Where())
			}
			st := m.Stats()
			if st.DeviceToHost.Failures != 0 || st.Spilled().Failures != 0 || st.DeviceToHost.Fallbacks != 1 || st.DeviceToDisk.Count != 1 {
				t.Errorf("device→host %+v, device→disk %+v: the fallback counted as a failure", st.DeviceToHost, st.DeviceToDisk)
			}
		}},
		{"a second Close returns nil", func(t *testing.T, g *sim.GPU, m *deferrable.Manager, s gpumem.Stream) {
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			if err := m.Close(); err != nil {
				t.Errorf("second Close: %v, want nil as every allocator", err)
			}
			if _, err := m.Alloc(1, s); !errors.Is(err, gpumem.ErrClosed) {
				t.Errorf("Alloc after Close: %v", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newSim(t, 1<<30, false)
			m := newManager(t, g, deferrable.Options{DiskDir: t.TempDir()})
			s := newStream(t, g)
			tc.run(t, g, m, s)
			m.Close()
			checkLeaks(t, g)
		})
	}
}

// TestHoldOnDeadStream checks that a hold cannot be taken on a stream that
// is not live, and that a hold whose stream was destroyed before its
// release ends anyway (the device synchronized in place of the fence),
// with an error that says so: the buffer can then be freed.
func TestHoldOnDeadStream(t *testing.T) {
	g := newSim(t, 1<<30, false)
	m := newManager(t, g, deferrable.Options{})
	b, err := m.Alloc(4096, gpumem.Stream{})
	if err != nil {
		t.Fatal(err)
	}
	bad := gpumem.Stream{Handle: 0xbad}
	if _, err := b.Acquire(bad); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("Acquire on a stream that was never made: %v, want ErrInvalidValue", err)
	}
	if _, err := b.AcquireAsync(bad); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("AcquireAsync on a stream that was never made: %v, want ErrInvalidValue", err)
	}
	if b.Locked() {
		t.Fatal("a refused Acquire left the buffer locked")
	}
	for _, async := range []bool{false, true} {
		s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
		if err != nil {
			t.Fatal(err)
		}
		if async {
			_, err = b.AcquireAsync(s)
		} else {
			_, err = b.Acquire(s)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := g.StreamDestroy(s); err != nil {
			t.Fatal(err)
		}
		if async {
			err = b.ReleaseAsync(s)
		} else {
			err = b.Release()
		}
		if err == nil || !strings.Contains(err.Error(), "hold ended") {
			t.Errorf("release after the stream was destroyed (async %v): %v, want an error saying the hold ended", async, err)
		}
		if b.Locked() {
			t.Fatalf("async %v: the buffer stays locked after its stream was destroyed", async)
		}
	}
	if err := b.Free(); err != nil {
		t.Fatalf("Free after the holds ended: %v", err)
	}
	var none *deferrable.Manager
	if err := none.Close(); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("Close of a nil manager: %v, want ErrInvalidValue", err)
	}
	closeChecked(t, m, g)
}

// TestHugeHistory checks that a history ring too large to allocate is an
// error, not a process out of memory.
func TestHugeHistory(t *testing.T) {
	g := newSim(t, 1<<30, false)
	if _, err := deferrable.New(g, 0, deferrable.Options{HistorySize: 1 << 40}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("HistorySize 1<<40: %v, want ErrInvalidValue", err)
	}
}

// TestFailedDeviceFreeFreedAtClose: a buffer's device free that the driver
// refuses (its stream's synchronize, or the free itself) leaves the memory
// to the manager, which frees it at Close: nothing leaks.
func TestFailedDeviceFreeFreedAtClose(t *testing.T) {
	for _, op := range []string{"StreamSynchronize", "Free"} {
		g := newSim(t, 1<<30, false)
		s := newStream(t, g)
		m := newManager(t, g, deferrable.Options{})
		b, err := m.Alloc(1<<20, s)
		if err != nil {
			t.Fatal(err)
		}
		g.InjectFault(op, 1, nil)
		if err := b.Free(); err == nil {
			t.Errorf("%s refused: Free = nil, want the error", op)
		}
		g.ClearFaults()
		if err := m.Close(); err != nil {
			t.Fatalf("%s: Close: %v", op, err)
		}
		checkLeaks(t, g)
	}
}

// TestFreeOrderedOnTheHostWhenTheStreamCannotWait: when the copy stream
// cannot be ordered after a buffer's last use (StreamWaitEvent refused),
// Free waits for that use on the host and gives the memory back at once;
// when the host wait fails too, Free says so and the memory is kept for
// Close.
func TestFreeOrderedOnTheHostWhenTheStreamCannotWait(t *testing.T) {
	for _, hostFails := range []bool{false, true} {
		g := newSim(t, 1<<30, false)
		s := newStream(t, g)
		m := newManager(t, g, deferrable.Options{})
		before, _, err := g.MemInfo(0)
		if err != nil {
			t.Fatal(err)
		}
		b, err := m.Alloc(4<<20, s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.AcquireAsync(s); err != nil {
			t.Fatal(err)
		}
		if err := b.ReleaseAsync(s); err != nil { // leaves a fence on s
			t.Fatal(err)
		}
		g.InjectFault("StreamWaitEvent", 1, nil)
		if hostFails {
			g.InjectFault("EventSynchronize", 1, nil)
		}
		err = b.Free()
		g.ClearFaults()
		free, _, merr := g.MemInfo(0)
		if merr != nil {
			t.Fatal(merr)
		}
		if hostFails {
			if err == nil {
				t.Error("both waits refused: Free = nil, want the error")
			}
			if free >= before {
				t.Error("both waits refused: the memory was given back without an order after its last use")
			}
		} else {
			if err != nil {
				t.Errorf("StreamWaitEvent refused: Free = %v, want the host wait to order it", err)
			}
			if free != before {
				t.Errorf("StreamWaitEvent refused: %d bytes free after Free, %d before Alloc: memory held", free, before)
			}
		}
		closeChecked(t, m, g)
	}
}

// TestRefusedHostFreeKeepsTheSlab: a pinned slab the driver refuses to free
// stays in the arena, counted and reusable, and a later TrimHost gives it
// back; nothing is forgotten.
func TestRefusedHostFreeKeepsTheSlab(t *testing.T) {
	g := newSim(t, 1<<30, false)
	s := newStream(t, g)
	m := newManager(t, g, deferrable.Options{HostSlabBytes: 8 << 20})
	b, err := m.Alloc(1<<20, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.MoveTo(deferrable.TierHost); err != nil {
		t.Fatal(err)
	}
	if err := b.MoveTo(deferrable.TierDevice); err != nil { // the slab is empty now
		t.Fatal(err)
	}
	slab := m.Stats().PinnedBytes
	if slab == 0 {
		t.Fatal("no slab pinned by a move to the host")
	}
	g.InjectFault("FreeHost", 1, nil)
	n, err := m.TrimHost()
	g.ClearFaults()
	if err == nil || n != 0 {
		t.Errorf("TrimHost with FreeHost refused = %d, %v; want 0 and the error", n, err)
	}
	if st := m.Stats(); st.PinnedBytes != slab || st.PinnedSlabs != 1 {
		t.Errorf("after a refused free: %d bytes in %d slabs pinned, want %d in 1", st.PinnedBytes, st.PinnedSlabs, slab)
	}
	if err := b.MoveTo(deferrable.TierHost); err != nil { // the kept slab serves
		t.Fatal(err)
	}
	if st := m.Stats(); st.PinnedBytes != slab {
		t.Errorf("a move to the host pinned more (%d bytes) instead of reusing the kept slab (%d)", st.PinnedBytes, slab)
	}
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	if n, err := m.TrimHost(); err != nil || n != slab {
		t.Errorf("TrimHost = %d, %v; want %d", n, err, slab)
	}
	closeChecked(t, m, g)
}

// TestRefusedHostFreeUnderTheLimit: at the host limit, an empty slab given
// back to make room that the driver refuses to free stays counted, nothing
// new is pinned past the limit, and the next move makes the room.
func TestRefusedHostFreeUnderTheLimit(t *testing.T) {
	g := newSim(t, 1<<30, false)
	s := newStream(t, g)
	m := newManager(t, g, deferrable.Options{HostSlabBytes: 4 << 20, HostLimit: 8 << 20})
	small, err := m.Alloc(1<<20, s)
	if err != nil {
		t.Fatal(err)
	}
	big, err := m.Alloc(6<<20, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := small.MoveTo(deferrable.TierHost); err != nil {
		t.Fatal(err)
	}
	if err := small.MoveTo(deferrable.TierDevice); err != nil {
		t.Fatal(err)
	}
	g.InjectFault("FreeHost", 1, nil)
	err = big.MoveTo(deferrable.TierHost)
	g.ClearFaults()
	if err == nil {
		t.Fatal("a move that needed the empty slab's room succeeded though the slab was not freed")
	}
	where(t, big, deferrable.TierDevice)
	if st := m.Stats(); st.PinnedBytes != 4<<20 || st.PinnedSlabs != 1 {
		t.Errorf("after the refused free: %d bytes in %d slabs, want the 4 MiB slab kept", st.PinnedBytes, st.PinnedSlabs)
	}
	if err := big.MoveTo(deferrable.TierHost); err != nil {
		t.Fatalf("the next move: %v", err)
	}
	if st := m.Stats(); st.PinnedBytes != 6<<20 {
		t.Errorf("after the move: %d bytes pinned, want 6 MiB", st.PinnedBytes)
	}
	closeChecked(t, m, g)
}

// TestReleaseStreamAfterStreamDestroyed checks that ReleaseStream, like
// ReleaseAsync on each buffer, ends the holds of a stream destroyed since
// they were taken (the device synchronized in place of the fences), with an
// error that says so: the buffers can then be spilled and freed.
func TestReleaseStreamAfterStreamDestroyed(t *testing.T) {
	g := newSim(t, 1<<30, false)
	m := newManager(t, g, deferrable.Options{})
	a, err := m.Alloc(4096, gpumem.Stream{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Alloc(4096, gpumem.Stream{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.LockAndLaunchAsync(s, func(gpumem.Stream, []gpumem.Ptr) error { return nil }, a, b); err != nil {
		t.Fatal(err)
	}
	if err := g.StreamDestroy(s); err != nil {
		t.Fatal(err)
	}
	if err := m.ReleaseStream(s); err == nil || !strings.Contains(err.Error(), "hold ended") {
		t.Errorf("ReleaseStream after the stream was destroyed: %v, want an error saying the holds ended", err)
	}
	for i, buf := range []*deferrable.Buffer{a, b} {
		if buf.Locked() {
			t.Errorf("buffer %d stays locked after ReleaseStream", i)
		}
	}
	if st := m.Stats(); st.AsyncLocks != 0 || st.PendingReleases != 0 {
		t.Errorf("holds left: %d async, %d pending", st.AsyncLocks, st.PendingReleases)
	}
	if err := m.ReleaseStream(gpumem.Stream{Handle: 0xbad}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("ReleaseStream of a stream that was never made: %v, want ErrInvalidValue", err)
	}
	for i, buf := range []*deferrable.Buffer{a, b} {
		if err := buf.Free(); err != nil {
			t.Errorf("Free of buffer %d: %v", i, err)
		}
	}
	closeChecked(t, m, g)
}

// TestCloseDropsHoldsOfADestroyedStream checks that Close drops the holds
// of a stream destroyed since they were taken (an idle stream, as Close
// asks) without failing: no work can still use the buffers.
func TestCloseDropsHoldsOfADestroyedStream(t *testing.T) {
	g := newSim(t, 1<<30, false)
	m := newManager(t, g, deferrable.Options{})
	b, err := m.Alloc(4096, gpumem.Stream{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AcquireAsync(s); err != nil {
		t.Fatal(err)
	}
	if err := g.StreamDestroy(s); err != nil {
		t.Fatal(err)
	}
	closeChecked(t, m, g)
}
