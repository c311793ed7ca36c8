// Package allocatortest is the conformance suite for the allocator contract
// (gpumem.Allocator, documented in the root package's resource.go) that
// every allocator and every adaptor of the project passes, as backendtest
// is for backends.
//
// A test runs it with a function that builds the allocator on a backend:
//
//	func TestConformance(t *testing.T) {
//		allocatortest.Run(t, func(t *testing.T, b gpumem.Backend) gpumem.Allocator {
//			a, err := caching.New(b, caching.DefaultOptions())
//			if err != nil {
//				t.Fatal(err)
//			}
//			return a
//		})
//	}
//
// Each subtest opens a fresh backend: by default a small simulated device
// (SmallDevice) whose leaks simtest.Check reports, so that whatever the allocator leaves
// on the device once it is closed fails the subtest with the stack that
// made it. The suite closes the allocator at the end of every subtest (the
// factory may also close it in a cleanup: Close twice returns nil).
//
// The subtests cover zero and impossibly large sizes, foreign, interior
// and twice-freed pointers on Deallocate (refused with no side effect),
// freeing on another stream than the allocation's, RecordStream, use after
// Close, the arithmetic of the statistics and ResetPeakStats, EmptyCache,
// the OOM handler (called, retried, bounded by oomhooks.MaxAttempts) and
// observers (told once per failure), use from many goroutines (run the
// suite with -race) with a check that live allocations never overlap, and
// Close releasing live allocations.
//
// An allocator known to break a rule of the contract lists it in
// Options.Known (see Difference): the check is then logged, not failed,
// until the allocator is fixed, when the suite fails until the mark goes.
package allocatortest

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/simtest"
)

// Factory builds the allocator under test on backend b. It fails t when it
// cannot.
type Factory func(t *testing.T, b gpumem.Backend) gpumem.Allocator

// SmallDevice is the simulated device the suite uses by default: 256 MiB,
// with 2 MiB granularity and pools that grow by 2 MiB, so that running out
// of memory is cheap.
var SmallDevice = sim.DeviceConfig{
	Name:            "allocatortest small device",
	Capacity:        256 << 20,
	Granularity:     2 << 20,
	PoolGranularity: 2 << 20,
}

// Options adjust the suite. The zero value runs every subtest on device 0
// of a simulator of one SmallDevice.
type Options struct {
	// Device is the device ordinal the suite allocates on.
	Device int
	// Open returns the backend of one subtest; nil: a simulator with one
	// SmallDevice per device up to Device. A backend that is not a
	// simulator runs the suite without the leak check; sizes are then
	// taken from its MemInfo.
	Open func(t *testing.T) gpumem.Backend
	// NoStatistics skips the checks of Stats' allocation figures, for an
	// allocator that documents that it keeps none.
	NoStatistics bool
	// Known lists the differences from the contract that the allocator is
	// known to have: each is then logged instead of failing the suite, and
	// a listed difference that is no longer seen fails it (so that the
	// mark goes once the allocator is fixed). Listing one is a record of a
	// bug, not a permission.
	Known []Difference
}

// Difference names a way in which an allocator is known to break the
// contract of resource.go.
type Difference string

// The differences the suite knows how to tolerate.
const (
	// StatsAfterClose: Stats after Close returns the figures of before it,
	// not zero.
	StatsAfterClose Difference = "Stats after Close is not zero"
	// UnboundedOOMRetry: the OOM handler is asked more than
	// oomhooks.MaxAttempts times for one allocation while it answers yes.
	UnboundedOOMRetry Difference = "the OOM handler is asked more than oomhooks.MaxAttempts times"
)

// known reports whether the allocator is known to have difference d.
func (f *fixture) known(d Difference) bool {
	for _, k := range f.options.Known {
		if k == d {
			return true
		}
	}
	return false
}

// check reports a check of the contract that difference d would break: ok
// says whether the allocator kept the contract. A failure of a known
// difference is logged; a known difference kept fails the test.
func (f *fixture) check(t *testing.T, d Difference, ok bool, format string, args ...any) {
	t.Helper()
	switch {
	case !ok && f.known(d):
		t.Logf("known difference (%s): "+format, append([]any{d}, args...)...)
	case !ok:
		t.Errorf(format, args...)
	case f.known(d):
		t.Errorf("the known difference %q is no longer seen: remove it from Options.Known", d)
	}
}

// fixture is what a subtest works with.
type fixture struct {
	newAlloc Factory
	b        gpumem.Backend
	a        gpumem.Allocator
	dev      int
	s, s2    gpumem.Stream // two non-blocking streams of dev
	total    uint64        // the device's memory
	options  Options
}

// Run runs the suite on the allocators newAlloc builds. At most one Options
// may be given.
func Run(t *testing.T, newAlloc Factory, opts ...Options) {
	t.Helper()
	if len(opts) > 1 {
		t.Fatalf("allocatortest: Run takes at most one Options, got %d", len(opts))
	}
	var o Options
	if len(opts) == 1 {
		o = opts[0]
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, f *fixture)
	}{
		{"ZeroSize", testZeroSize},
		{"HugeSize", testHugeSize},
		{"ForeignPointers", testForeignPointers},
		{"DoubleFree", testDoubleFree},
		{"FreeOnAnotherStream", testFreeOnAnotherStream},
		{"RecordStream", testRecordStream},
		{"DestroyedStream", testDestroyedStream},
		{"BadStreams", testBadStreams},
		{"OtherDeviceStream", testOtherDeviceStream},
		{"Closed", testClosed},
		{"Statistics", testStatistics},
		{"EmptyCache", testEmptyCache},
		{"OOMHandler", testOOMHandler},
		{"OOMRetryBound", testOOMRetryBound},
		{"OOMObservers", testOOMObservers},
		{"Concurrent", testConcurrent},
		{"CloseReleases", testCloseReleases},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, setup(t, newAlloc, o))
		})
	}
}

// setup opens the backend, builds the allocator and two streams, and
// registers the cleanups: the allocator is closed before the streams are
// destroyed, and both before the leak check.
func setup(t *testing.T, newAlloc Factory, o Options) *fixture {
	t.Helper()
	var b gpumem.Backend
	if o.Open != nil {
		b = o.Open(t)
	} else {
		devs := make([]sim.DeviceConfig, o.Device+1)
		for i := range devs {
			devs[i] = SmallDevice
		}
		g, err := sim.New(sim.Config{Devices: devs})
		must(t, err, "sim.New")
		// Registered first, run last: after the allocator is closed and
		// the streams destroyed.
		t.Cleanup(func() {
			simtest.Check(t, g)
			_ = g.Close()
		})
		b = g
	}
	f := &fixture{newAlloc: newAlloc, b: b, dev: o.Device, options: o}
	_, total, err := b.MemInfo(f.dev)
	must(t, err, "MemInfo")
	f.total = total
	f.s, err = b.StreamCreate(f.dev, gpumem.StreamNonBlocking, 0)
	must(t, err, "StreamCreate")
	f.s2, err = b.StreamCreate(f.dev, gpumem.StreamNonBlocking, 0)
	must(t, err, "StreamCreate")
	t.Cleanup(func() {
		for _, s := range []gpumem.Stream{f.s, f.s2} {
			if err := b.StreamSynchronize(s); err != nil {
				t.Errorf("StreamSynchronize: %v", err)
			}
			if err := b.StreamDestroy(s); err != nil {
				t.Errorf("StreamDestroy: %v", err)
			}
		}
	})
	f.a = newAlloc(t, b)
	if f.a == nil {
		t.Fatal("allocatortest: the factory returned a nil allocator")
	}
	t.Cleanup(func() {
		if err := f.a.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return f
}

// must fails the test on err.
func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// wantIs fails the test unless err matches target.
func wantIs(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: got %v, want an error matching %v", what, err, target)
	}
}

// alloc allocates size bytes on s, failing the test on error.
func (f *fixture) alloc(t *testing.T, size uint64, s gpumem.Stream) gpumem.Ptr {
	t.Helper()
	p, err := f.a.Allocate(size, s)
	must(t, err, "Allocate")
	if p == 0 {
		t.Fatalf("Allocate(%d) returned a nil pointer and no error", size)
	}
	return p
}

// free frees p on s, failing the test on error.
func (f *fixture) free(t *testing.T, p gpumem.Ptr, s gpumem.Stream) {
	t.Helper()
	must(t, f.a.Deallocate(p, s), "Deallocate")
}

// roundTrip checks that the allocator still serves and frees a request.
func (f *fixture) roundTrip(t *testing.T, what string) {
	t.Helper()
	p, err := f.a.Allocate(4096, f.s)
	if err != nil {
		t.Fatalf("after %s, Allocate(4096): %v", what, err)
	}
	if err := f.a.Deallocate(p, f.s); err != nil {
		t.Fatalf("after %s, Deallocate: %v", what, err)
	}
}

func testZeroSize(t *testing.T, f *fixture) {
	_, err := f.a.Allocate(0, f.s)
	wantIs(t, err, gpumem.ErrInvalidValue, "Allocate(0)")
	f.roundTrip(t, "Allocate(0)")
}

// testHugeSize asks for more than the device has, and for the largest size
// there is. A size above the device's memory (checked up to four times it)
// is exhaustion: an *OutOfMemoryError matching ErrOutOfMemory, counted in
// NumOOMs and told to the observers like any other. An absurd size (near
// 2^64, above any device there is) may also be ErrInvalidValue.
func testHugeSize(t *testing.T, f *fixture) {
	var told int
	f.a.AddOOMObserver(func(*gpumem.OutOfMemoryError) { told++ })
	before := f.a.Stats(f.dev).NumOOMs
	above := []uint64{f.total + 1, 2 * f.total, 4 * f.total}
	for i, size := range append(above, math.MaxUint64/2, math.MaxUint64) {
		p, err := f.a.Allocate(size, f.s)
		if err == nil {
			t.Errorf("Allocate(%d) on a device of %d bytes succeeded", size, f.total)
			_ = f.a.Deallocate(p, f.s)
			continue
		}
		var oom *gpumem.OutOfMemoryError
		isOOM := errors.As(err, &oom) && errors.Is(err, gpumem.ErrOutOfMemory)
		switch {
		case i < len(above) && !isOOM:
			t.Errorf("Allocate(%d) on a device of %d bytes: %v, want an *OutOfMemoryError", size, f.total, err)
		case !isOOM && !errors.Is(err, gpumem.ErrInvalidValue):
			t.Errorf("Allocate(%d): %v, want ErrInvalidValue or an *OutOfMemoryError", size, err)
		case errors.Is(err, gpumem.ErrOutOfMemory) && !errors.As(err, &oom):
			t.Errorf("Allocate(%d): %v matches ErrOutOfMemory but is no *OutOfMemoryError", size, err)
		case errors.Is(err, gpumem.ErrInvalidValue) && errors.Is(err, gpumem.ErrOutOfMemory):
			t.Errorf("Allocate(%d): %v matches two sentinels", size, err)
		case isOOM && !f.options.NoStatistics && !strings.Contains(oom.Summary(), "memory summary"):
			t.Errorf("Allocate(%d): the out-of-memory error carries no memory summary (OutOfMemoryError.Stats)", size)
		}
	}
	if told < len(above) {
		t.Errorf("the observers were told of %d failures, want at least %d", told, len(above))
	}
	if !f.options.NoStatistics {
		if n := f.a.Stats(f.dev).NumOOMs - before; n < int64(len(above)) {
			t.Errorf("NumOOMs grew by %d, want at least %d", n, len(above))
		}
	}
	f.roundTrip(t, "huge allocations")
}

// testForeignPointers frees what the allocator did not hand out: an
// address it never used, a pointer inside a live allocation, and device
// memory from the backend itself. Each is ErrInvalidValue and changes
// nothing: the live allocation then frees normally.
func testForeignPointers(t *testing.T, f *fixture) {
	p := f.alloc(t, 1<<16, f.s)
	q, err := f.b.Malloc(f.dev, 1<<16)
	must(t, err, "backend Malloc")
	defer func() { must(t, f.b.Free(f.dev, q), "backend Free") }()
	for _, c := range []struct {
		what string
		p    gpumem.Ptr
	}{
		{"a nil pointer", 0},
		{"an address never handed out", gpumem.Ptr(0x1000)},
		{"an interior pointer", p + 512},
		{"backend memory", q},
	} {
		wantIs(t, f.a.Deallocate(c.p, f.s), gpumem.ErrInvalidValue, "Deallocate of "+c.what)
		if c.p != 0 {
			wantIs(t, f.a.RecordStream(c.p, f.s2), gpumem.ErrInvalidValue, "RecordStream of "+c.what)
		}
	}
	f.free(t, p, f.s)
	f.roundTrip(t, "foreign frees")
}

func testDoubleFree(t *testing.T, f *fixture) {
	p := f.alloc(t, 1000, f.s)
	f.free(t, p, f.s)
	wantIs(t, f.a.Deallocate(p, f.s), gpumem.ErrInvalidValue, "second Deallocate")
	f.roundTrip(t, "a double free")
}

// testFreeOnAnotherStream frees on a stream other than the allocation's,
// which the contract allows (s is where the last use is ordered).
func testFreeOnAnotherStream(t *testing.T, f *fixture) {
	p := f.alloc(t, 1<<20, f.s)
	f.free(t, p, f.s2)
	q := f.alloc(t, 1<<20, f.s2)
	f.free(t, q, f.s)
	if !f.options.NoStatistics {
		st := f.a.Stats(f.dev)
		if c := st.Allocation[gpumem.StatAll].Current; c != 0 {
			t.Errorf("Allocation.Current = %d after every allocation was freed", c)
		}
	}
	f.roundTrip(t, "frees on other streams")
}

func testRecordStream(t *testing.T, f *fixture) {
	p := f.alloc(t, 1<<20, f.s)
	must(t, f.a.RecordStream(p, f.s2), "RecordStream on another stream")
	must(t, f.a.RecordStream(p, f.s2), "RecordStream twice")
	must(t, f.a.RecordStream(p, f.s), "RecordStream on the allocation's stream")
	f.free(t, p, f.s)
	wantIs(t, f.a.RecordStream(p, f.s2), gpumem.ErrInvalidValue, "RecordStream after the free")
	f.roundTrip(t, "RecordStream")
}

// testClosed checks every call after Close: ErrClosed, but Close (nil) and
// Stats (zero).
func testClosed(t *testing.T, f *fixture) {
	p := f.alloc(t, 1000, f.s)
	must(t, f.a.Close(), "Close")
	must(t, f.a.Close(), "second Close")
	_, err := f.a.Allocate(1000, f.s)
	wantIs(t, err, gpumem.ErrClosed, "Allocate after Close")
	wantIs(t, f.a.Deallocate(p, f.s), gpumem.ErrClosed, "Deallocate after Close")
	wantIs(t, f.a.RecordStream(p, f.s2), gpumem.ErrClosed, "RecordStream after Close")
	wantIs(t, f.a.EmptyCache(), gpumem.ErrClosed, "EmptyCache after Close")
	st := f.a.Stats(f.dev)
	f.check(t, StatsAfterClose, st == (gpumem.MemoryStats{}),
		"Stats after Close is not zero (Allocation.Current %d, ReservedBytes.Current %d, NumDeviceAlloc %d)",
		st.Allocation[gpumem.StatAll].Current, st.ReservedBytes[gpumem.StatAll].Current, st.NumDeviceAlloc)
	f.a.ResetPeakStats(f.dev) // must not panic
	f.a.SetOOMHandler(nil)
	f.a.AddOOMObserver(func(*gpumem.OutOfMemoryError) {})
}
