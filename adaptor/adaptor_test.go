package adaptor_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/adaptor"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/internal/oomhooks"
	"github.com/gpumem/gpumem/replay"
	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/simtest"
	"github.com/gpumem/gpumem/trace"
)

func TestMain(m *testing.M) { os.Exit(simtest.Main(m)) }

// small is a simulated device of 256 MiB.
var small = sim.Config{Devices: []sim.DeviceConfig{{Capacity: 256 << 20, PoolGranularity: 2 << 20}}}

// newUpstream returns a caching allocator on a leak-checked simulator,
// closed at the end of the test.
func newUpstream(t *testing.T) (*sim.GPU, *caching.Allocator) {
	t.Helper()
	g := simtest.New(t, small)
	t.Cleanup(func() { _ = g.Close() })
	a, err := caching.New(g, caching.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return g, a
}

var s0 = gpumem.Stream{Device: 0}

func TestNilUpstream(t *testing.T) {
	_, e1 := adaptor.NewLimit(nil, 1)
	_, e2 := adaptor.NewStatistics(nil)
	_, e3 := adaptor.NewRecorder(nil, &bytes.Buffer{})
	_, e4 := adaptor.NewOnOOM(nil, nil)
	var typedNil *caching.Allocator // a nil pointer in the interface: refused too
	_, e5 := adaptor.NewStatistics(typedNil)
	_, e6 := adaptor.NewLimit(typedNil, 1)
	for i, err := range []error{e1, e2, e3, e4, e5, e6} {
		if !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("constructor %d with a nil upstream: %v", i, err)
		}
	}
}

// A Limit fails an allocation past its cap without asking the upstream,
// counts it, tells the observers, and asks the handler, bounded.
func TestLimitRefusesBeforeUpstream(t *testing.T) {
	_, up := newUpstream(t)
	l, err := adaptor.NewLimit(up, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if l.Upstream() != gpumem.Allocator(up) {
		t.Fatal("Upstream is not the allocator wrapped")
	}
	var told []*gpumem.OutOfMemoryError
	l.AddOOMObserver(func(e *gpumem.OutOfMemoryError) { told = append(told, e) })
	p, err := l.Allocate(700<<10, s0)
	if err != nil {
		t.Fatal(err)
	}
	before := up.Stats(0).Allocation[gpumem.StatAll].Allocated
	_, err = l.Allocate(400<<10, s0)
	var oom *gpumem.OutOfMemoryError
	if !errors.As(err, &oom) || oom.Limit != 1<<20 || oom.Allocated != 700<<10 || !strings.Contains(oom.Hint, "adaptor.Limit") {
		t.Fatalf("over the cap: %v", err)
	}
	if up.Stats(0).Allocation[gpumem.StatAll].Allocated != before {
		t.Error("the upstream was asked for an allocation past the cap")
	}
	if len(told) != 1 || l.Stats(0).NumOOMs != 1 {
		t.Errorf("observers told %d times, NumOOMs %d; want 1, 1", len(told), l.Stats(0).NumOOMs)
	}
	calls := 0
	l.SetOOMHandler(func(int, uint64, int) bool { calls++; return true })
	if _, err := l.Allocate(400<<10, s0); !errors.Is(err, gpumem.ErrOutOfMemory) || calls != oomhooks.MaxAttempts {
		t.Errorf("with a handler that frees nothing: %v after %d calls", err, calls)
	}
	l.SetOOMHandler(func(int, uint64, int) bool {
		if p != 0 {
			_ = l.Deallocate(p, s0)
			p = 0
		}
		return true
	})
	q, err := l.Allocate(400<<10, s0)
	if err != nil {
		t.Fatalf("after the handler freed room: %v", err)
	}
	if l.Used(0) != 400<<10 {
		t.Errorf("Used = %d, want %d", l.Used(0), 400<<10)
	}
	if err := l.Deallocate(q, s0); err != nil || l.Used(0) != 0 {
		t.Errorf("Deallocate: %v, Used %d", err, l.Used(0))
	}
}

func TestLimitFraction(t *testing.T) {
	g, up := newUpstream(t)
	if _, err := adaptor.NewLimitFraction(up, g, 1.5); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("fraction 1.5: %v", err)
	}
	var nilGPU *sim.GPU // a nil pointer in the interface: refused, not called
	if _, err := adaptor.NewLimitFraction(up, nilGPU, 0.5); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("a nil *sim.GPU as the backend: %v", err)
	}
	if _, err := adaptor.NewLimitFraction(up, nil, 0.5); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("a nil backend: %v", err)
	}
	l, err := adaptor.NewLimitFraction(up, g, 0.25)
	if err != nil {
		t.Fatal(err)
	}
	if c := l.Cap(0); c != 64<<20 {
		t.Fatalf("Cap(0) = %d, want a quarter of 256 MiB", c)
	}
	p, err := l.Allocate(60<<20, s0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Allocate(8<<20, s0); !errors.Is(err, gpumem.ErrOutOfMemory) {
		t.Errorf("past a quarter of the device: %v", err)
	}
	if err := l.Deallocate(p, s0); err != nil {
		t.Fatal(err)
	}
}

// Two Statistics over one allocator see their own traffic; resetting one's
// peaks leaves the allocator's alone.
func TestStatisticsShared(t *testing.T) {
	_, up := newUpstream(t)
	a, _ := adaptor.NewStatistics(up)
	b, _ := adaptor.NewStatistics(up)
	pa, _ := a.Allocate(3<<20, s0)
	pb, _ := b.Allocate(1000, s0)
	qb, _ := b.Allocate(2000, s0)
	sa, sb := a.Stats(0), b.Stats(0)
	if sa.RequestedBytes[gpumem.StatAll].Current != 3<<20 || sa.RequestedBytes[gpumem.StatLarge].Current != 3<<20 {
		t.Errorf("a: %+v", sa.RequestedBytes)
	}
	if sb.Allocation[gpumem.StatSmall].Current != 2 || sb.AllocatedBytes[gpumem.StatAll].Current != 3000 {
		t.Errorf("b: %+v %+v", sb.Allocation, sb.AllocatedBytes)
	}
	_ = b.Deallocate(qb, s0)
	b.ResetPeakStats(0)
	if pk := b.Stats(0).AllocatedBytes[gpumem.StatAll].Peak; pk != 1000 {
		t.Errorf("b's peak after the reset = %d, want 1000", pk)
	}
	if pk := up.Stats(0).RequestedBytes[gpumem.StatAll].Peak; pk != 3<<20+3000 {
		t.Errorf("the allocator's peak = %d: reset through an adaptor", pk)
	}
	if err := a.Deallocate(pb, s0); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("freeing b's allocation through a: %v", err)
	}
	_ = a.Deallocate(pa, s0)
	_ = b.Deallocate(pb, s0)
	if _, err := a.Allocate(1<<30, s0); !errors.Is(err, gpumem.ErrOutOfMemory) || a.Stats(0).NumOOMs != 1 {
		t.Errorf("an allocation past the device: %v, NumOOMs %d", err, a.Stats(0).NumOOMs)
	}
	_ = a.Close()
	_ = b.Close() // the upstream is already closed: nil
	if _, err := b.Allocate(1, s0); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

// A workload recorded through a Recorder reads back as a valid trace with
// the peak the workload had, and replays through other allocators with the
// same peak requested.
func TestRecorderReplays(t *testing.T) {
	g, up := newUpstream(t)
	var buf bytes.Buffer
	r, err := adaptor.NewRecorder(up, &buf)
	if err != nil {
		t.Fatal(err)
	}
	var streams []gpumem.Stream
	for i := 0; i < 3; i++ {
		s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	type live struct {
		p    gpumem.Ptr
		size uint64
		s    gpumem.Stream
	}
	rng := rand.New(rand.NewPCG(7, 7))
	var held []live
	var cur, peak uint64
	for i := 0; i < 400; i++ {
		if len(held) < 12 && (len(held) == 0 || rng.IntN(5) < 3) {
			n := 1 + rng.Uint64N(4<<20)
			s := streams[rng.IntN(len(streams))]
			p, err := r.Allocate(n, s)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, live{p, n, s})
			cur += n
			peak = max(peak, cur)
			if rng.IntN(4) == 0 {
				if err := r.RecordStream(p, streams[rng.IntN(len(streams))]); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		k := rng.IntN(len(held))
		h := held[k]
		held = append(held[:k], held[k+1:]...)
		on := h.s
		if rng.IntN(3) == 0 {
			on = streams[rng.IntN(len(streams))]
		}
		if err := r.Deallocate(h.p, on); err != nil {
			t.Fatal(err)
		}
		cur -= h.size
	}
	if err := r.Close(); err != nil || r.Err() != nil {
		t.Fatalf("Close: %v, Err: %v", err, r.Err())
	}
	for _, s := range streams {
		_ = g.StreamDestroy(s)
	}
	if n, ok := r.StreamNumber(streams[0]); !ok || n > 2 {
		t.Errorf("StreamNumber = %d, %v", n, ok)
	}
	tr, err := trace.Read(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("the recorded trace does not read back: %v", err)
	}
	if st := tr.Stats(); st.PeakRequested != peak || st.LiveAtEnd != len(held) || len(st.Streams) != 3 {
		t.Fatalf("recorded %+v; the workload's peak was %d with %d live at the end", st, peak, len(held))
	}
	for name, mk := range map[string]func(b gpumem.Backend) (gpumem.Allocator, error){
		"caching":   func(b gpumem.Backend) (gpumem.Allocator, error) { return caching.New(b, caching.DefaultOptions()) },
		"asyncpool": func(b gpumem.Backend) (gpumem.Allocator, error) { return asyncpool.New(b, asyncpool.DefaultOptions()) },
	} {
		g := simtest.New(t, small)
		a, err := mk(g)
		if err != nil {
			t.Fatal(err)
		}
		res, err := replay.Run(g, tr, a, replay.Options{Allocator: name})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.PeakRequested != peak || res.OOMs != 0 {
			t.Errorf("%s: replayed peak %d with %d OOMs; recorded %d", name, res.PeakRequested, res.OOMs, peak)
		}
		_ = g.Close()
	}
}

// A failing writer stops the trace, never the allocations.
func TestRecorderWriteError(t *testing.T) {
	_, up := newUpstream(t)
	r, _ := adaptor.NewRecorder(up, failWriter{})
	p, err := r.Allocate(100, s0)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Deallocate(p, s0); err != nil {
		t.Fatal(err)
	}
	if r.Err() == nil {
		t.Error("the writer's error was lost")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// OnOOM retries while its handler asks, counts the retries, and tells its
// observers of the final failure once.
func TestOnOOM(t *testing.T) {
	_, up := newUpstream(t)
	var mu sync.Mutex
	calls := 0
	o, _ := adaptor.NewOnOOM(up, func(int, uint64, int) bool { mu.Lock(); calls++; mu.Unlock(); return true })
	told := 0
	o.AddOOMObserver(func(*gpumem.OutOfMemoryError) { told++ })
	p, err := o.Allocate(200<<20, s0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = o.Allocate(200<<20, s0)
	if !errors.Is(err, gpumem.ErrOutOfMemory) || calls != oomhooks.MaxAttempts || told != 1 {
		t.Errorf("%v after %d handler calls, observers told %d times", err, calls, told)
	}
	if own := o.Stats(0).NumAllocRetries - up.Stats(0).NumAllocRetries; own != oomhooks.MaxAttempts {
		t.Errorf("OnOOM added %d retries to NumAllocRetries, want %d", own, oomhooks.MaxAttempts)
	}
	if _, err := o.Allocate(0, s0); !errors.Is(err, gpumem.ErrInvalidValue) || calls != oomhooks.MaxAttempts {
		t.Errorf("zero bytes: %v (the handler must not be asked)", err)
	}
	_ = o.Deallocate(p, s0)
}

// Adaptors stack, and the optional abilities are found through them.
func TestChain(t *testing.T) {
	_, up := newUpstream(t)
	l, _ := adaptor.NewLimit(up, 1<<30)
	st, _ := adaptor.NewStatistics(l)
	var buf bytes.Buffer
	r, _ := adaptor.NewRecorder(st, &buf)
	o, _ := adaptor.NewOnOOM(r, nil)
	p, err := o.Allocate(4096, s0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := gpumem.SnapshotOf(o); !ok {
		t.Error("SnapshotOf does not reach the caching allocator")
	}
	if err := o.Deallocate(p, s0); err != nil {
		t.Fatal(err)
	}
	if st.Stats(0).Allocation[gpumem.StatAll].Allocated != 1 || l.Used(0) != 0 || buf.String() != "a 0 4096 0\nf 0 0\n" {
		t.Errorf("through the chain: %+v, used %d, trace %q", st.Stats(0).Allocation, l.Used(0), buf.String())
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := up.Allocate(1, s0); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("closing the outermost adaptor left the allocator open: %v", err)
	}
}

// countingUp counts the allocations asked of it.
type countingUp struct {
	gpumem.Allocator
	calls int
}

func (c *countingUp) Allocate(n uint64, s gpumem.Stream) (gpumem.Ptr, error) {
	c.calls++
	return c.Allocator.Allocate(n, s)
}

// TestZeroSizeNeverReachesTheUpstream: every adaptor refuses a zero-byte
// allocation itself, the upstream not asked (adaptor/doc.go's step 1).
func TestZeroSizeNeverReachesTheUpstream(t *testing.T) {
	_, up := newUpstream(t)
	cu := &countingUp{Allocator: up}
	o, err := adaptor.NewOnOOM(cu, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := adaptor.NewLimit(cu, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	st, err := adaptor.NewStatistics(cu)
	if err != nil {
		t.Fatal(err)
	}
	for name, a := range map[string]gpumem.Allocator{"OnOOM": o, "Limit": l, "Statistics": st} {
		if _, err := a.Allocate(0, s0); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("%s: zero bytes: %v, want ErrInvalidValue", name, err)
		}
	}
	if cu.calls != 0 {
		t.Errorf("the upstream was asked %d times for zero bytes", cu.calls)
	}
}
