package managed

// The GPU tier: runs whenever a CUDA device is present, skips saying why
// otherwise. Managed memory stays well under a quarter of the device's free
// memory and is never oversubscribed.

import (
	"sort"
	"testing"
	"time"

	"github.com/gpumem/gpumem"
	_ "github.com/gpumem/gpumem/driver"
)

// openGPU opens the CUDA backend and checks that need bytes of managed
// memory stay under a quarter of device 0's free memory.
func openGPU(t *testing.T, need uint64) gpumem.Backend {
	t.Helper()
	b, err := gpumem.Open(gpumem.Options{Backend: "cuda"})
	if err != nil {
		t.Skipf("no CUDA device here: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	free, total, err := b.MemInfo(0)
	if err != nil {
		t.Fatal(err)
	}
	if need >= free/4 {
		t.Skipf("%s of managed memory would not stay under a quarter of the %s free", gpumem.FormatBytes(need), gpumem.FormatBytes(free))
	}
	name, _ := b.DeviceName(0)
	v, _ := b.Version()
	cma, _ := b.DeviceAttribute(0, gpumem.AttrConcurrentManagedAccess)
	t.Logf("%s, driver %d, %s free of %s, concurrent managed access %d", name, v.Driver, gpumem.FormatBytes(free), gpumem.FormatBytes(total), cma)
	return b
}

func gbps(n uint64, d time.Duration) float64 { return float64(n) / d.Seconds() / 1e9 }

// best runs fn reps times and returns its shortest duration.
func best(t *testing.T, reps int, fn func() error) time.Duration {
	t.Helper()
	var m time.Duration
	for i := 0; i < reps; i++ {
		start := time.Now()
		if err := fn(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); i == 0 || d < m {
			m = d
		}
	}
	return m
}

// TestGPUManagedMoveBandwidth compares To(device) and To(host) of a 1 GiB
// managed buffer with pinned copies of 1 GiB, in the same run; the issue's
// goal is a ratio of at least 0.9.
func TestGPUManagedMoveBandwidth(t *testing.T) {
	const n = 1 << 30
	raw := openGPU(t, n)
	tb := &timedBackend{Backend: raw}
	b := gpumem.Backend(tb)
	a, err := New(b, Options{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s, err := b.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.StreamDestroy(s)
	dev, hostLoc := gpumem.DeviceLocation(0), gpumem.HostLocation()

	// Pinned copies.
	hp, err := b.MallocHost(n)
	if err != nil {
		t.Fatal(err)
	}
	defer b.FreeHost(hp)
	dp, err := b.Malloc(0, n)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(0, dp)
	if err := b.Memset(hp, 1, n); err != nil {
		t.Fatal(err)
	}
	copyOn := func(dst, src gpumem.Ptr) func() error {
		return func() error {
			if err := b.MemcpyAsync(dst, src, n, s); err != nil {
				return err
			}
			return b.StreamSynchronize(s)
		}
	}
	h2d := best(t, 5, copyOn(dp, hp))
	d2h := best(t, 5, copyOn(hp, dp))

	buf, err := a.Alloc(n, dev, s)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	if err := b.MemsetAsync(buf.Ptr, 2, n, s); err != nil {
		t.Fatal(err)
	}
	if err := b.StreamSynchronize(s); err != nil {
		t.Fatal(err)
	}
	var toHost, toDev, advHost, advDev time.Duration
	for i := 0; i < 5; i++ {
		tb.adv = 0
		dh := best(t, 1, func() error { _, err := buf.To(hostLoc, ToOptions{Stream: s}); return err })
		if err := a.VerifyResidency(); err != nil {
			t.Fatalf("after To(host): %v", err)
		}
		if r := a.Residency(); r[hostLoc] != n {
			t.Fatalf("residency after To(host): %v", r)
		}
		ah := tb.adv
		tb.adv = 0
		hd := best(t, 1, func() error {
			if _, err := buf.To(dev, ToOptions{Stream: s}); err != nil {
				return err
			}
			return b.StreamSynchronize(s)
		})
		if err := a.VerifyResidency(); err != nil {
			t.Fatalf("after To(device): %v", err)
		}
		if i == 0 || dh < toHost {
			toHost, advHost = dh, ah
		}
		if i == 0 || hd < toDev {
			toDev, advDev = hd, tb.adv
		}
	}
	got := make([]byte, 4096)
	if err := b.CopyFromDevice(got, buf.Ptr.Add(n-4096)); err != nil {
		t.Fatal(err)
	}
	for _, x := range got {
		if x != 2 {
			t.Fatal("data changed by the moves")
		}
	}
	t.Logf("1 GiB  pinned H2D %.1f GB/s  To(device) %.1f GB/s  ratio %.2f", gbps(n, h2d), gbps(n, toDev), h2d.Seconds()/toDev.Seconds())
	t.Logf("1 GiB  pinned D2H %.1f GB/s  To(host)   %.1f GB/s  ratio %.2f", gbps(n, d2h), gbps(n, toHost), d2h.Seconds()/toHost.Seconds())
	t.Logf("advice time within the moves: To(device) %v of %v, To(host) %v of %v", advDev, toDev, advHost, toHost)
}

// TestGPUManagedBlockSizes measures, per managed segment size, the latency
// of cuMemAllocManaged+cuMemFree and the bandwidth of prefetching a
// device-resident segment to the host and back, so that the segment size
// (Options.SegmentSize) can be chosen from figures.
func TestGPUManagedBlockSizes(t *testing.T) {
	sizes := []uint64{2 << 20, 20 << 20, 64 << 20, 256 << 20, 1 << 30}
	b := openGPU(t, sizes[len(sizes)-1])
	s, err := b.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.StreamDestroy(s)
	t.Logf("%10s %14s %14s %14s", "segment", "alloc+free µs", "D->H GB/s", "H->D GB/s")
	for _, size := range sizes {
		reps := 50
		if size >= 256<<20 {
			reps = 10
		}
		lat := make([]time.Duration, 0, reps)
		for i := 0; i < reps; i++ {
			start := time.Now()
			p, err := b.MallocManaged(0, size)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Free(0, p); err != nil {
				t.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		p, err := b.MallocManaged(0, size)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.MemsetAsync(p, 3, size, s); err != nil {
			t.Fatal(err)
		}
		if err := b.StreamSynchronize(s); err != nil {
			t.Fatal(err)
		}
		prefetch := func(loc gpumem.Location) func() error {
			return func() error {
				if err := b.Prefetch(p, size, loc, s); err != nil {
					return err
				}
				return b.StreamSynchronize(s)
			}
		}
		var dh, hd time.Duration
		for i := 0; i < 5; i++ {
			x := best(t, 1, prefetch(gpumem.HostLocation()))
			y := best(t, 1, prefetch(gpumem.DeviceLocation(0)))
			if i == 0 || x < dh {
				dh = x
			}
			if i == 0 || y < hd {
				hd = y
			}
		}
		if err := b.Free(0, p); err != nil {
			t.Fatal(err)
		}
		t.Logf("%10s %14.1f %14.1f %14.1f", gpumem.FormatBytes(size), float64(lat[len(lat)/2].Nanoseconds())/1e3, gbps(size, dh), gbps(size, hd))
	}
}

// timedBackend adds up the time spent in Advise (single goroutine use).
type timedBackend struct {
	gpumem.Backend
	adv time.Duration
}

func (b *timedBackend) Advise(p gpumem.Ptr, size uint64, advice gpumem.Advice, loc gpumem.Location) error {
	start := time.Now()
	err := b.Backend.Advise(p, size, advice, loc)
	b.adv += time.Since(start)
	return err
}
