package tests

// Many devices in one process, on simulated machines of two and four
// devices: per-device accounting, peer rules, and every allocator serving
// every device from many goroutines at once.

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/backendtest"
	"github.com/gpumem/gpumem/managed"
	"github.com/gpumem/gpumem/sim"
)

// multiPairs is a four-device machine in which devices {0,1} and {2,3}
// can access each other but no device can access one of the other pair.
func multiPairs(a, b int) bool { return a/2 == b/2 }

func multiSim(t *testing.T, ndev int, peer func(a, b int) bool) *sim.GPU {
	t.Helper()
	devs := make([]sim.DeviceConfig, ndev)
	for i := range devs {
		devs[i] = sim.DeviceConfig{Capacity: 4 << 30}
	}
	return simOpen(sim.Config{Devices: devs, Peer: peer})(t).(*sim.GPU)
}

func TestMultiSimConformanceEveryDevice(t *testing.T) {
	cfg := sim.Config{Devices: make([]sim.DeviceConfig, 4), Peer: multiPairs}
	for dev := 0; dev < 4; dev++ {
		t.Run(string(rune('0'+dev)), func(t *testing.T) {
			backendtest.RunDevice(t, dev, simOpen(cfg))
		})
	}
}

func TestMultiSimPeerRules(t *testing.T) {
	g := multiSim(t, 4, multiPairs)
	for a := 0; a < 4; a++ {
		for b := 0; b < 4; b++ {
			ok, err := g.CanAccessPeer(a, b)
			if err != nil {
				t.Fatal(err)
			}
			if want := a != b && multiPairs(a, b); ok != want {
				t.Errorf("CanAccessPeer(%d, %d) = %v, want %v", a, b, ok, want)
			}
		}
	}
	if err := g.EnablePeerAccess(0, 2); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("EnablePeerAccess(0, 2) across pairs: %v, want ErrNotSupported", err)
	}
	if err := g.EnablePeerAccess(3, 1); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("EnablePeerAccess(3, 1) across pairs: %v, want ErrNotSupported", err)
	}
	if err := g.DisablePeerAccess(0, 1); err == nil {
		t.Errorf("DisablePeerAccess of access never enabled succeeded")
	}
	for _, p := range [][2]int{{0, 1}, {1, 0}, {2, 3}, {3, 2}} {
		if err := g.EnablePeerAccess(p[0], p[1]); err != nil {
			t.Errorf("EnablePeerAccess(%d, %d) within a pair: %v", p[0], p[1], err)
		}
	}

	const n = 1 << 20
	ptr := make([]gpumem.Ptr, 4)
	for d := range ptr {
		p, err := g.Malloc(d, n)
		if err != nil {
			t.Fatal(err)
		}
		ptr[d] = p
		defer g.Free(d, p)
	}
	want := multiPattern(n, 3)
	if err := g.CopyToDevice(ptr[0], want); err != nil {
		t.Fatal(err)
	}
	s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.StreamDestroy(s)
	if err := g.MemcpyPeerAsync(ptr[2], 2, ptr[0], 0, n, s); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("MemcpyPeerAsync 0 to 2 across pairs: %v, want ErrNotSupported", err)
	}
	if err := g.MemcpyPeerAsync(ptr[1], 1, ptr[0], 0, n, s); err != nil {
		t.Fatalf("MemcpyPeerAsync 0 to 1: %v", err)
	}
	if err := g.StreamSynchronize(s); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if err := g.CopyFromDevice(got, ptr[1]); err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Error("peer copy from device 0 to 1 differs")
	}

	pool, err := g.DefaultMemPool(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.MemPoolSetAccess(pool, 2, gpumem.AccessReadWrite); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("MemPoolSetAccess of device 0's pool for device 2: %v, want ErrNotSupported", err)
	}
	if err := g.MemPoolSetAccess(pool, 1, gpumem.AccessReadWrite); err != nil {
		t.Errorf("MemPoolSetAccess of device 0's pool for device 1: %v", err)
	}
	_ = g.MemPoolSetAccess(pool, 1, gpumem.AccessNone)
	for _, p := range [][2]int{{0, 1}, {1, 0}, {2, 3}, {3, 2}} {
		if err := g.DisablePeerAccess(p[0], p[1]); err != nil {
			t.Errorf("DisablePeerAccess(%d, %d): %v", p[0], p[1], err)
		}
	}
}

func TestMultiSimAsyncpoolPeerAccess(t *testing.T) {
	g := multiSim(t, 4, multiPairs)
	a, err := asyncpool.New(g, asyncpool.Options{OwnPool: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.EnablePeer(0, 1); err != nil {
		t.Errorf("EnablePeer(0, 1) within a pair: %v", err)
	}
	if err := a.EnablePeer(2, 3); err != nil {
		t.Errorf("EnablePeer(2, 3) within a pair: %v", err)
	}
	for _, p := range [][2]int{{0, 2}, {1, 3}, {3, 0}} {
		if err := a.EnablePeer(p[0], p[1]); !errors.Is(err, gpumem.ErrNotSupported) {
			t.Errorf("EnablePeer(%d, %d) across pairs: %v, want ErrNotSupported", p[0], p[1], err)
		}
	}
	// Options.PeerAccess grants device 1 access to every pool when the pool
	// is first used: device 0 can, device 2 cannot.
	b, err := asyncpool.New(g, asyncpool.Options{OwnPool: true, PeerAccess: []int{1}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	p, err := b.Allocate(4096, gpumem.Stream{Device: 0})
	if err != nil {
		t.Fatalf("allocating on device 0 with device 1 as peer: %v", err)
	}
	if err := b.Deallocate(p, gpumem.Stream{Device: 0}); err != nil {
		t.Fatal(err)
	}
	if p, err := b.Allocate(4096, gpumem.Stream{Device: 2}); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("allocating on device 2 with device 1 (not its peer) as peer: %v, want ErrNotSupported", err)
		if err == nil {
			_ = b.Deallocate(p, gpumem.Stream{Device: 2})
		}
	}
}

// adviceLog records the accessed-by advice given through a backend.
type adviceLog struct {
	gpumem.Backend
	mu  sync.Mutex
	set map[gpumem.Ptr]map[int]int // pointer -> device -> set minus unset
}

func (l *adviceLog) Advise(p gpumem.Ptr, size uint64, adv gpumem.Advice, loc gpumem.Location) error {
	err := l.Backend.Advise(p, size, adv, loc)
	if err == nil && (adv == gpumem.AdviseSetAccessedBy || adv == gpumem.AdviseUnsetAccessedBy) {
		l.mu.Lock()
		if l.set[p] == nil {
			l.set[p] = map[int]int{}
		}
		if adv == gpumem.AdviseSetAccessedBy {
			l.set[p][loc.Device]++
		} else {
			l.set[p][loc.Device]--
		}
		l.mu.Unlock()
	}
	return err
}

func (l *adviceLog) accessedBy(p gpumem.Ptr, dev int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.set[p][dev]
}

func TestMultiSimManagedReaders(t *testing.T) {
	g := multiSim(t, 4, multiPairs)
	log := &adviceLog{Backend: g, set: map[gpumem.Ptr]map[int]int{}}
	a, err := managed.New(log, managed.Options{Force: true, SegmentSize: 2 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s := gpumem.Stream{Device: 0}
	buf, err := a.Alloc(4<<20, gpumem.DeviceLocation(0), s)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []int{1, 3, 1} {
		if err := buf.AddReader(d); err != nil {
			t.Fatalf("AddReader(%d): %v", d, err)
		}
	}
	if got := buf.Readers(); len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Errorf("Readers = %v, want [1 3]", got)
	}
	for _, d := range []int{1, 3} {
		if n := log.accessedBy(buf.Ptr, d); n != 1 {
			t.Errorf("device %d advised as accessing the buffer %d times (set minus unset), want 1", d, n)
		}
	}
	if n := log.accessedBy(buf.Ptr, 2); n != 0 {
		t.Errorf("device 2, never a reader, advised %d times", n)
	}
	if err := buf.AddReader(4); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("AddReader(4) of 4 devices: %v, want ErrInvalidValue", err)
	}
	if err := buf.RemoveReader(2); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("RemoveReader of a device that is not a reader: %v, want ErrInvalidValue", err)
	}
	if err := buf.RemoveReader(3); err != nil {
		t.Fatal(err)
	}
	if n := log.accessedBy(buf.Ptr, 3); n != 0 {
		t.Errorf("device 3 still advised (%d) after RemoveReader", n)
	}
	// Moving to the host advises no device as accessing (not device 0, the
	// device it leaves), and neither that move nor the move back takes
	// device 1's reader advice away.
	if _, err := buf.To(gpumem.HostLocation(), managed.ToOptions{Stream: s}); err != nil {
		t.Fatal(err)
	}
	if n := log.accessedBy(buf.Ptr, 0); n != 0 {
		t.Errorf("device 0 advised as accessing (%d) after a move to the host, want 0", n)
	}
	if n := log.accessedBy(buf.Ptr, 1); n != 1 {
		t.Errorf("reader device 1 advised %d times after a move to the host, want 1", n)
	}
	if _, err := buf.To(gpumem.DeviceLocation(0), managed.ToOptions{Stream: s}); err != nil {
		t.Fatal(err)
	}
	if n := log.accessedBy(buf.Ptr, 1); n != 1 {
		t.Errorf("reader device 1 advised %d times after moves, want 1", n)
	}
	p := buf.Ptr
	if err := buf.Free(); err != nil {
		t.Fatal(err)
	}
	for d := 0; d < 4; d++ {
		if n := log.accessedBy(p, d); n != 0 {
			t.Errorf("device %d still advised as accessing (%d) a freed block", d, n)
		}
	}
	if err := buf.AddReader(1); err == nil {
		t.Error("AddReader after Free succeeded")
	}
}

// TestMultiSimStatsIsolation: allocations on one device never show in
// another device's statistics.
func TestMultiSimStatsIsolation(t *testing.T) {
	for _, mk := range multiAllocators(0) {
		t.Run(mk.name, func(t *testing.T) {
			g := multiSim(t, 2, nil)
			a, err := mk.open(g, 2)
			if err != nil {
				t.Fatal(err)
			}
			s1 := gpumem.Stream{Device: 1}
			var frees []func() error
			var want uint64
			for _, size := range []uint64{512, 3000, 1 << 20, 5 << 20} {
				_, free, err := a.alloc(size, s1)
				if err != nil {
					t.Fatal(err)
				}
				frees = append(frees, free)
				want += size
			}
			if a.stats != nil {
				st0, st1 := a.stats(0), a.stats(1)
				if st0.Allocation[gpumem.StatAll].Current != 0 || st0.AllocatedBytes[gpumem.StatAll].Current != 0 ||
					st0.ReservedBytes[gpumem.StatAll].Current != 0 || st0.Allocation[gpumem.StatAll].Allocated != 0 {
					t.Errorf("device 0's stats show device 1's allocations: %+v", st0.Allocation[gpumem.StatAll])
				}
				if got := st1.Allocation[gpumem.StatAll].Current; got != 4 {
					t.Errorf("device 1 counts %d live allocations, want 4", got)
				}
				if got := st1.AllocatedBytes[gpumem.StatAll].Current; got < int64(want) {
					t.Errorf("device 1 counts %d allocated bytes, want at least %d", got, want)
				}
			}
			free0, total0, _ := g.MemInfo(0)
			if free0 != total0 {
				t.Errorf("device 0 has %d of %d bytes free with allocations on device 1 only", free0, total0)
			}
			// Managed memory occupies a device only once its pages move there.
			if free1, total1, _ := g.MemInfo(1); mk.name != "managed" && total1-free1 < want {
				t.Errorf("device 1 uses %d bytes, want at least %d", total1-free1, want)
			}
			for _, f := range frees {
				if err := f(); err != nil {
					t.Error(err)
				}
			}
			if a.stats != nil {
				if got := a.stats(1).Allocation[gpumem.StatAll].Current; got != 0 {
					t.Errorf("device 1 counts %d live allocations after freeing all", got)
				}
			}
			if err := a.close(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestMultiSimConcurrent: 64 goroutines spread over the devices allocate,
// write, check and free through one allocator; each device's statistics
// count exactly the allocations made on it.
func TestMultiSimConcurrent(t *testing.T) {
	for _, ndev := range []int{2, 4} {
		for _, mk := range multiAllocators(0) {
			t.Run(string(rune('0'+ndev))+"dev/"+mk.name, func(t *testing.T) {
				g := multiSim(t, ndev, multiPairs)
				a, err := mk.open(g, ndev)
				if err != nil {
					t.Fatal(err)
				}
				streams, err := multiStreams(g, ndev, 64)
				if err != nil {
					t.Fatal(err)
				}
				load := &multiLoad{minSize: 512, maxSize: 2 << 20, sample: 256, iterations: 12, hold: 3,
					counts: make([]atomic.Int64, ndev), bytes: make([]atomic.Int64, ndev)}
				for _, err := range multiRun(g, a, streams, load) {
					t.Error(err)
				}
				if a.stats != nil {
					for d := 0; d < ndev; d++ {
						st := a.stats(d)
						if got, want := st.Allocation[gpumem.StatAll].Allocated, load.counts[d].Load(); got != want {
							t.Errorf("device %d counts %d allocations, its goroutines made %d", d, got, want)
						}
						if got := st.Allocation[gpumem.StatAll].Current; got != 0 {
							t.Errorf("device %d counts %d live allocations after every free", d, got)
						}
					}
				}
				if err := a.close(); err != nil {
					t.Error(err)
				}
				if err := multiDestroyStreams(g, streams); err != nil {
					t.Error(err)
				}
			})
		}
	}
}
