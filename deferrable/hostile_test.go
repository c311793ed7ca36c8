package deferrable_test

import (
	"errors"
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
