package tests

import (
	"fmt"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/deferrable"
	"github.com/gpumem/gpumem/managed"
)

// feedAllocators launches kp's saxpy and reduction on memory from each
// allocator, for n elements of float32 each of sizes (x, y, and a 4-byte
// sum), and checks every result against Go:
//
//   - caching and asyncpool: stream-ordered allocations on a stream of
//     their own, launched on it;
//   - managed: buffers allocated on the host, filled there, moved to the
//     device with Buffer.To (a prefetch on the stream) before the launch
//     and back to the host after it; sizes whose three buffers pass
//     managedMax bytes are skipped;
//   - deferrable, LockAndLaunch: the buffers (spilled to the host tier
//     first when spillMax allows) are brought back and locked around a
//     launch on the default stream;
//   - deferrable, LockAndLaunchAsync: locked in stream order on a stream,
//     released by SyncAndUnlock.
func feedAllocators(t *testing.T, b gpumem.Backend, kp *kernelPair, sizes []uint64, managedMax, spillMax uint64) {
	for _, n := range sizes {
		bytes := 4 * n
		name := sizeName(bytes)
		t.Run("caching/"+name, func(t *testing.T) {
			a, err := caching.New(b, caching.Options{})
			must(t, err)
			defer closeAlloc(t, a)
			feedStreamOrdered(t, b, kp, a, n)
		})
		t.Run("asyncpool/"+name, func(t *testing.T) {
			a, err := asyncpool.New(b, asyncpool.Options{})
			must(t, err)
			defer closeAlloc(t, a)
			feedStreamOrdered(t, b, kp, a, n)
		})
		t.Run("managed/"+name, func(t *testing.T) {
			if 2*bytes+4 > managedMax {
				t.Skipf("%d bytes of managed memory exceed the %d allowed here", 2*bytes+4, managedMax)
			}
			feedManaged(t, b, kp, n)
		})
		t.Run("deferrable/LockAndLaunch/"+name, func(t *testing.T) {
			feedDeferrable(t, b, kp, n, bytes <= spillMax, false)
		})
		t.Run("deferrable/LockAndLaunchAsync/"+name, func(t *testing.T) {
			feedDeferrable(t, b, kp, n, bytes <= spillMax, true)
		})
	}
}

func sizeName(bytes uint64) string {
	switch {
	case bytes >= 1<<30 && bytes%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", bytes>>30)
	case bytes >= 1<<20 && bytes%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", bytes>>20)
	case bytes >= 1<<10 && bytes%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", bytes>>10)
	}
	return fmt.Sprintf("%dB", bytes)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func closeAlloc(t testing.TB, a interface{ Close() error }) {
	t.Helper()
	if err := a.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// streamAllocator is what caching and asyncpool have in common.
type streamAllocator interface {
	Allocate(size uint64, s gpumem.Stream) (gpumem.Ptr, error)
	Deallocate(p gpumem.Ptr, s gpumem.Stream) error
}

func newTestStream(t testing.TB, b gpumem.Backend) gpumem.Stream {
	t.Helper()
	s, err := b.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	must(t, err)
	t.Cleanup(func() {
		_ = b.StreamSynchronize(s)
		if err := b.StreamDestroy(s); err != nil {
			t.Errorf("StreamDestroy: %v", err)
		}
	})
	return s
}

func feedStreamOrdered(t *testing.T, b gpumem.Backend, kp *kernelPair, a streamAllocator, n uint64) {
	s := newTestStream(t, b)
	var ptrs [3]gpumem.Ptr
	for i, size := range []uint64{4 * n, 4 * n, 4} {
		p, err := a.Allocate(size, s)
		must(t, err)
		ptrs[i] = p
		defer func() {
			if err := a.Deallocate(p, s); err != nil {
				t.Errorf("Deallocate: %v", err)
			}
		}()
	}
	x, y, sum := ptrs[0], ptrs[1], ptrs[2]
	must(t, b.StreamSynchronize(s)) // the synchronous copies below are on no stream
	fillInputs(t, b, x, y, n)
	must(t, kp.launch(s, x, y, sum, n))
	must(t, b.StreamSynchronize(s))
	checkResult(t, b, y, sum, n, t.Name())
}

func feedManaged(t *testing.T, b gpumem.Backend, kp *kernelPair, n uint64) {
	a, err := managed.New(b, managed.Options{Force: true})
	if err != nil {
		t.Skipf("no managed memory: %v", err)
	}
	defer closeAlloc(t, a)
	s := newTestStream(t, b)
	var bufs [3]*managed.Buffer
	for i, size := range []uint64{4 * n, 4 * n, 4} {
		buf, err := a.Alloc(size, gpumem.HostLocation(), s)
		must(t, err)
		bufs[i] = buf
		defer func() {
			if err := buf.Free(); err != nil {
				t.Errorf("Free: %v", err)
			}
		}()
	}
	must(t, b.StreamSynchronize(s))
	fillInputs(t, b, bufs[0].Ptr, bufs[1].Ptr, n)
	dev := gpumem.DeviceLocation(0)
	for _, buf := range bufs {
		moved, err := buf.To(dev, managed.ToOptions{Stream: s})
		must(t, err)
		if moved != buf || buf.Location() != dev {
			t.Fatalf("To(device 0): %v at %v", moved, buf.Location())
		}
	}
	must(t, kp.launch(s, bufs[0].Ptr, bufs[1].Ptr, bufs[2].Ptr, n))
	for _, buf := range bufs[1:] {
		_, err := buf.To(gpumem.HostLocation(), managed.ToOptions{Stream: s})
		must(t, err)
	}
	checkResult(t, b, bufs[1].Ptr, bufs[2].Ptr, n, t.Name())
}

func feedDeferrable(t *testing.T, b gpumem.Backend, kp *kernelPair, n uint64, spill, async bool) {
	m, err := deferrable.New(b, 0, deferrable.Options{})
	must(t, err)
	defer closeAlloc(t, m)
	s := newTestStream(t, b)
	var bufs [3]*deferrable.Buffer
	for i, size := range []uint64{4 * n, 4 * n, 4} {
		buf, err := m.Alloc(size, s)
		must(t, err)
		bufs[i] = buf
		defer func() {
			if err := buf.Free(); err != nil {
				t.Errorf("Free: %v", err)
			}
		}()
	}
	// Fill x and y while holding them.
	x, err := bufs[0].Acquire(s)
	must(t, err)
	y, err := bufs[1].Acquire(s)
	must(t, err)
	must(t, b.StreamSynchronize(s))
	fillInputs(t, b, x, y, n)
	must(t, bufs[0].Release())
	must(t, bufs[1].Release())
	if spill {
		for _, buf := range bufs[:2] {
			must(t, buf.MoveTo(deferrable.TierHost))
			if w := buf.Where(); w != deferrable.TierHost {
				t.Fatalf("after MoveTo(host) the buffer is in %v", w)
			}
		}
	}
	if async {
		must(t, m.LockAndLaunchAsync(s, func(s gpumem.Stream, p []gpumem.Ptr) error {
			return kp.launch(s, p[0], p[1], p[2], n)
		}, bufs[:]...))
		must(t, m.SyncAndUnlock(s))
	} else {
		must(t, m.LockAndLaunch(func(p []gpumem.Ptr) error {
			def := gpumem.Stream{Device: 0}
			if err := kp.launch(def, p[0], p[1], p[2], n); err != nil {
				return err
			}
			return b.StreamSynchronize(def)
		}, bufs[:]...))
	}
	for _, buf := range bufs {
		if buf.Locked() {
			t.Fatalf("buffer %d is still locked", buf.ID())
		}
	}
	y, err = bufs[1].Acquire(s)
	must(t, err)
	sum, err := bufs[2].Acquire(s)
	must(t, err)
	must(t, b.StreamSynchronize(s))
	checkResult(t, b, y, sum, n, t.Name())
	must(t, bufs[1].Release())
	must(t, bufs[2].Release())
}
