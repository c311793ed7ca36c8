package deferrable_test

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/deferrable"
)

// countdown is a context that is done from its n-th Err call on: a way to
// cancel at a chosen check inside a move, deterministically.
type countdown struct {
	context.Context
	n atomic.Int64
}

func after(n int64) *countdown {
	c := &countdown{Context: context.Background()}
	c.n.Store(n)
	return c
}

func (c *countdown) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

func (c *countdown) fired() bool { return c.n.Load() < 0 }

func noFailures(t *testing.T, st deferrable.Stats) {
	t.Helper()
	for name, tr := range map[string]deferrable.Transfer{
		"device→host": st.DeviceToHost, "device→disk": st.DeviceToDisk, "host→disk": st.HostToDisk,
		"host→device": st.HostToDevice, "disk→device": st.DiskToDevice, "disk→host": st.DiskToHost,
	} {
		if tr.Failures != 0 {
			t.Errorf("%s: %d failures counted for stopped moves", name, tr.Failures)
		}
	}
}

// TestMoveToContextStopsBetweenChunks stops each chunked move (the staging
// ring, or the file in pieces) after its first chunk: the buffer is where it
// was, whole, and moves when asked again.
func TestMoveToContextStopsBetweenChunks(t *testing.T) {
	const chunk = 256 << 10
	moves := []struct {
		from, to deferrable.Tier
	}{
		{deferrable.TierDevice, deferrable.TierDisk},
		{deferrable.TierHost, deferrable.TierDisk},
		{deferrable.TierDisk, deferrable.TierHost},
		{deferrable.TierDisk, deferrable.TierDevice},
	}
	for _, mv := range moves {
		t.Run(mv.from.String()+"→"+mv.to.String(), func(t *testing.T) {
			g := newSim(t, 1<<30, false)
			m := newManager(t, g, deferrable.Options{DiskDir: t.TempDir(), StagingBytes: chunk})
			s := newStream(t, g)
			b, err := m.Alloc(16*chunk+17, s)
			if err != nil {
				t.Fatal(err)
			}
			want := pattern(3, b.Size())
			write(t, g, b, s, want)
			if err := b.MoveTo(mv.from); err != nil {
				t.Fatal(err)
			}
			// One check before the move, one before the first chunk, then
			// stopped at the second.
			ctx := after(2)
			err = b.MoveToContext(ctx, mv.to)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("MoveToContext: %v, want context.Canceled", err)
			}
			if !ctx.fired() {
				t.Fatal("the move never checked its context past its first chunk")
			}
			where(t, b, mv.from)
			noFailures(t, m.Stats())
			if err := b.MoveToContext(context.Background(), mv.to); err != nil {
				t.Fatal(err)
			}
			where(t, b, mv.to)
			if got := read(t, g, b, s); !bytes.Equal(got, want) {
				t.Fatal("the buffer changed")
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			checkLeaks(t, g)
		})
	}
}

// TestSpillContextStopsBetweenBuffers cancels a spill after its first buffer:
// that one is off the device, the others stay there, all whole.
func TestSpillContextStopsBetweenBuffers(t *testing.T) {
	g := newSim(t, 1<<30, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var spilled atomic.Int32
	m := newManager(t, g, deferrable.Options{DiskDir: t.TempDir(), HostLimit: 2 * mib, StagingBytes: 256 << 10,
		Callbacks: deferrable.Callbacks{Spill: func(deferrable.Info, deferrable.Tier) {
			spilled.Add(1)
			cancel()
		}}})
	s := newStream(t, g)
	bufs := make([]*deferrable.Buffer, 4)
	for i := range bufs {
		var err error
		if bufs[i], err = m.Alloc(mib, s); err != nil {
			t.Fatal(err)
		}
		write(t, g, bufs[i], s, pattern(uint64(10+i), mib))
	}
	freed, err := m.SpillContext(ctx, 4*mib)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("SpillContext: %v, want context.Canceled", err)
	}
	if freed != mib || spilled.Load() != 1 {
		t.Fatalf("freed %d bytes in %d spills, want one buffer's", freed, spilled.Load())
	}
	onDevice := 0
	for _, b := range bufs {
		if b.Where() == deferrable.TierDevice {
			onDevice++
		}
	}
	if onDevice != 3 {
		t.Errorf("%d buffers on the device, want 3", onDevice)
	}
	if st := m.Stats(); st.Device.Buffers != 3 || st.Host.Buffers+st.Disk.Buffers != 1 {
		t.Errorf("tiers after the stopped spill: device %+v host %+v disk %+v", st.Device, st.Host, st.Disk)
	}
	// A done context moves nothing; the next spill goes on.
	if n, err := m.SpillContext(ctx, mib); n != 0 || !errors.Is(err, context.Canceled) {
		t.Errorf("SpillContext with a done context: %d, %v", n, err)
	}
	if _, err := m.Spill(4 * mib); err != nil {
		t.Fatal(err)
	}
	for i, b := range bufs {
		if got := read(t, g, b, s); !bytes.Equal(got, pattern(uint64(10+i), mib)) {
			t.Errorf("buffer %d changed", i)
		}
	}
	closeChecked(t, m, g)
}

// TestSpillContextStopsInsideAMove stops a spill to disk between the chunks
// of its first buffer: nothing is freed and every buffer is on the device.
func TestSpillContextStopsInsideAMove(t *testing.T) {
	g := newSim(t, 1<<30, false)
	// No host tier room: spills go through the staging ring to disk.
	m := newManager(t, g, deferrable.Options{DiskDir: t.TempDir(), HostLimit: 1, StagingBytes: 128 << 10})
	s := newStream(t, g)
	bufs := make([]*deferrable.Buffer, 3)
	for i := range bufs {
		var err error
		if bufs[i], err = m.Alloc(mib, s); err != nil {
			t.Fatal(err)
		}
		write(t, g, bufs[i], s, pattern(uint64(20+i), mib))
	}
	ctx := after(4) // the spill, its first buffer, two chunks
	freed, err := m.SpillContext(ctx, 3*mib)
	if !errors.Is(err, context.Canceled) || freed != 0 {
		t.Fatalf("SpillContext: %d bytes, %v; want 0 and context.Canceled", freed, err)
	}
	for i, b := range bufs {
		where(t, b, deferrable.TierDevice)
		if got := read(t, g, b, s); !bytes.Equal(got, pattern(uint64(20+i), mib)) {
			t.Errorf("buffer %d changed", i)
		}
	}
	noFailures(t, m.Stats())
	closeChecked(t, m, g)
}

// TestNilContext checks that SpillContext and MoveToContext refuse a nil
// context with ErrInvalidValue, leaving the manager usable, rather than
// panicking (with the manager's lock held).
func TestNilContext(t *testing.T) {
	g := newSim(t, 1<<30, false)
	m := newManager(t, g, deferrable.Options{})
	b, err := m.Alloc(4096, gpumem.Stream{})
	if err != nil {
		t.Fatal(err)
	}
	var nilCtx context.Context
	for name, f := range map[string]func() error{
		"SpillContext":  func() error { _, err := m.SpillContext(nilCtx, 1); return err },
		"MoveToContext": func() error { return b.MoveToContext(nilCtx, deferrable.TierHost) },
	} {
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("%s with a nil context panicked: %v", name, r)
				}
			}()
			err = f()
		}()
		if !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("%s with a nil context: %v, want ErrInvalidValue", name, err)
		}
	}
	where(t, b, deferrable.TierDevice)
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	closeChecked(t, m, g)
}
