package tests

// Many devices on a real machine: runs whenever a CUDA backend opens with
// two devices or more, and skips saying why otherwise.

import (
	"bytes"
	"flag"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/backendtest"
)

var multiDuration = flag.Duration("gpumem.multi-duration", 60*time.Second,
	"how long each allocator serves both devices in TestGPUMultiAllocators")

// multiGPU opens the CUDA backend and skips unless it has two devices.
func multiGPU(t *testing.T) gpumem.Backend {
	t.Helper()
	b, err := gpumem.Open(gpumem.Options{Backend: "cuda"})
	if err != nil {
		t.Skipf("no CUDA device here: %v", err)
	}
	n, err := b.DeviceCount()
	if err != nil || n < 2 {
		_ = b.Close()
		t.Skipf("these tests need two CUDA devices; the backend reports %d (%v)", n, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// The conformance suite on device 1 (TestConformanceCUDAGPU covers device 0).
func TestGPUMultiConformanceDevice1(t *testing.T) {
	multiGPU(t)
	backendtest.RunDevice(t, 1, simOpenVendor("cuda"))
}

// TestGPUMultiPeerCopy copies 1 GiB from device 0 to device 1 and back with
// MemcpyPeerAsync, checks every byte, and reports the best of five timed
// copies in each direction.
func TestGPUMultiPeerCopy(t *testing.T) {
	b := multiGPU(t)
	for _, p := range [][2]int{{0, 1}, {1, 0}} {
		ok, err := b.CanAccessPeer(p[0], p[1])
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Skipf("device %d cannot access device %d", p[0], p[1])
		}
		if err := b.EnablePeerAccess(p[0], p[1]); err != nil {
			t.Fatal(err)
		}
		defer b.DisablePeerAccess(p[0], p[1])
	}
	const n = 1 << 30
	alloc := func(dev int) gpumem.Ptr {
		p, err := b.Malloc(dev, n)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Free(dev, p) })
		return p
	}
	src, mid, back := alloc(0), alloc(1), alloc(0)
	want := multiPattern(n, 0x5a)
	if err := b.CopyToDevice(src, want); err != nil {
		t.Fatal(err)
	}
	if err := b.Memset(mid, 0, n); err != nil {
		t.Fatal(err)
	}
	if err := b.Memset(back, 0, n); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	dirs := []struct {
		name   string
		dst    gpumem.Ptr
		dstDev int
		from   gpumem.Ptr
		srcDev int
	}{{"0to1", mid, 1, src, 0}, {"1to0", back, 0, mid, 1}}
	for _, d := range dirs {
		s, err := b.StreamCreate(d.srcDev, gpumem.StreamNonBlocking, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer b.StreamDestroy(s)
		start, err := b.EventCreate(d.srcDev, gpumem.EventDefault)
		if err != nil {
			t.Fatal(err)
		}
		defer b.EventDestroy(start)
		end, err := b.EventCreate(d.srcDev, gpumem.EventDefault)
		if err != nil {
			t.Fatal(err)
		}
		defer b.EventDestroy(end)
		best := float32(0)
		for i := 0; i < 5; i++ {
			if err := b.EventRecord(start, s); err != nil {
				t.Fatal(err)
			}
			if err := b.MemcpyPeerAsync(d.dst, d.dstDev, d.from, d.srcDev, n, s); err != nil {
				t.Fatal(err)
			}
			if err := b.EventRecord(end, s); err != nil {
				t.Fatal(err)
			}
			if err := b.EventSynchronize(end); err != nil {
				t.Fatal(err)
			}
			ms, err := b.EventElapsed(start, end)
			if err != nil {
				t.Fatal(err)
			}
			if best == 0 || ms < best {
				best = ms
			}
		}
		if err := b.CopyFromDevice(got, d.dst); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			i := 0
			for i < n && got[i] == want[i] {
				i++
			}
			t.Fatalf("peer copy %s: byte %d is %#x, want %#x", d.name, i, got[i], want[i])
		}
		gbps := float64(n) / (float64(best) / 1e3) / 1e9
		t.Logf("peer_GBps %s %.1f (best of 5: %.3f ms for %s, every byte checked)", d.name, gbps, best, gpumem.FormatBytes(n))
		fmt.Printf("peer_GBps %s %.1f\n", d.name, gbps)
	}
}

// TestGPUMultiAllocators: each allocator serves both devices from 32
// goroutines at once for -gpumem.multi-duration, every block written and
// read back at both ends. Live memory stays near 2 GiB per device; the
// managed allocator's guard is set to 4 GiB in all, well under one device.
func TestGPUMultiAllocators(t *testing.T) {
	b := multiGPU(t)
	_, total, err := b.MemInfo(0)
	if err != nil {
		t.Fatal(err)
	}
	managedFraction := float64(4<<30) / float64(total)
	for _, mk := range multiAllocators(managedFraction) {
		t.Run(mk.name, func(t *testing.T) {
			a, err := mk.open(b, 2)
			if err != nil {
				t.Fatal(err)
			}
			streams, err := multiStreams(b, 2, 32)
			if err != nil {
				t.Fatal(err)
			}
			hold := 2
			if mk.name == "managed" {
				hold = 1 // 32 blocks of at most 64 MiB: 2 GiB live at most
			}
			load := &multiLoad{minSize: 512, maxSize: 64 << 20, sample: 64 << 10, deadline: time.Now().Add(*multiDuration),
				hold: hold, counts: make([]atomic.Int64, 2), bytes: make([]atomic.Int64, 2)}
			start := time.Now()
			errs := multiRun(b, a, streams, load)
			el := time.Since(start)
			for _, err := range errs {
				t.Error(err)
			}
			line := fmt.Sprintf("multi %s %.0fs", mk.name, el.Seconds())
			for d := 0; d < 2; d++ {
				line += fmt.Sprintf(" dev%d %d allocs %s", d, load.counts[d].Load(), gpumem.FormatBytes(uint64(load.bytes[d].Load())))
				if a.stats != nil {
					st := a.stats(d)
					line += fmt.Sprintf(" (peak reserved %s)", gpumem.FormatBytes(uint64(st.ReservedBytes[gpumem.StatAll].Peak)))
					if got, want := st.Allocation[gpumem.StatAll].Allocated, load.counts[d].Load(); got != want {
						t.Errorf("device %d counts %d allocations, its goroutines made %d", d, got, want)
					}
				}
			}
			line += fmt.Sprintf(" errors %d", len(errs))
			t.Log(line)
			fmt.Println(line)
			if err := a.close(); err != nil {
				t.Error(err)
			}
			if err := multiDestroyStreams(b, streams); err != nil {
				t.Error(err)
			}
		})
	}
}
