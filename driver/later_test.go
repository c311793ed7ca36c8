package driver

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/native"
)

// laterRig is a fake CUDA backend with a stream of its own on device 1, and
// the log emptied.
func laterRig(t *testing.T) (*native.Backend, gpumem.Stream, gpumem.MemPool) {
	t.Helper()
	b := openFake(t)
	t.Cleanup(func() { b.Close() })
	s, err := b.StreamCreate(1, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	fakeTakeLog()
	return b, s, gpumem.MemPool{Handle: 0x9000, Device: 1}
}

func wantLog(t *testing.T, when string, want ...string) {
	t.Helper()
	if got := fakeTakeLog(); !slices.Equal(got, want) {
		t.Errorf("%s: the driver saw %q, want %q", when, got, want)
	}
}

// TestFreeAsyncLaterRidesWithTheNextCall checks that a held-back free
// reaches the driver with the next call, before it, whichever call that is.
func TestFreeAsyncLaterRidesWithTheNextCall(t *testing.T) {
	b, s, pool := laterRig(t)
	free := fmt.Sprintf("free 0x1000 %#x", s.Handle)
	sent := b.LaterSent()
	if err := b.FreeAsyncLater(0x1000, s); err != nil {
		t.Fatal(err)
	}
	wantLog(t, "after FreeAsyncLater")
	if _, err := b.MallocFromPoolAsync(64, pool, s); err != nil {
		t.Fatal(err)
	}
	wantLog(t, "the next allocation", free, fmt.Sprintf("alloc 0x40 %#x", s.Handle))
	if got := b.LaterSent() - sent; got != 1 {
		t.Errorf("LaterSent moved by %d, want 1", got)
	}

	if err := b.FreeAsyncLater(0x1000, s); err != nil {
		t.Fatal(err)
	}
	if err := b.StreamSynchronize(s); err != nil {
		t.Fatal(err)
	}
	wantLog(t, "a synchronization", free, fmt.Sprintf("sync %#x", s.Handle))

	if err := b.FreeAsyncLater(0x1000, s); err != nil {
		t.Fatal(err)
	}
	if err := b.StreamBeginCapture(s, gpumem.CaptureModeRelaxed); err != nil {
		t.Fatal(err)
	}
	wantLog(t, "a capture's begin", free, fmt.Sprintf("begin %#x", s.Handle))
	// While a capture is open, nothing is held back: the free goes at once
	// (into the capture, as FreeAsync's would).
	if err := b.FreeAsyncLater(0x2000, s); err != nil {
		t.Fatal(err)
	}
	wantLog(t, "a free during a capture", fmt.Sprintf("free 0x2000 %#x", s.Handle))
	if _, err := b.StreamEndCapture(s); err != nil {
		t.Fatal(err)
	}

	if err := b.FreeAsyncLater(0x1000, s); err != nil {
		t.Fatal(err)
	}
	if err := b.StreamDestroy(s); err != nil {
		t.Fatal(err)
	}
	wantLog(t, "the stream's destruction", free, fmt.Sprintf("destroy %#x", s.Handle))
	if err := b.FlushLater(); err != nil {
		t.Errorf("FlushLater after frees the driver took: %v", err)
	}
}

// TestFreeAsyncLaterSendsAtOnce checks the frees that are not held back:
// on default streams, on streams the backend did not make, on a destroyed
// stream.
func TestFreeAsyncLaterSendsAtOnce(t *testing.T) {
	b, s, _ := laterRig(t)
	for _, tc := range []struct {
		name string
		s    gpumem.Stream
	}{
		{"legacy default stream", gpumem.Stream{Device: 1}},
		{"CU_STREAM_PER_THREAD", gpumem.Stream{Device: 1, Handle: 2}},
		{"a stream made elsewhere", gpumem.Stream{Device: 1, Handle: 0x7000}},
		{"the stream on another device", gpumem.Stream{Device: 0, Handle: s.Handle}},
	} {
		if err := b.FreeAsyncLater(0x3000, tc.s); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		wantLog(t, tc.name, fmt.Sprintf("free 0x3000 %#x", tc.s.Handle))
	}
	if err := b.StreamDestroy(s); err != nil {
		t.Fatal(err)
	}
	fakeTakeLog()
	// A destroyed stream's handle is not remembered as made here any more.
	if err := b.FreeAsyncLater(0x3000, s); err != nil {
		t.Fatal(err)
	}
	wantLog(t, "a destroyed stream", fmt.Sprintf("free 0x3000 %#x", s.Handle))
}

// TestFreeAsyncLaterQueueBound checks that at most MaxLater frees are held
// back: the one that fills the queue sends them all, in order.
func TestFreeAsyncLaterQueueBound(t *testing.T) {
	b, s, _ := laterRig(t)
	var want []string
	for i := 0; i < native.MaxLater; i++ {
		p := gpumem.Ptr(0x10000 + i*0x100)
		if err := b.FreeAsyncLater(p, s); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("free %#x %#x", uintptr(p), s.Handle))
		if i < native.MaxLater-1 {
			wantLog(t, fmt.Sprintf("free %d held back", i+1))
		}
	}
	wantLog(t, "the free that fills the queue", want...)
}

// TestFreeAsyncLaterRefused checks that a held-back free the driver refuses
// is reported by FlushLater, once, and that the call it rode with is not
// affected.
func TestFreeAsyncLaterRefused(t *testing.T) {
	b, s, pool := laterRig(t)
	if err := b.FreeAsyncLater(fakeRefusedFree, s); err != nil {
		t.Fatalf("FreeAsyncLater reported the driver's later refusal now: %v", err)
	}
	if p, err := b.MallocFromPoolAsync(64, pool, s); err != nil || p == 0 {
		t.Fatalf("the allocation the refused free rode with: %#x, %v", uintptr(p), err)
	}
	err := b.FlushLater()
	if !errors.Is(err, gpumem.ErrInvalidValue) || !strings.Contains(err.Error(), "0xbad0") {
		t.Errorf("FlushLater = %v, want the refused free of 0xbad0 (ErrInvalidValue)", err)
	}
	if err := b.FlushLater(); err != nil {
		t.Errorf("a second FlushLater = %v, want nil", err)
	}
}

// TestFreeAsyncLaterBeforeClose checks that Close sends what is held back.
func TestFreeAsyncLaterBeforeClose(t *testing.T) {
	b, s, _ := laterRig(t)
	if err := b.FreeAsyncLater(0x4000, s); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	log := fakeTakeLog()
	if len(log) == 0 || log[0] != fmt.Sprintf("free 0x4000 %#x", s.Handle) {
		t.Errorf("Close: the driver saw %q, want the held-back free first", log)
	}
}

// TestFreeAsyncLaterConcurrent frees and allocates from several goroutines,
// each on a stream of its own: every free reaches the driver once.
func TestFreeAsyncLaterConcurrent(t *testing.T) {
	b, _, pool := laterRig(t)
	const workers, rounds = 6, 300
	frees := fakeFrees.Load()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		s, err := b.StreamCreate(1, gpumem.StreamNonBlocking, 0)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				if err := b.FreeAsyncLater(0x5000, s); err != nil {
					errs <- err
					return
				}
				if i%3 == 0 {
					if _, err := b.MallocFromPoolAsync(64, pool, s); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := b.FlushLater(); err != nil {
		t.Fatal(err)
	}
	if got := fakeFrees.Load() - frees; got != workers*rounds {
		t.Errorf("the driver saw %d frees, want %d", got, workers*rounds)
	}
	fakeTakeLog()
}
