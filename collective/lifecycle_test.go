package collective

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/bind"
	"github.com/gpumem/gpumem/sim"
)

// nativePair is a communicator of two ranks on the fake NCCL, with the
// fake's record of calls emptied.
func nativePair(t *testing.T) (*bind.Lib, []*Comm) {
	t.Helper()
	l := openFake(t)
	g, err := sim.New(sim.Config{Devices: make([]sim.DeviceConfig, 2)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	setCurrent, _ := l.Addr(0)
	cs, err := InitAll(&fakeCUDA{GPU: g, fn: setCurrent}, []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs[1].Close(); fakeCalls(t, l) })
	fakeCalls(t, l)
	return l, cs
}

// stuckAllReduce starts an all-reduce that stays in the fake library until
// the communicator is aborted, and returns once it is there.
func stuckAllReduce(t *testing.T, l *bind.Lib, c *Comm) <-chan error {
	t.Helper()
	if _, err := l.Call(3, 1); err != nil { // forget an abort no stuck call took
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.AllReduce(0x1000, 0x1000, 777, Float32, Sum, gpumem.Stream{}) }()
	for len(fakeCalls(t, l)) == 0 {
		runtime.Gosched()
	}
	return done
}

func fnsOf(calls []fakeCall) []int64 {
	var fns []int64
	for _, c := range calls {
		fns = append(fns, c.fn)
	}
	return fns
}

// TestNativeAbortFailsWaitingCalls: a call that waits for the call lock
// behind a call stuck in the library does not reach the library once Abort
// has freed the communicator: it fails with ErrClosed.
func TestNativeAbortFailsWaitingCalls(t *testing.T) {
	l, cs := nativePair(t)
	stuck := stuckAllReduce(t, l, cs[0])
	waiting := make(chan error, 1)
	go func() { waiting <- cs[0].AllReduce(0x1000, 0x1000, 1, Float32, Sum, gpumem.Stream{}) }()
	time.Sleep(50 * time.Millisecond) // the second call waits for the first
	if err := cs[0].Abort(); err != nil {
		t.Fatal(err)
	}
	<-stuck
	if err := <-waiting; !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("a call that waited behind the stuck one: %v, want ErrClosed", err)
	}
	if fns := fnsOf(fakeCalls(t, l)); len(fns) != 1 || fns[0] != fAbort {
		t.Errorf("calls after the stuck all-reduce: %v, want only ncclCommAbort", fns)
	}
}

// TestNativeAbortDuringClose: Close waiting for a call stuck in the
// library is not the end: Abort still aborts the communicator, which
// releases the call and lets Close return, and the communicator is not
// destroyed after it was aborted.
func TestNativeAbortDuringClose(t *testing.T) {
	l, cs := nativePair(t)
	stuck := stuckAllReduce(t, l, cs[0])
	closed := make(chan error, 1)
	go func() { closed <- cs[0].Close() }()
	time.Sleep(50 * time.Millisecond) // Close waits for the stuck call
	if err := cs[0].Abort(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stuck:
	case <-time.After(5 * time.Second):
		t.Fatal("Abort during Close did not release the stuck call")
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return after Abort")
	}
	if fns := fnsOf(fakeCalls(t, l)); len(fns) != 1 || fns[0] != fAbort {
		t.Errorf("calls: %v, want only ncclCommAbort (no destroy after it)", fns)
	}
	if err := cs[0].Abort(); err != nil {
		t.Errorf("second Abort: %v", err)
	}
	if err := cs[0].Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if calls := fakeCalls(t, l); len(calls) != 0 {
		t.Errorf("a second Abort or Close called the library: %+v", calls)
	}
}

// TestNativeAbortWaitsForAsyncError: Abort does not free the communicator
// under an ncclCommGetAsyncError in progress on another goroutine.
func TestNativeAbortWaitsForAsyncError(t *testing.T) {
	l, cs := nativePair(t)
	const slowAsync = 1000 // testdata/fakenccl.c's SLOW_ASYNC
	if _, err := l.Call(2, slowAsync); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_, _ = l.Call(2, 0)
		_, _ = l.Call(3, 1) // no stuck call took the abort
	}()
	done := make(chan error, 1)
	go func() { done <- cs[0].AsyncError() }()
	for {
		if in, _ := l.Call(3, 0); int32(in) != 0 {
			break
		}
		runtime.Gosched()
	}
	if err := cs[0].Abort(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("AsyncError in progress while Abort ran: %v (the communicator was freed under it)", err)
	}
	if err := cs[0].AsyncError(); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("AsyncError after Abort: %v", err)
	}
}

// TestInitRankMoreRanksThanDevices: on the simulator every rank is a
// device of one GPU, so a communicator of more ranks than devices can never
// form; InitRank says so instead of waiting for ever.
func TestInitRankMoreRanksThanDevices(t *testing.T) {
	m := newMachine(t, 2, false)
	id, err := NewUniqueID(m.g)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		c, err := InitRank(m.g, 0, 3, id, 0)
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("InitRank of 3 ranks on 2 devices: %v, want ErrInvalidValue", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("InitRank of 3 ranks on 2 simulated devices waits for ever")
	}
	// The id is still good for a communicator that can form.
	errs := make(chan error, 2)
	for r := range 2 {
		go func() {
			c, err := InitRank(m.g, r, 2, id, r)
			if err == nil {
				err = c.Close()
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestNilRegistration: Close of a nil *Registration (what a failed
// Register returns) is an error, not a panic.
func TestNilRegistration(t *testing.T) {
	var r *Registration
	if err := r.Close(); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("Close of a nil Registration: %v, want ErrInvalidValue", err)
	}
}

// TestNilCommAccessors: the accessors of a nil *Comm answer "no
// communicator" instead of panicking.
func TestNilCommAccessors(t *testing.T) {
	var c *Comm
	if c.Count() != 0 || c.Rank() != -1 || c.Device() != -1 || c.String() != "nil comm" {
		t.Errorf("nil Comm: count %d, rank %d, device %d, %q", c.Count(), c.Rank(), c.Device(), c.String())
	}
}

// An id makes one communicator: a rank that joins after its ranks have all
// joined, or after their joining failed, fails at once instead of waiting
// for ranks that have gone.
func TestInitRankLateJoiner(t *testing.T) {
	m := newMachine(t, 3, false)
	late := func(id UniqueID, rank int) error {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			c, err := InitRank(m.g, rank, 3, id, rank)
			if err == nil {
				c.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Second):
			t.Fatalf("rank %d joining late waits for ever", rank)
			return nil
		}
	}

	// A group whose joining failed: rank 1 says 2 ranks where rank 0 said 3.
	failed, err := NewUniqueID(m.g)
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() {
		_, err := InitRank(m.g, 0, 3, failed, 0)
		first <- err
	}()
	for {
		// Rank 1 must come second, after rank 0 has made the clique.
		pendingCliques.mu.Lock()
		_, made := pendingCliques.m[failed]
		pendingCliques.mu.Unlock()
		if made {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := InitRank(m.g, 1, 2, failed, 1); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Fatalf("rank 1 with another count: %v", err)
	}
	if err := <-first; !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("rank 0 of the failed group: %v", err)
	}
	if err := late(failed, 2); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("rank 2 after the group failed: %v", err)
	}

	// A communicator made: every rank of two joined.
	made, err := NewUniqueID(m.g)
	if err != nil {
		t.Fatal(err)
	}
	cs := make(chan *Comm, 2)
	for r := range 2 {
		go func() {
			c, err := InitRank(m.g, r, 2, made, r)
			if err != nil {
				t.Error(err)
			}
			cs <- c
		}()
	}
	for range 2 {
		if c := <-cs; c != nil {
			defer c.Close()
		}
	}
	if err := late(made, 2); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("a rank joining a made communicator's id: %v", err)
	}
}
