package managed

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/simtest"
)

const mib = 1 << 20

var errInjected = errors.New("injected failure")

var (
	dev0 = gpumem.DeviceLocation(0)
	host = gpumem.HostLocation()
	s0   = gpumem.Stream{Device: 0}
)

func TestHintsOnAllocation(t *testing.T) {
	r, a := setup(t, sim.Config{Devices: []sim.DeviceConfig{{}, {}}}, Options{})
	s1 := gpumem.Stream{Device: 1}
	d, err := a.Alloc(8*mib, gpumem.DeviceLocation(1), s1)
	if err != nil {
		t.Fatal(err)
	}
	h, err := a.Alloc(8*mib, host, s1)
	if err != nil {
		t.Fatal(err)
	}
	if loc, err := r.RangeLocation(d.Ptr, d.Size, gpumem.RangePreferredLocation); err != nil || loc != gpumem.DeviceLocation(1) {
		t.Fatalf("device buffer prefers %v (%v), want device 1", loc, err)
	}
	if c := r.calls(d.Ptr, d.Size, gpumem.AdviseSetAccessedBy); len(c) != 0 {
		t.Fatalf("device buffer has accessed-by advice %v, want none", c)
	}
	if loc, err := r.RangeLocation(h.Ptr, h.Size, gpumem.RangePreferredLocation); err != nil || loc != host {
		t.Fatalf("host buffer prefers %v (%v), want host", loc, err)
	}
	c := r.calls(h.Ptr, h.Size, gpumem.AdviseSetAccessedBy)
	if len(c) != 1 || c[0].loc != gpumem.DeviceLocation(1) {
		t.Fatalf("host buffer accessed-by advice %v, want device 1 once", c)
	}
	if d.Location() != gpumem.DeviceLocation(1) || h.Location() != host {
		t.Fatalf("locations %v %v", d.Location(), h.Location())
	}
	if !a.IsManaged(d.Ptr) || !a.IsManaged(h.Ptr) || a.IsManaged(d.Ptr+512) {
		t.Fatal("IsManaged wrong")
	}
	res := a.Residency()
	if res[gpumem.DeviceLocation(1)] != 8*mib || res[host] != 8*mib {
		t.Fatalf("residency %v", res)
	}
	if err := a.VerifyResidency(); err != nil {
		t.Fatal(err)
	}
	if err := d.Free(); err != nil {
		t.Fatal(err)
	}
	if err := h.Free(); err != nil {
		t.Fatal(err)
	}
	if len(a.Residency()) != 0 {
		t.Fatalf("residency after frees: %v", a.Residency())
	}
}

func TestToMovesWithoutCopy(t *testing.T) {
	r, a := setup(t, sim.Config{Devices: []sim.DeviceConfig{{}, {}}}, Options{})
	b, err := a.Alloc(8*mib, dev0, s0)
	if err != nil {
		t.Fatal(err)
	}
	data := pattern(int(b.Size), 3)
	if err := r.CopyToDevice(b.Ptr, data); err != nil {
		t.Fatal(err)
	}
	mallocs := r.Calls("MallocManaged")
	for _, loc := range []gpumem.Location{host, gpumem.DeviceLocation(1), dev0, host} {
		nb, err := b.To(loc, ToOptions{Stream: s0})
		if err != nil {
			t.Fatalf("To(%v): %v", loc, err)
		}
		if nb != b || nb.Ptr != b.Ptr || b.Location() != loc {
			t.Fatalf("To(%v) returned %v, want the same buffer moved", loc, nb)
		}
		if err := r.StreamSynchronize(s0); err != nil {
			t.Fatal(err)
		}
		if got := r.Calls("MallocManaged"); got != mallocs {
			t.Fatalf("To(%v) allocated: MallocManaged %d -> %d", loc, mallocs, got)
		}
		res := a.Residency()
		if res[loc] != b.Size || len(res) != 1 {
			t.Fatalf("after To(%v) residency %v", loc, res)
		}
		if sr := r.Residency(b.Ptr, b.Size); sr[loc] != b.Size {
			t.Fatalf("after To(%v) the simulator has the pages at %v", loc, sr)
		}
		if err := a.VerifyResidency(); err != nil {
			t.Fatalf("after To(%v): %v", loc, err)
		}
	}
	// No move advised an accessed-by device: a device-pool buffer never
	// had one, and the moves to the host add none.
	if c := r.calls(b.Ptr, b.Size, gpumem.AdviseSetAccessedBy); len(c) != 0 {
		t.Fatalf("accessed-by advice after moves: %v, want none", c)
	}
	got := make([]byte, b.Size)
	if err := r.CopyFromDevice(got, b.Ptr); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("data changed by moves (%v)", err)
	}
	if m := r.Migrated(); m.DeviceToHost == 0 || m.HostToDevice == 0 || m.DeviceToDevice == 0 {
		t.Fatalf("migrations %+v", m)
	}
	// Moving to where it is does nothing.
	before := r.Calls("Prefetch")
	if _, err := b.To(host, ToOptions{}); err != nil || r.Calls("Prefetch") != before {
		t.Fatalf("a move to the current location prefetched (%v)", err)
	}
	// Freed while moved: the pool's hints come back.
	p := b.Ptr
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	if loc, _ := r.RangeLocation(p, 8*mib, gpumem.RangePreferredLocation); loc != dev0 {
		t.Fatalf("freed block prefers %v, want its pool's device 0", loc)
	}
	if acc := r.accessedBy(p, 8*mib); len(acc) != 0 {
		t.Fatalf("freed block accessed by %v, want none", acc)
	}
}

func TestNonBlockingSkipsSync(t *testing.T) {
	r, a := setup(t, sim.Config{Manual: true}, Options{})
	s, err := r.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.StreamDestroy(s)
	b, err := a.Alloc(4*mib, dev0, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.To(host, ToOptions{Stream: s, NonBlocking: true}); err != nil {
		t.Fatal(err)
	}
	if !r.Step(s) {
		t.Fatal("non-blocking move to the host: no prefetch left queued")
	}
	if _, err := b.To(dev0, ToOptions{Stream: s}); err != nil {
		t.Fatal(err)
	}
	if !r.Step(s) {
		t.Fatal("move to a device synchronized")
	}
	if _, err := b.To(host, ToOptions{Stream: s}); err != nil {
		t.Fatal(err)
	}
	if r.Step(s) {
		t.Fatal("blocking move to the host returned with its prefetch still queued")
	}
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
}

func TestCopyForcesCopy(t *testing.T) {
	r, a := setup(t, sim.Config{}, Options{})
	b, err := a.Alloc(3*mib+100, dev0, s0)
	if err != nil {
		t.Fatal(err)
	}
	data := pattern(int(b.Size), 9)
	if err := r.CopyToDevice(b.Ptr, data); err != nil {
		t.Fatal(err)
	}
	for _, loc := range []gpumem.Location{host, dev0} {
		c, err := b.To(loc, ToOptions{Stream: s0, Copy: true})
		if err != nil {
			t.Fatal(err)
		}
		if c == b || c.Ptr == b.Ptr || c.Location() != loc || b.Location() != dev0 {
			t.Fatalf("copy to %v: %v from %v", loc, c, b)
		}
		if err := r.StreamSynchronize(s0); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, c.Size)
		if err := r.CopyFromDevice(got, c.Ptr); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("copy to %v differs (%v)", loc, err)
		}
		if err := c.Free(); err != nil {
			t.Fatal(err)
		}
	}
	// CopyTo follows MoveOnCopy.
	c, err := a.CopyTo(b, host, s0)
	if err != nil || c == b {
		t.Fatalf("CopyTo without MoveOnCopy: %v %v", c, err)
	}
	if err := c.Free(); err != nil {
		t.Fatal(err)
	}
	a.opts.MoveOnCopy = true
	c, err = a.CopyTo(b, host, s0)
	if err != nil || c != b || b.Location() != host {
		t.Fatalf("CopyTo with MoveOnCopy: %v %v", c, err)
	}
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
}

func TestManageUnmanageKeepData(t *testing.T) {
	r, a := setup(t, sim.Config{}, Options{})
	const n = 5*mib + 512
	data := pattern(n, 1)
	dsrc, err := r.Malloc(0, n)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Free(0, dsrc)
	hsrc, err := r.MallocHost(n)
	if err != nil {
		t.Fatal(err)
	}
	defer r.FreeHost(hsrc)
	if err := r.CopyToDevice(dsrc, data); err != nil {
		t.Fatal(err)
	}
	if err := r.CopyToDevice(hsrc, data); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		src gpumem.Ptr
		loc gpumem.Location
	}{{dsrc, dev0}, {hsrc, host}} {
		b, err := a.Manage(tc.src, n, tc.loc, s0)
		if err != nil {
			t.Fatal(err)
		}
		if !a.IsManaged(b.Ptr) || a.IsManaged(tc.src) || b.Location() != tc.loc {
			t.Fatalf("Manage from %v: %v", tc.loc, b)
		}
		if err := r.StreamSynchronize(s0); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, n)
		if err := r.CopyFromDevice(got, b.Ptr); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Manage from %v changed the data (%v)", tc.loc, err)
		}
		for _, dst := range []gpumem.Location{dev0, host} {
			p, err := a.Unmanage(b, dst, s0)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.StreamSynchronize(s0); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, n)
			if err := r.CopyFromDevice(got, p); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("Unmanage to %v changed the data (%v)", dst, err)
			}
			if a.IsManaged(p) {
				t.Fatal("unmanaged copy reported managed")
			}
			if dst.Kind == gpumem.LocationHost {
				err = r.FreeHost(p)
			} else {
				err = r.Free(0, p)
			}
			if err != nil {
				t.Fatalf("Unmanage to %v did not give ordinary memory: %v", dst, err)
			}
		}
		// Manage of a managed buffer copies, or with MoveOnCopy moves.
		c, err := a.Manage(b.Ptr, n, host, s0)
		if err != nil || c == b {
			t.Fatalf("Manage of a managed buffer: %v %v", c, err)
		}
		if err := c.Free(); err != nil {
			t.Fatal(err)
		}
		a.opts.MoveOnCopy = true
		c, err = a.Manage(b.Ptr, n, host, s0)
		a.opts.MoveOnCopy = false
		if err != nil || c != b || b.Location() != host {
			t.Fatalf("Manage with MoveOnCopy: %v %v", c, err)
		}
		if err := b.Free(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestGuard(t *testing.T) {
	cfg := sim.Config{Devices: []sim.DeviceConfig{{Capacity: 1 << 30}}}
	r, a := setup(t, cfg, Options{})
	if l, ok := a.Limit(); l != 512*mib || !ok {
		t.Fatalf("limit %d (%v), want half of 1 GiB", l, ok)
	}
	var observed []*gpumem.OutOfMemoryError
	a.AddOOMObserver(func(e *gpumem.OutOfMemoryError) { observed = append(observed, e) })
	keep, err := a.Alloc(300*mib, dev0, s0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Alloc(300*mib, host, s0)
	var oom *gpumem.OutOfMemoryError
	if !errors.Is(err, gpumem.ErrOutOfMemory) || !errors.As(err, &oom) {
		t.Fatalf("beyond the guard: %v, want an OutOfMemoryError", err)
	}
	if oom.Allocator != "managed" || oom.Limit != 512*mib || !strings.Contains(oom.Hint, "AllowOversubscription") {
		t.Fatalf("guard error %+v", oom)
	}
	if len(observed) != 1 || observed[0].Allocator != "managed" {
		t.Fatalf("observers saw %v", observed)
	}
	if l, _ := a.Limit(); a.Reserved() > l {
		t.Fatalf("reserved %d above the limit", a.Reserved())
	}
	if err := keep.Free(); err != nil {
		t.Fatal(err)
	}

	// The explicit opt-in allows it.
	b := newAlloc(t, r, r, Options{AllowOversubscription: true})
	if l, ok := b.Limit(); ok || l != 0 {
		t.Fatalf("oversubscription allowed but a limit is set: %d", l)
	}
	// A fraction that rounds down to 0 bytes is a cap of 0, told apart
	// from no cap.
	z := newAlloc(t, r, r, Options{MaxDeviceFraction: 1e-12})
	if l, ok := z.Limit(); !ok || l != 0 {
		t.Fatalf("a fraction rounding to 0 bytes: Limit() = %d, %v, want 0, true", l, ok)
	}
	if _, err := z.Alloc(mib, dev0, s0); !errors.Is(err, gpumem.ErrOutOfMemory) {
		t.Fatalf("Alloc under a cap of 0 bytes: %v, want ErrOutOfMemory", err)
	}
	x, err := b.Alloc(700*mib, dev0, s0)
	if err != nil {
		t.Fatalf("with AllowOversubscription: %v", err)
	}
	if err := x.Free(); err != nil {
		t.Fatal(err)
	}
	// A raised fraction allows it too.
	c := newAlloc(t, r, r, Options{MaxDeviceFraction: 0.9})
	if _, err := c.Allocate(700*mib, s0); err != nil {
		t.Fatalf("with MaxDeviceFraction 0.9: %v", err)
	}
}

func TestInjectedFaultsLeakNothing(t *testing.T) {
	ops := []string{"Advise", "Prefetch", "MallocManaged", "MemcpyAsync", "StreamSynchronize", "Malloc", "MallocHost", "RangeLocation"}
	for _, op := range ops {
		for nth := 1; nth <= 3; nth++ {
			t.Run(op, func(t *testing.T) {
				r, a := setup(t, sim.Config{}, Options{})
				src, err := r.Malloc(0, 4*mib)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Free(0, src)
				base := r.Calls(op)
				r.InjectFault(op, nth, errInjected)
				var errs []error
				var live []*Buffer
				keep := func(b *Buffer, err error) {
					errs = append(errs, err)
					if err == nil && b != nil {
						live = append(live, b)
					}
				}
				keep(a.Alloc(4*mib, host, s0))
				keep(a.Alloc(6*mib, dev0, s0))
				keep(a.Manage(src, 4*mib, dev0, s0))
				for _, b := range append([]*Buffer(nil), live...) {
					keep(b.To(host, ToOptions{Stream: s0}))
					keep(b.To(dev0, ToOptions{Stream: s0, Copy: true}))
					p, err := a.Unmanage(b, host, s0)
					errs = append(errs, err)
					if err == nil {
						_ = r.FreeHost(p)
					}
					p, err = a.Unmanage(b, dev0, s0)
					errs = append(errs, err)
					if err == nil {
						_ = r.Free(0, p)
					}
				}
				errs = append(errs, a.VerifyResidency())
				r.ClearFaults()
				seen := map[*Buffer]bool{}
				for _, b := range live {
					if !seen[b] {
						seen[b] = true
						if err := b.Free(); err != nil {
							t.Errorf("free after faults: %v", err)
						}
					}
				}
				failed := false
				for _, err := range errs {
					if errors.Is(err, errInjected) {
						failed = true
					}
				}
				if r.Calls(op)-base >= nth && !failed {
					t.Errorf("fault in call %d of %s returned no error", nth, op)
				}
				if err := a.EmptyCache(); err != nil {
					t.Fatal(err)
				}
				if a.Reserved() != 0 || len(a.Residency()) != 0 {
					t.Errorf("after EmptyCache: reserved %d, residency %v", a.Reserved(), a.Residency())
				}
			})
		}
	}
}

func TestBadInput(t *testing.T) {
	r, a := setup(t, sim.Config{Devices: []sim.DeviceConfig{{}, {}}}, Options{})
	inval := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("%s: %v, want ErrInvalidValue", what, err)
		}
	}
	_, err := a.Alloc(0, dev0, s0)
	inval("zero size", err)
	_, err = a.Alloc(1<<63, dev0, s0)
	inval("huge size", err)
	_, err = a.Alloc(1, gpumem.Location{}, s0)
	inval("invalid location", err)
	_, err = a.Alloc(1, gpumem.DeviceLocation(5), s0)
	inval("no such device", err)
	_, err = a.Alloc(1, gpumem.DeviceLocation(1), s0)
	inval("stream of another device", err)
	_, err = a.Allocate(1, gpumem.Stream{Device: -1})
	inval("negative device", err)
	inval("foreign free", a.Deallocate(0x1234, s0))
	inval("foreign record", a.RecordStream(0x1234, s0))
	_, err = a.Manage(0, 10, dev0, s0)
	inval("Manage null", err)
	_, err = a.Manage(0x1000, 0, dev0, s0)
	inval("Manage zero", err)
	_, err = a.Unmanage(nil, host, s0)
	inval("Unmanage nil", err)
	_, err = a.CopyTo(nil, host, s0)
	inval("CopyTo nil", err)
	b, err := a.Alloc(1000, dev0, s0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.To(gpumem.DeviceLocation(9), ToOptions{})
	inval("To no device", err)
	_, err = b.To(host, ToOptions{Stream: gpumem.Stream{Device: 7}})
	inval("To bad stream", err)
	if err := a.Deallocate(b.Ptr, s0); err != nil {
		t.Fatal(err)
	}
	inval("double free", b.Free())
	inval("double deallocate", a.Deallocate(b.Ptr, s0))
	_, err = b.To(host, ToOptions{})
	inval("To after free", err)
	_, err = b.To(host, ToOptions{Copy: true})
	inval("copy after free", err)
	_, err = a.Unmanage(b, host, s0)
	inval("Unmanage after free", err)

	for _, o := range []Options{{MaxDeviceFraction: 2}, {SegmentSize: 3 * mib}, {PageSize: 3000}} {
		o.Force = true
		if _, err := New(r, o); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("options %+v: %v", o, err)
		}
	}
	if _, err := New(nil, Options{Force: true}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Error("nil backend accepted")
	}
	if _, err := New(r, Options{Force: true, CoarseGrain: true}); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("coarse grain on CUDA semantics: %v", err)
	}
	g := simtest.New(t, sim.Config{Devices: []sim.DeviceConfig{{NoManaged: true}}})
	defer g.Close()
	if _, err := New(g, Options{Force: true}); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("device without managed memory: %v", err)
	}

	// After Close every call fails with ErrClosed.
	c := newAlloc(t, r, r, Options{})
	live, err := c.Alloc(100, dev0, s0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	closed := []error{c.Deallocate(live.Ptr, s0), live.Free(), c.EmptyCache(), c.VerifyResidency(), c.RecordStream(live.Ptr, s0)}
	_, err = c.Allocate(1, s0)
	closed = append(closed, err)
	_, err = live.To(host, ToOptions{})
	closed = append(closed, err)
	for i, err := range closed {
		if !errors.Is(err, gpumem.ErrClosed) {
			t.Errorf("call %d after Close: %v", i, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestCannotMigrate(t *testing.T) {
	r := newRecorder(t, sim.Config{})
	r.noMigrate = true
	a := newAlloc(t, r, r, Options{})
	if a.CanMigrate(0) {
		t.Fatal("CanMigrate with concurrent managed access 0")
	}
	b, err := a.Alloc(4*mib, dev0, s0)
	if err != nil {
		t.Fatal(err)
	}
	if a.Residency()[host] != 4*mib {
		t.Fatalf("residency %v, want host", a.Residency())
	}
	prefetches := r.Calls("Prefetch")
	for _, loc := range []gpumem.Location{host, dev0} {
		if _, err := b.To(loc, ToOptions{Stream: s0}); err != nil {
			t.Fatal(err)
		}
		if r.Calls("Prefetch") != prefetches {
			t.Fatalf("To(%v) prefetched on a device that cannot migrate", loc)
		}
		if pl, _ := r.RangeLocation(b.Ptr, b.Size, gpumem.RangePreferredLocation); pl != loc {
			t.Fatalf("To(%v) left the advice at %v", loc, pl)
		}
		if res := a.Residency(); res[host] != 4*mib || len(res) != 1 {
			t.Fatalf("residency %v, want all at the host", res)
		}
	}
	if err := a.VerifyResidency(); err != nil {
		t.Fatal(err)
	}
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
}

func TestCoarseGrainOnHIP(t *testing.T) {
	r := newRecorder(t, sim.Config{})
	r.name = "hip"
	a := newAlloc(t, r, r, Options{CoarseGrain: true})
	b, err := a.Alloc(mib, dev0, s0)
	if err != nil {
		t.Fatal(err)
	}
	if c := r.calls(b.Ptr, b.Size, gpumem.AdviseSetCoarseGrain); len(c) != 1 {
		t.Fatalf("coarse-grain advice %v, want once for the segment", c)
	}
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
}

func TestSegmentSizeCarvesChunks(t *testing.T) {
	r, a := setup(t, sim.Config{}, Options{SegmentSize: 64 * mib})
	var bufs []*Buffer
	for _, n := range []uint64{100, 5 * mib, 300 * 1024, 12 * mib, 3 * mib} {
		b, err := a.Alloc(n, dev0, s0)
		if err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, b)
	}
	// 2 MiB + 20 MiB (+ 12 MiB): all carved from one 64 MiB chunk.
	if n := r.Calls("MallocManaged"); n != 1 {
		t.Fatalf("MallocManaged called %d times, want 1", n)
	}
	if a.Reserved() != 64*mib {
		t.Fatalf("reserved %d", a.Reserved())
	}
	big, err := a.Alloc(100*mib, dev0, s0)
	if err != nil {
		t.Fatal(err)
	}
	if n := r.Calls("MallocManaged"); n != 2 {
		t.Fatalf("a segment above SegmentSize: MallocManaged %d, want 2", n)
	}
	for _, b := range append(bufs, big) {
		if err := b.Free(); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if a.Reserved() != 0 || r.Calls("Free") != 2 {
		t.Fatalf("after EmptyCache reserved %d, frees %d", a.Reserved(), r.Calls("Free"))
	}
}

func TestResourceContract(t *testing.T) {
	r, a := setup(t, sim.Config{}, Options{Caching: DefaultOptionsCachingWithHistory()})
	s1, err := r.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.StreamDestroy(s1)
	var res gpumem.Resource = a
	p, err := res.Allocate(1<<20, s0)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.RecordStream(p, s1); err != nil {
		t.Fatal(err)
	}
	st := a.Stats(0)
	if st.Allocation[gpumem.StatAll].Current != 1 || st.Segment[gpumem.StatAll].Current != 1 {
		t.Fatalf("stats %+v", st.Allocation)
	}
	if err := res.Deallocate(p, s0); err != nil {
		t.Fatal(err)
	}
	if err := r.Drain(); err != nil {
		t.Fatal(err)
	}
	a.ResetPeakStats(0)
	if st := a.Stats(0); st.Allocation[gpumem.StatAll].Current != 0 || st.Allocation[gpumem.StatAll].Peak != 0 {
		t.Fatalf("after free and reset %+v", st.Allocation)
	}
	h, err := a.Alloc(100, host, s0)
	if err != nil {
		t.Fatal(err)
	}
	if a.PoolStats(0, true).Allocation[gpumem.StatAll].Current != 1 {
		t.Fatal("host pool stats")
	}
	snap := a.Snapshot()
	var hostSeg bool
	for _, s := range snap.Segments {
		hostSeg = hostSeg || strings.HasPrefix(s.SegmentType, "host_")
	}
	if len(snap.Segments) != 2 || !hostSeg || len(a.History()) == 0 {
		t.Fatalf("snapshot %+v", snap.Segments)
	}
	if err := h.Free(); err != nil {
		t.Fatal(err)
	}
	called := 0
	a.SetOOMHandler(func(dev int, n uint64, attempt int) bool { called++; return false })
	if _, err := a.Allocate(200<<30, s0); !errors.Is(err, gpumem.ErrOutOfMemory) || called != 1 {
		t.Fatalf("huge allocation: %v, handler called %d", err, called)
	}
}

func DefaultOptionsCachingWithHistory() (o cachingOptions) {
	o = DefaultOptions().Caching
	o.HistorySize = 64
	return o
}

// TestManageBoundsAManagedSource checks that Manage of a managed buffer of
// this allocator copies at most the buffer, with or without MoveOnCopy:
// the bytes after it belong to another allocation.
func TestManageBoundsAManagedSource(t *testing.T) {
	for _, move := range []bool{false, true} {
		_, a := setup(t, sim.Config{}, Options{MoveOnCopy: move})
		small, err := a.Alloc(100, dev0, s0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Manage(small.Ptr, 4096, dev0, s0); !errors.Is(err, gpumem.ErrInvalidValue) || !strings.Contains(err.Error(), "100-byte managed buffer") {
			t.Errorf("MoveOnCopy %v: Manage of 4096 bytes of a 100-byte buffer: %v, want ErrInvalidValue naming the buffer's size", move, err)
		}
		if !move {
			c, err := a.Manage(small.Ptr, 64, dev0, s0) // a prefix: a copy
			if err != nil || c.Size != 64 || c.Ptr == small.Ptr {
				t.Fatalf("Manage of a 64-byte prefix: %v, %v", c, err)
			}
			if err := c.Free(); err != nil {
				t.Fatal(err)
			}
		}
		if err := small.Free(); err != nil {
			t.Fatal(err)
		}
	}
}
