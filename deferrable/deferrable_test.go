package deferrable_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/deferrable"
	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/simtest"
)

const mib = 1 << 20

var long = flag.Bool("gpumem.long", false, "run the deferrable workload at a larger scale")

// newSim makes a one-device simulator and checks, when the test ends, that
// nothing leaked and no violation was seen.
func newSim(t testing.TB, capacity uint64, manual bool) *sim.GPU {
	t.Helper()
	g := simtest.New(t, sim.Config{Devices: []sim.DeviceConfig{{Capacity: capacity}}, Manual: manual})
	t.Cleanup(func() {
		if v := g.Violations(); len(v) > 0 {
			t.Errorf("violations: %v", v)
		}
		g.Close()
	})
	return g
}

// testStreams are the streams tests made, per simulator, destroyed before
// the leak check.
var (
	testStreams sync.Map // *sim.GPU -> *[]gpumem.Stream
	streamsMu   sync.Mutex
)

// closeChecked closes m, which must succeed, and checks that nothing of g
// leaked (checkLeaks).
func closeChecked(t testing.TB, m *deferrable.Manager, g *sim.GPU) {
	t.Helper()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	checkLeaks(t, g)
}

func checkLeaks(t testing.TB, g *sim.GPU) {
	t.Helper()
	if v, ok := testStreams.LoadAndDelete(g); ok {
		for _, s := range *v.(*[]gpumem.Stream) {
			if err := g.StreamDestroy(s); err != nil {
				t.Error(err)
			}
		}
	}
	if l := g.Leaks(); len(l) > 0 {
		t.Errorf("leaks after Close: %v", l)
	}
}

func newManager(t testing.TB, g *sim.GPU, opts deferrable.Options) *deferrable.Manager {
	t.Helper()
	m, err := deferrable.New(g, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func newStream(t testing.TB, g *sim.GPU) gpumem.Stream {
	t.Helper()
	s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := testStreams.LoadOrStore(g, new([]gpumem.Stream))
	streamsMu.Lock()
	*v.(*[]gpumem.Stream) = append(*v.(*[]gpumem.Stream), s)
	streamsMu.Unlock()
	return s
}

func pattern(seed, n uint64) []byte {
	p := make([]byte, n)
	x := seed*0x9e3779b97f4a7c15 + 1
	for i := range p {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		p[i] = byte(x)
	}
	return p
}

// write fills buf with data by a simulated kernel on s.
func write(t testing.TB, g *sim.GPU, buf *deferrable.Buffer, s gpumem.Stream, data []byte) {
	t.Helper()
	p, err := buf.Acquire(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Launch(s, p, buf.Size(), func(mem []byte) { copy(mem, data) }); err != nil {
		t.Fatal(err)
	}
	if err := buf.Release(); err != nil {
		t.Fatal(err)
	}
}

// read returns buf's content, read by a simulated kernel on s.
func read(t testing.TB, g *sim.GPU, buf *deferrable.Buffer, s gpumem.Stream) []byte {
	t.Helper()
	p, err := buf.Acquire(s)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, buf.Size())
	if err := g.Launch(s, p, buf.Size(), func(mem []byte) { copy(out, mem) }); err != nil {
		t.Fatal(err)
	}
	if err := g.StreamSynchronize(s); err != nil {
		t.Fatal(err)
	}
	if err := buf.Release(); err != nil {
		t.Fatal(err)
	}
	return out
}

func where(t testing.TB, b *deferrable.Buffer, want deferrable.Tier) {
	t.Helper()
	if got := b.Where(); got != want {
		t.Fatalf("buffer %d is on %v, want %v", b.ID(), got, want)
	}
}

func TestRoundTripThroughEveryTier(t *testing.T) {
	g := newSim(t, 1<<30, false)
	dir := t.TempDir()
	m := newManager(t, g, deferrable.Options{DiskDir: dir, StagingBytes: 1 * mib, StagingBuffers: 3})
	s := newStream(t, g)
	sizes := []uint64{1, 4096, 3*mib + 123, 8 * mib}
	for i, size := range sizes {
		b, err := m.Alloc(size, s)
		if err != nil {
			t.Fatal(err)
		}
		want := pattern(uint64(i+1), size)
		write(t, g, b, s, want)
		for _, path := range [][]deferrable.Tier{
			{deferrable.TierHost, deferrable.TierDisk, deferrable.TierDevice},
			{deferrable.TierDisk, deferrable.TierHost, deferrable.TierDevice},
			{deferrable.TierDisk, deferrable.TierDevice},
			{deferrable.TierHost, deferrable.TierDevice},
		} {
			for _, tier := range path {
				if err := b.MoveTo(tier); err != nil {
					t.Fatalf("size %d: move to %v: %v", size, tier, err)
				}
				where(t, b, tier)
			}
			if got := read(t, g, b, s); !bytes.Equal(got, want) {
				t.Fatalf("size %d: data changed along %v", size, path)
			}
		}
		if err := b.Free(); err != nil {
			t.Fatal(err)
		}
	}
	st := m.Stats()
	n := int64(len(sizes))
	for name, got := range map[string]int64{
		"device→host": st.DeviceToHost.Count / 2, "device→disk": st.DeviceToDisk.Count / 2,
		"host→disk": st.HostToDisk.Count, "disk→host": st.DiskToHost.Count,
	} {
		if got != n {
			t.Errorf("%s moves: %d, want %d (device→* halved: two paths each)", name, got, n)
		}
	}
	if st.HostToDevice.Count != 2*n || st.DiskToDevice.Count != 2*n {
		t.Errorf("unspills: host %d disk %d, want %d each", st.HostToDevice.Count, st.DiskToDevice.Count, 2*n)
	}
	if st.Device.Buffers != 0 || st.Host.Bytes != 0 || st.Disk.Bytes != 0 {
		t.Errorf("after freeing all: %+v", st)
	}
	closeChecked(t, m, g)
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("disk tier left %d entries behind", len(ents))
	}
}

func TestLockedBufferIsNeverSpilled(t *testing.T) {
	g := newSim(t, 1<<30, false)
	m := newManager(t, g, deferrable.Options{})
	defer func() { m.Close(); checkLeaks(t, g) }()
	s := newStream(t, g)
	a, _ := m.Alloc(mib, s)
	b, _ := m.Alloc(mib, s)
	pa, err := a.Acquire(s)
	if err != nil {
		t.Fatal(err)
	}
	freed, err := m.Spill(1 << 40)
	if err != nil || freed != mib {
		t.Fatalf("Spill freed %d (%v), want only the unlocked %d", freed, err, mib)
	}
	where(t, a, deferrable.TierDevice)
	where(t, b, deferrable.TierHost)
	if err := a.MoveTo(deferrable.TierHost); !errors.Is(err, deferrable.ErrLocked) || !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Fatalf("move of a locked buffer: %v", err)
	}
	if err := a.Free(); !errors.Is(err, deferrable.ErrLocked) {
		t.Fatalf("free of a locked buffer: %v", err)
	}
	// A second hold of the same buffer returns the same address.
	pa2, err := a.Acquire(s)
	if err != nil || pa2 != pa {
		t.Fatalf("second Acquire: %#x %v, want %#x", pa2, err, pa)
	}
	a.Release()
	if freed, _ := m.Spill(1 << 40); freed != 0 || a.Where() != deferrable.TierDevice {
		t.Fatalf("spilled %d with one hold left", freed)
	}
	a.Release()
	if freed, _ := m.Spill(1 << 40); freed != mib {
		t.Fatalf("spilled %d after the last release, want %d", freed, mib)
	}
	if st := m.Stats(); st.SyncLocks != 0 || st.Host.Buffers != 2 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestTwoStreamsHoldUntilBothPassTheirEvents(t *testing.T) {
	g := newSim(t, 1<<30, true)
	m := newManager(t, g, deferrable.Options{})
	s1, s2 := newStream(t, g), newStream(t, g)
	b, err := m.Alloc(2*mib, s1)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Drain(); err != nil {
		t.Fatal(err)
	}
	want := pattern(7, 2*mib)
	p1, err := b.AcquireAsync(s1)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := b.AcquireAsync(s2)
	if err != nil || p2 != p1 {
		t.Fatalf("AcquireAsync on s2: %#x %v", p2, err)
	}
	if err := g.Launch(s1, p1, mib, func(mem []byte) { copy(mem, want[:mib]) }); err != nil {
		t.Fatal(err)
	}
	if err := g.Launch(s2, p2.Add(mib), mib, func(mem []byte) { copy(mem, want[mib:]) }); err != nil {
		t.Fatal(err)
	}
	if err := b.ReleaseAsync(s1); err != nil {
		t.Fatal(err)
	}
	if err := b.ReleaseAsync(s2); err != nil {
		t.Fatal(err)
	}
	if st := m.Stats(); st.PendingReleases != 2 || st.AsyncLocks != 0 {
		t.Fatalf("after both releases: pending %d async %d", st.PendingReleases, st.AsyncLocks)
	}
	if freed, _ := m.Spill(1 << 40); freed != 0 || !b.Locked() {
		t.Fatalf("spilled %d before either stream ran", freed)
	}
	for g.Step(s1) {
	}
	if freed, _ := m.Spill(1 << 40); freed != 0 || !b.Locked() {
		t.Fatalf("spilled %d with s2's work still queued", freed)
	}
	for g.Step(s2) {
	}
	if b.Locked() {
		t.Fatal("still locked after both streams passed their events")
	}
	if freed, err := m.Spill(1 << 40); freed != 2*mib || err != nil {
		t.Fatalf("spill after both streams: %d %v", freed, err)
	}
	where(t, b, deferrable.TierHost)
	p, err := b.Acquire(s1)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 2*mib)
	g.Launch(s1, p, 2*mib, func(mem []byte) { copy(got, mem) })
	if err := g.StreamSynchronize(s1); err != nil {
		t.Fatal(err)
	}
	b.Release()
	if !bytes.Equal(got, want) {
		t.Fatal("data written by two streams did not survive the spill")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	g.Drain()
	checkLeaks(t, g)
}

func TestReleaseStreamAndSyncAndUnlock(t *testing.T) {
	g := newSim(t, 1<<30, false)
	m := newManager(t, g, deferrable.Options{})
	defer func() { m.Close(); checkLeaks(t, g) }()
	s := newStream(t, g)
	x, _ := m.Alloc(mib, s)
	y, _ := m.Alloc(mib, s)
	err := m.LockAndLaunchAsync(s, func(s gpumem.Stream, ptrs []gpumem.Ptr) error {
		for i, p := range ptrs {
			v := byte(i + 1)
			if err := g.Launch(s, p, mib, func(mem []byte) {
				for k := range mem {
					mem[k] = v
				}
			}); err != nil {
				return err
			}
		}
		return nil
	}, x, y)
	if err != nil {
		t.Fatal(err)
	}
	if st := m.Stats(); st.AsyncLocks != 2 {
		t.Fatalf("async locks %d, want 2", st.AsyncLocks)
	}
	if freed, _ := m.Spill(1 << 40); freed != 0 {
		t.Fatalf("spilled %d while held on a stream", freed)
	}
	if err := m.SyncAndUnlock(s); err != nil {
		t.Fatal(err)
	}
	if st := m.Stats(); st.AsyncLocks != 0 || st.PendingReleases != 0 {
		t.Fatalf("after SyncAndUnlock: %+v", st)
	}
	if freed, _ := m.Spill(1 << 40); freed != 2*mib {
		t.Fatalf("spilled %d after SyncAndUnlock", freed)
	}
	err = m.LockAndLaunch(func(ptrs []gpumem.Ptr) error {
		d := gpumem.Stream{Device: 0}
		for i, p := range ptrs {
			v := byte(i + 1)
			var bad bool
			g.Launch(d, p, mib, func(mem []byte) { bad = mem[0] != v || mem[mib-1] != v })
			if err := g.StreamSynchronize(d); err != nil {
				return err
			}
			if bad {
				return fmt.Errorf("buffer %d lost its content", i)
			}
		}
		return nil
	}, x, y)
	if err != nil {
		t.Fatal(err)
	}
	// ReleaseStream drops the locks once the stream passes its event.
	if _, err := x.AcquireAsync(s); err != nil {
		t.Fatal(err)
	}
	if err := m.ReleaseStream(s); err != nil {
		t.Fatal(err)
	}
	g.StreamSynchronize(s)
	if x.Locked() {
		t.Fatal("still locked after the stream passed ReleaseStream's event")
	}
}

func TestWorkingSetThreeTimesTheDevice(t *testing.T) {
	capacity, size, nbuf, workers, rounds := uint64(4*mib), uint64(mib/2), 24, 3, 3
	if *long {
		capacity, size, nbuf, workers, rounds = 64*mib, 4*mib, 48, 4, 10
	}
	g := newSim(t, capacity, false)
	dir := t.TempDir()
	m := newManager(t, g, deferrable.Options{DiskDir: dir, HostLimit: capacity + capacity/4, StagingBytes: size / 4})
	bufs := make([]*deferrable.Buffer, nbuf)
	s0 := newStream(t, g)
	for i := range bufs {
		var err error
		if bufs[i], err = m.Alloc(size, s0); err != nil {
			t.Fatal(err)
		}
		write(t, g, bufs[i], s0, pattern(uint64(i), size))
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		s := newStream(t, g)
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for r := 1; r <= rounds; r++ {
				for i := w; i < nbuf; i += workers {
					p, err := bufs[i].Acquire(s)
					if err != nil {
						errs <- err
						return
					}
					add := byte(r)
					if err := g.Launch(s, p, size, func(mem []byte) {
						for k := range mem {
							mem[k] += add
						}
					}); err != nil {
						errs <- err
						return
					}
					if err := bufs[i].Release(); err != nil {
						errs <- err
						return
					}
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := m.Stats()
	if st.Disk.PeakBytes == 0 || st.Host.PeakBytes == 0 || st.Spilled().Count < int64(nbuf) {
		t.Fatalf("the workload did not use every tier: %+v", st)
	}
	total := byte(rounds * (rounds + 1) / 2)
	for i, b := range bufs {
		want := pattern(uint64(i), size)
		for k := range want {
			want[k] += total
		}
		if !bytes.Equal(read(t, g, b, s0), want) {
			t.Fatalf("buffer %d has the wrong result", i)
		}
	}
	closeChecked(t, m, g)
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("disk tier left %d entries", len(ents))
	}
}

func TestBadInput(t *testing.T) {
	g := newSim(t, 1<<30, false)
	if _, err := deferrable.New(nil, 0, deferrable.Options{}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("New(nil): %v", err)
	}
	if _, err := deferrable.New(g, 1, deferrable.Options{}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("New on a missing device: %v", err)
	}
	m := newManager(t, g, deferrable.Options{})
	s := newStream(t, g)
	if _, err := m.Alloc(0, s); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("Alloc(0): %v", err)
	}
	if _, err := m.Alloc(1<<62, s); !errors.Is(err, gpumem.ErrOutOfMemory) {
		t.Errorf("Alloc(huge): %v", err)
	}
	if _, err := m.Alloc(1, gpumem.Stream{Device: 3}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("Alloc on another device's stream: %v", err)
	}
	b, err := m.Alloc(100, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Release(); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("Release without Acquire: %v", err)
	}
	if err := b.ReleaseAsync(s); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("ReleaseAsync without AcquireAsync: %v", err)
	}
	if err := b.MoveTo(deferrable.TierDisk); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("move to disk without a disk tier: %v", err)
	}
	if err := b.MoveTo(deferrable.Tier(9)); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("move to a bad tier: %v", err)
	}
	if err := m.LockAndLaunch(func([]gpumem.Ptr) error { return nil }, b, nil); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("LockAndLaunch with a nil buffer: %v", err)
	}
	if b.Locked() {
		t.Error("a failed LockAndLaunch left a lock")
	}
	var nilBuf *deferrable.Buffer
	if _, err := nilBuf.Acquire(s); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("Acquire on nil: %v", err)
	}
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(s); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("Acquire after Free: %v", err)
	}
	if err := b.Free(); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("double Free: %v", err)
	}
	c, _ := m.Alloc(100, s)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"Alloc":   func() error { _, err := m.Alloc(1, s); return err }(),
		"Acquire": func() error { _, err := c.Acquire(s); return err }(),
		"Free":    c.Free(),
		"Spill":   func() error { _, err := m.Spill(1); return err }(),
		"Move":    c.MoveTo(deferrable.TierHost),
	} {
		if !errors.Is(err, gpumem.ErrClosed) {
			t.Errorf("%s after Close: %v", name, err)
		}
	}
	if m.OOMHandler()(0, 1, 0) {
		t.Error("the OOM handler of a closed manager asked for a retry")
	}
	checkLeaks(t, g)
}

func TestHistoryAndStats(t *testing.T) {
	g := newSim(t, 1<<30, false)
	m := newManager(t, g, deferrable.Options{HistorySize: 3})
	defer func() { m.Close(); checkLeaks(t, g) }()
	s := newStream(t, g)
	b, _ := m.Alloc(mib, s)
	b.MoveTo(deferrable.TierHost)
	b.MoveTo(deferrable.TierDevice)
	b.Free()
	h := m.History()
	want := []gpumem.HistoryAction{gpumem.ActionSpill, gpumem.ActionUnspill, gpumem.ActionFreeComplete}
	if len(h) != len(want) {
		t.Fatalf("history %+v", h)
	}
	for i, e := range h {
		if e.Action != want[i] || e.Size != mib || e.Device != 0 {
			t.Fatalf("entry %d: %+v, want %s", i, e, want[i])
		}
	}
	st := m.Stats()
	if st.Allocs != 1 || st.Frees != 1 || st.DeviceToHost.Bytes != mib || st.HostToDevice.Bytes != mib ||
		st.Spilled().Duration <= 0 || st.Unspilled().Duration <= 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestDiskTierIsPrivate(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("unlinking an open file is checked on Linux")
	}
	g := newSim(t, 1<<30, false)
	dir := t.TempDir()
	m := newManager(t, g, deferrable.Options{DiskDir: dir})
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the disk tier is visible in its directory: %v", ents)
	}
	closeChecked(t, m, g)
}

func TestConcurrentSpillAndAcquire(t *testing.T) {
	g := newSim(t, 8*mib, false)
	m := newManager(t, g, deferrable.Options{StagingBytes: 256 << 10})
	var wg sync.WaitGroup
	const n = 12
	bufs := make([]*deferrable.Buffer, n)
	s0 := newStream(t, g)
	for i := range bufs {
		var err error
		if bufs[i], err = m.Alloc(mib, s0); err != nil {
			t.Fatal(err)
		}
		write(t, g, bufs[i], s0, pattern(uint64(i), mib))
	}
	for w := 0; w < 4; w++ {
		s := newStream(t, g)
		wg.Add(2)
		go func(w int) {
			defer wg.Done()
			for k := 0; k < 20; k++ {
				b := bufs[(w*5+k)%n]
				if _, err := b.AcquireAsync(s); err != nil {
					t.Error(err)
					return
				}
				if err := b.ReleaseAsync(s); err != nil {
					t.Error(err)
				}
			}
		}(w)
		go func() {
			defer wg.Done()
			for k := 0; k < 10; k++ {
				m.Spill(3 * mib / 2)
				m.Stats()
			}
		}()
	}
	wg.Wait()
	for i, b := range bufs {
		if !bytes.Equal(read(t, g, b, s0), pattern(uint64(i), mib)) {
			t.Fatalf("buffer %d changed", i)
		}
	}
	closeChecked(t, m, g)
}

func TestHostLimitWithoutDisk(t *testing.T) {
	g := newSim(t, 1<<30, false)
	var unspills int
	m := newManager(t, g, deferrable.Options{HostLimit: 3 * mib, Callbacks: deferrable.Callbacks{
		Unspill: func(info deferrable.Info, from deferrable.Tier) {
			if from == deferrable.TierHost && info.Tier == deferrable.TierDevice {
				unspills++
			}
		},
	}})
	s := newStream(t, g)
	a, _ := m.Alloc(2*mib, s)
	b, _ := m.Alloc(2*mib, s)
	want := pattern(9, 2*mib)
	write(t, g, b, s, want)
	if err := a.MoveTo(deferrable.TierHost); err != nil {
		t.Fatal(err)
	}
	freed, err := m.Spill(1 << 40)
	if freed != 0 || !errors.Is(err, gpumem.ErrOutOfMemory) {
		t.Fatalf("spill past the host limit: %d %v", freed, err)
	}
	where(t, b, deferrable.TierDevice)
	if !bytes.Equal(read(t, g, b, s), want) {
		t.Fatal("data lost")
	}
	if _, err := a.Acquire(s); err != nil {
		t.Fatal(err)
	}
	a.Release()
	if unspills != 1 {
		t.Errorf("%d unspill callbacks, want 1", unspills)
	}
	closeChecked(t, m, g)
}

// Freeing a buffer whose asynchronous release is still queued frees it in
// stream order: the simulator sees no use after free.
func TestFreeAfterAsyncReleaseIsStreamOrdered(t *testing.T) {
	g := newSim(t, 1<<30, true)
	m := newManager(t, g, deferrable.Options{})
	s := newStream(t, g)
	b, _ := m.Alloc(mib, s)
	p, err := b.AcquireAsync(s)
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	g.Launch(s, p, mib, func(mem []byte) { mem[0] = 1; ran = true })
	if err := b.ReleaseAsync(s); err != nil {
		t.Fatal(err)
	}
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Fatal("the memory was freed before the kernel that used it ran")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	g.Drain()
	checkLeaks(t, g)
}

// The host tier is a pinned arena: spills land in page-locked slabs that are
// kept and reused, bounded by HostLimit, and given back by TrimHost and Close.
func TestPinnedHostArena(t *testing.T) {
	g := newSim(t, 1<<30, false)
	m := newManager(t, g, deferrable.Options{HostLimit: 8 * mib, HostSlabBytes: 4 * mib})
	s := newStream(t, g)
	var bufs []*deferrable.Buffer
	for i := 0; i < 3; i++ {
		b, err := m.Alloc(3*mib, s)
		if err != nil {
			t.Fatal(err)
		}
		write(t, g, b, s, pattern(uint64(i), b.Size()))
		bufs = append(bufs, b)
	}
	before := g.Calls("MallocHost")
	for _, b := range bufs[:2] {
		if err := b.MoveTo(deferrable.TierHost); err != nil {
			t.Fatal(err)
		}
	}
	st := m.Stats()
	if st.PinnedSlabs != 2 || st.PinnedBytes != 8*mib || g.Calls("MallocHost") != before+2 {
		t.Fatalf("two 3 MiB spills: %d slabs, %d pinned bytes, %d MallocHost calls", st.PinnedSlabs, st.PinnedBytes, g.Calls("MallocHost")-before)
	}
	// The limit holds the pinned bytes too: a third buffer does not fit.
	if err := bufs[2].MoveTo(deferrable.TierHost); !errors.Is(err, gpumem.ErrOutOfMemory) {
		t.Fatalf("spill past the host limit: %v", err)
	}
	// Round trips reuse the slabs: no more pinning.
	for k := 0; k < 3; k++ {
		for _, b := range bufs[:2] {
			if err := b.MoveTo(deferrable.TierDevice); err != nil {
				t.Fatal(err)
			}
			if err := b.MoveTo(deferrable.TierHost); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := g.Calls("MallocHost") - before; n != 2 {
		t.Fatalf("round trips pinned memory again: %d MallocHost calls", n)
	}
	for i, b := range bufs {
		if !bytes.Equal(read(t, g, b, s), pattern(uint64(i), b.Size())) {
			t.Fatalf("buffer %d changed", i)
		}
	}
	// Every buffer is back on the device: the slabs are kept until trimmed.
	if st := m.Stats(); st.PinnedBytes != 8*mib || st.Host.Bytes != 0 {
		t.Fatalf("after unspilling everything: %+v", st)
	}
	if n, err := m.TrimHost(); err != nil || n != 8*mib {
		t.Fatalf("TrimHost: %d %v", n, err)
	}
	if st := m.Stats(); st.PinnedBytes != 0 || st.PinnedSlabs != 0 || st.PinnedPeakBytes != 8*mib {
		t.Fatalf("after TrimHost: %+v", st)
	}
	// A buffer left on the host is freed with the arena by Close.
	if err := bufs[0].MoveTo(deferrable.TierHost); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.TrimHost(); !errors.Is(err, gpumem.ErrClosed) {
		t.Fatalf("TrimHost after Close: %v", err)
	}
	checkLeaks(t, g)
}
