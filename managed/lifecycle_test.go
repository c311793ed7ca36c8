package managed

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

// TestFreeAfterAllocationStreamDestroyed checks that a buffer whose
// allocation stream was destroyed is still freed: Free orders the free on
// that stream, which has no work left, and the block must go back to its
// pool rather than stay allocated forever.
func TestFreeAfterAllocationStreamDestroyed(t *testing.T) {
	r, a := setup(t, sim.Config{Devices: []sim.DeviceConfig{{}, {}}}, Options{})
	s1 := gpumem.Stream{Device: 1}
	for _, viaDeallocate := range []bool{false, true} {
		s, err := r.StreamCreate(0, gpumem.StreamNonBlocking, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, err := a.Alloc(mib, dev0, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.StreamDestroy(s); err != nil {
			t.Fatal(err)
		}
		if viaDeallocate {
			// A live stream of another device: the free falls back to
			// the buffer's own (destroyed) stream.
			err = a.Deallocate(b.Ptr, s1)
		} else {
			err = b.Free()
		}
		if err != nil {
			t.Fatalf("Deallocate %v: free after the allocation stream was destroyed: %v", viaDeallocate, err)
		}
		if n := a.Stats(0).Allocation[gpumem.StatAll].Current; n != 0 {
			t.Fatalf("Deallocate %v: %d allocations left in the pool after the free", viaDeallocate, n)
		}
	}
	if err := r.DeviceSynchronize(0); err != nil {
		t.Fatal(err)
	}
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if a.Reserved() != 0 {
		t.Fatalf("reserved %d after EmptyCache: the freed blocks were kept", a.Reserved())
	}
}

// TestFailedCloseCanBeRetried checks that memory the backend refused to
// free at Close is not forgotten: a later Close frees it.
func TestFailedCloseCanBeRetried(t *testing.T) {
	for _, size := range []uint64{mib, 64 * mib} { // carved from a chunk; a segment of its own
		r := newRecorder(t, sim.Config{})
		a, err := New(r, Options{Force: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Alloc(size, dev0, s0); err != nil {
			t.Fatal(err)
		}
		for nth := 1; nth <= 3; nth++ {
			r.InjectFault("Free", nth, errInjected)
		}
		if err := a.Close(); !errors.Is(err, errInjected) {
			t.Fatalf("size %d: Close with every free refused: %v, want the failure", size, err)
		}
		r.ClearFaults()
		if err := a.Close(); err != nil {
			t.Fatalf("size %d: second Close: %v", size, err)
		}
		if a.Reserved() != 0 || len(r.Leaks()) != 0 {
			t.Fatalf("size %d: after a second Close reserved %d, leaks %v", size, a.Reserved(), r.Leaks())
		}
		if err := a.Close(); err != nil {
			t.Fatalf("size %d: third Close: %v", size, err)
		}
	}
}

// blockingPrefetch holds Prefetch calls, once armed, until released.
type blockingPrefetch struct {
	*recorder
	entered, release chan struct{}
}

func (w *blockingPrefetch) Prefetch(p gpumem.Ptr, size uint64, loc gpumem.Location, s gpumem.Stream) error {
	if w.entered != nil {
		w.entered <- struct{}{}
		<-w.release
	}
	return w.recorder.Prefetch(p, size, loc, s)
}

// waitMutex waits until a goroutine is blocked on a sync.Mutex in fn.
func waitMutex(fn string) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "[sync.Mutex.Lock") && strings.Contains(g, fn) {
				return
			}
		}
		runtime.Gosched()
	}
}

// TestCloseConcurrentWithFree checks that Close and a Free of a buffer
// another goroutine is moving do not deadlock: Close must take a buffer's
// lock and a shard's in the package's order (buffer, then shard).
func TestCloseConcurrentWithFree(t *testing.T) {
	r := newRecorder(t, sim.Config{})
	w := &blockingPrefetch{recorder: r}
	a := newAlloc(t, r, w, Options{})
	b, err := a.Alloc(mib, dev0, s0)
	if err != nil {
		t.Fatal(err)
	}
	w.entered, w.release = make(chan struct{}), make(chan struct{})
	moved := make(chan error, 1)
	go func() { _, err := b.To(host, ToOptions{Stream: s0}); moved <- err }()
	<-w.entered // the move holds the buffer's lock
	freed := make(chan error, 1)
	go func() { freed <- b.Free() }()
	waitMutex("(*Buffer).free")
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	waitMutex("(*Allocator).Close")
	close(w.release)
	watchdog := time.After(time.Minute)
	for _, c := range []chan error{moved, freed, closed} {
		select {
		case err := <-c:
			if err != nil && !errors.Is(err, gpumem.ErrInvalidValue) && !errors.Is(err, gpumem.ErrClosed) {
				t.Errorf("unexpected error: %v", err)
			}
		case <-watchdog:
			t.Fatal("Close and Free deadlocked")
		}
	}
	if a.Reserved() != 0 || len(r.Leaks()) != 0 {
		t.Fatalf("after Close: reserved %d, leaks %v", a.Reserved(), r.Leaks())
	}
}

// TestNilBuffer checks that a nil *Buffer (what a failed Alloc returns)
// gives errors, not panics.
func TestNilBuffer(t *testing.T) {
	var b *Buffer
	inval := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("%s of a nil buffer: %v, want ErrInvalidValue", what, err)
		}
	}
	inval("Free", b.Free())
	_, err := b.To(host, ToOptions{})
	inval("To", err)
	inval("AddReader", b.AddReader(0))
	inval("RemoveReader", b.RemoveReader(0))
	inval("zero Buffer's Free", (&Buffer{}).Free())
	if loc := b.Location(); loc != (gpumem.Location{}) {
		t.Errorf("Location of a nil buffer: %v", loc)
	}
	if b.Readers() != nil || b.Allocator() != nil || b.String() == "" {
		t.Error("accessors of a nil buffer")
	}
	var a *Allocator
	inval("Close of a nil allocator", a.Close())
}
