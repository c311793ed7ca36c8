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
