package deferrable_test

import (
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/deferrable"
	_ "github.com/gpumem/gpumem/driver"
)

// openGPU opens the CUDA backend, or skips the test saying why.
func openGPU(t *testing.T) gpumem.Backend {
	t.Helper()
	b, err := gpumem.Open(gpumem.Options{Backend: "cuda"})
	if err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	if n, err := b.DeviceCount(); err != nil || n == 0 {
		b.Close()
		t.Skipf("no CUDA device: %d devices, %v", n, err)
	}
	name, _ := b.DeviceName(0)
	v, _ := b.Version()
	t.Logf("device 0: %s, driver API %d", name, v.Driver)
	t.Cleanup(func() { b.Close() })
	return b
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func gbps(n uint64, d time.Duration) float64 { return float64(n) / d.Seconds() / 1e9 }

// pinnedBandwidth times MemcpyAsync of size bytes between pinned host memory
// and device memory on s, each direction to stream completion, best of five
// after one warm-up copy.
func pinnedBandwidth(t *testing.T, b gpumem.Backend, s gpumem.Stream, size uint64) (h2d, d2h float64) {
	t.Helper()
	h, err := b.MallocHost(size)
	must(t, err)
	defer b.FreeHost(h)
	d, err := b.Malloc(0, size)
	must(t, err)
	defer b.Free(0, d)
	best := func(dst, src gpumem.Ptr) float64 {
		var top float64
		for i := 0; i < 6; i++ {
			start := time.Now()
			must(t, b.MemcpyAsync(dst, src, size, s))
			must(t, b.StreamSynchronize(s))
			if g := gbps(size, time.Since(start)); i > 0 && g > top {
				top = g
			}
		}
		return top
	}
	return best(d, h), best(h, d)
}

// fill writes a pattern naming (id, round) into every 8-byte word of p.
func fill(p []byte, id, round uint64) {
	w := unsafe.Slice((*uint64)(unsafe.Pointer(&p[0])), len(p)/8)
	for k := range w {
		w[k] = id<<48 | round<<40 | uint64(k)
	}
}

// mismatch returns the first word of p that does not hold fill's pattern, or -1.
func mismatch(p []byte, id, round uint64) int {
	w := unsafe.Slice((*uint64)(unsafe.Pointer(&p[0])), len(p)/8)
	for k := range w {
		if w[k] != id<<48|round<<40|uint64(k) {
			return k
		}
	}
	return -1
}

// TestGPUSpillBandwidth measures spill (device to pinned host tier) and
// unspill (back) of 64 MiB and 1 GiB buffers against the pinned copy
// bandwidth of the same device in the same run, and requires 85% of it in the
// steady state (after a round that grew the pinned arena).
func TestGPUSpillBandwidth(t *testing.T) {
	b := openGPU(t)
	s, err := b.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	must(t, err)
	defer b.StreamDestroy(s)
	const steady = 3
	for _, size := range []uint64{64 << 20, 1 << 30} {
		h2d, d2h := pinnedBandwidth(t, b, s, size)
		m, err := deferrable.New(b, 0, deferrable.Options{HistorySize: -1})
		must(t, err)
		buf, err := m.Alloc(size, s)
		must(t, err)
		host := make([]byte, size)
		fill(host, 1, 0)
		p, err := buf.Acquire(s)
		must(t, err)
		must(t, b.StreamSynchronize(s))
		must(t, b.CopyToDevice(p, host))
		must(t, buf.Release())

		round := func() (spill, unspill time.Duration) {
			start := time.Now()
			must(t, buf.MoveTo(deferrable.TierHost))
			spill = time.Since(start)
			start = time.Now()
			must(t, buf.MoveTo(deferrable.TierDevice))
			return spill, time.Since(start)
		}
		// Cold: the arena pins its first slab during the spill.
		cs, cu := round()
		st := m.Stats()
		t.Logf("%s cold: spill %.1f GB/s copy (%.1f GB/s wall, pinned %s), unspill %.1f GB/s copy (%.1f GB/s wall)",
			gpumem.FormatBytes(size), st.DeviceToHost.BytesPerSecond()/1e9, gbps(size, cs), gpumem.FormatBytes(st.PinnedBytes),
			st.HostToDevice.BytesPerSecond()/1e9, gbps(size, cu))
		m.ResetTransferStats()
		var ws, wu time.Duration
		for i := 0; i < steady; i++ {
			sp1, un1 := round()
			ws += sp1
			wu += un1
		}
		st = m.Stats()
		sp, un := st.DeviceToHost.BytesPerSecond()/1e9, st.HostToDevice.BytesPerSecond()/1e9
		t.Logf("%s pinned copy: host->device %.1f GB/s, device->host %.1f GB/s", gpumem.FormatBytes(size), h2d, d2h)
		t.Logf("%s steady (%d rounds): spill %.1f GB/s = %.2f of pinned device->host (wall %.1f GB/s); unspill %.1f GB/s = %.2f of pinned host->device (wall %.1f GB/s)",
			gpumem.FormatBytes(size), steady, sp, sp/d2h, gbps(steady*size, ws), un, un/h2d, gbps(steady*size, wu))
		fmt.Printf("RESULT size=%s pinned_h2d=%.1f pinned_d2h=%.1f cold_spill=%.1f cold_unspill=%.1f spill=%.1f spill_ratio=%.2f unspill=%.1f unspill_ratio=%.2f spill_wall=%.1f unspill_wall=%.1f\n",
			gpumem.FormatBytes(size), h2d, d2h, gbps(size, cs), gbps(size, cu), sp, sp/d2h, un, un/h2d, gbps(steady*size, ws), gbps(steady*size, wu))
		if st.DeviceToHost.Count != steady || st.HostToDevice.Count != steady {
			t.Errorf("%d spills and %d unspills counted, want %d each", st.DeviceToHost.Count, st.HostToDevice.Count, steady)
		}
		if sp < 0.85*d2h {
			t.Errorf("%s spill at %.1f GB/s is below 85%% of the pinned %.1f GB/s", gpumem.FormatBytes(size), sp, d2h)
		}
		if un < 0.85*h2d {
			t.Errorf("%s unspill at %.1f GB/s is below 85%% of the pinned %.1f GB/s", gpumem.FormatBytes(size), un, h2d)
		}
		// The bytes survived every round trip.
		p, err = buf.Acquire(s)
		must(t, err)
		must(t, b.StreamSynchronize(s))
		clear(host)
		must(t, b.CopyFromDevice(host, p))
		must(t, buf.Release())
		if k := mismatch(host, 1, 0); k >= 0 {
			t.Errorf("%s buffer changed at word %d", gpumem.FormatBytes(size), k)
		}
		must(t, m.Close())
	}
}

// TestGPUWorkingSetThreeTimesTheDeviceLimit runs 6 GiB of buffers through a
// manager whose device limit is 2 GiB: each round acquires every buffer,
// checks the pattern the previous round wrote and writes a new one.
func TestGPUWorkingSetThreeTimesTheDeviceLimit(t *testing.T) {
	b := openGPU(t)
	const limit, size, nbuf, rounds = 2 << 30, 256 << 20, 24, 3
	if free, _, err := b.MemInfo(0); err != nil || free < limit+limit/2 {
		t.Skipf("the device has %s free (%v); the test needs %s", gpumem.FormatBytes(free), err, gpumem.FormatBytes(limit+limit/2))
	}
	s, err := b.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	must(t, err)
	defer b.StreamDestroy(s)
	m, err := deferrable.New(b, 0, deferrable.Options{DeviceLimit: limit, HistorySize: -1})
	must(t, err)
	defer m.Close()
	bufs := make([]*deferrable.Buffer, nbuf)
	for i := range bufs {
		bufs[i], err = m.Alloc(size, s)
		must(t, err)
	}
	host := make([]byte, size)
	start := time.Now()
	for r := uint64(1); r <= rounds; r++ {
		for i, buf := range bufs {
			p, err := buf.Acquire(s)
			must(t, err)
			must(t, b.StreamSynchronize(s))
			if r > 1 {
				must(t, b.CopyFromDevice(host, p))
				if k := mismatch(host, uint64(i), r-1); k >= 0 {
					t.Fatalf("round %d: buffer %d lost its data at word %d", r, i, k)
				}
			}
			fill(host, uint64(i), r)
			must(t, b.CopyToDevice(p, host))
			must(t, buf.Release())
		}
	}
	elapsed := time.Since(start)
	for i, buf := range bufs {
		p, err := buf.Acquire(s)
		must(t, err)
		must(t, b.StreamSynchronize(s))
		must(t, b.CopyFromDevice(host, p))
		must(t, buf.Release())
		if k := mismatch(host, uint64(i), rounds); k >= 0 {
			t.Fatalf("buffer %d lost its data at word %d", i, k)
		}
	}
	st := m.Stats()
	t.Logf("working set %s, device limit %s, %d rounds in %v: device peak %s, host peak %s, pinned peak %s; %d spills (%.1f GB/s), %d unspills (%.1f GB/s)",
		gpumem.FormatBytes(nbuf*size), gpumem.FormatBytes(limit), rounds, elapsed.Round(time.Millisecond),
		gpumem.FormatBytes(st.Device.PeakBytes), gpumem.FormatBytes(st.Host.PeakBytes), gpumem.FormatBytes(st.PinnedPeakBytes),
		st.DeviceToHost.Count, st.DeviceToHost.BytesPerSecond()/1e9, st.HostToDevice.Count, st.HostToDevice.BytesPerSecond()/1e9)
	fmt.Printf("RESULT workingset=%s limit=%s device_peak=%s host_peak=%s pinned_peak=%s spills=%d spill_GBps=%.1f unspills=%d unspill_GBps=%.1f elapsed=%v\n",
		gpumem.FormatBytes(nbuf*size), gpumem.FormatBytes(limit), gpumem.FormatBytes(st.Device.PeakBytes), gpumem.FormatBytes(st.Host.PeakBytes),
		gpumem.FormatBytes(st.PinnedPeakBytes), st.DeviceToHost.Count, st.DeviceToHost.BytesPerSecond()/1e9, st.HostToDevice.Count,
		st.HostToDevice.BytesPerSecond()/1e9, elapsed.Round(time.Millisecond))
	if st.Device.PeakBytes > limit {
		t.Errorf("device peak %s passed the limit %s", gpumem.FormatBytes(st.Device.PeakBytes), gpumem.FormatBytes(limit))
	}
	if least := int64(rounds * (nbuf - limit/size)); st.DeviceToHost.Count < least || st.HostToDevice.Count < least {
		t.Errorf("%d spills and %d unspills, want at least %d each", st.DeviceToHost.Count, st.HostToDevice.Count, least)
	}
}
