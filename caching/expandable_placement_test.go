package caching

import (
	"fmt"
	"sync"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

// vmmCounter counts the virtual memory calls that reach the backend.
type vmmCounter struct {
	gpumem.Backend
	mu                           sync.Mutex
	creates, maps, unmaps, grant int
}

func (c *vmmCounter) MemCreate(dev int, size uint64) (gpumem.MemHandle, error) {
	c.mu.Lock()
	c.creates++
	c.mu.Unlock()
	return c.Backend.MemCreate(dev, size)
}

func (c *vmmCounter) MemMap(p gpumem.Ptr, size, off uint64, h gpumem.MemHandle) error {
	c.mu.Lock()
	c.maps++
	c.mu.Unlock()
	return c.Backend.MemMap(p, size, off, h)
}

func (c *vmmCounter) MemUnmap(p gpumem.Ptr, size uint64) error {
	c.mu.Lock()
	c.unmaps++
	c.mu.Unlock()
	return c.Backend.MemUnmap(p, size)
}

func (c *vmmCounter) MemSetAccess(p gpumem.Ptr, size uint64, dev int, a gpumem.Access) error {
	c.mu.Lock()
	c.grant++
	c.mu.Unlock()
	return c.Backend.MemSetAccess(p, size, dev, a)
}

// counts returns creates, maps, unmaps and access grants so far.
func (c *vmmCounter) counts() [4]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return [4]int{c.creates, c.maps, c.unmaps, c.grant}
}

// expandableFixture is an allocator with expandable segments over a counted
// simulator, and allocation helpers that write the memory they get (the
// simulator reports a write to unmapped memory).
type expandableFixture struct {
	t     *testing.T
	a     *Allocator
	c     *vmmCounter
	s     gpumem.Stream
	g     *sim.GPU
	other gpumem.Stream // a second stream of the device
	third gpumem.Stream // a third
	logs  []string      // the allocator's diagnostics (Options.Logf)
}

func newExpandableFixture(t *testing.T) *expandableFixture {
	return newExpandableFixtureOn(t, false)
}

// newExpandableFixtureOn is newExpandableFixture on a simulator whose streams
// run only when something waits for them, if manual.
func newExpandableFixtureOn(t *testing.T, manual bool) *expandableFixture {
	return newExpandableFixtureWith(t, fixtureShape{manual: manual})
}

// fixtureShape varies an expandable fixture: the simulator in manual mode, a
// backend between the simulator and the counter (below), and one over the
// counter, which the allocator sees (above).
type fixtureShape struct {
	manual       bool
	below, above func(gpumem.Backend) gpumem.Backend
	crossStream  bool // Options.CrossStreamReuse
	bestFit      bool // Options.ExpandableBestFit
}

// newExpandableFixtureWith is newExpandableFixture shaped by sh; the
// allocator's diagnostics go to the fixture's logs.
func newExpandableFixtureWith(t *testing.T, sh fixtureShape) *expandableFixture {
	g, ss := newSim(t, 4<<30, sh.manual)
	var under gpumem.Backend = g
	if sh.below != nil {
		under = sh.below(g)
	}
	c := &vmmCounter{Backend: under}
	var seen gpumem.Backend = c
	if sh.above != nil {
		seen = sh.above(c)
	}
	f := &expandableFixture{t: t, c: c, s: ss[0], g: g, other: ss[1], third: ss[2]}
	a, err := New(seen, Options{ExpandableSegments: true, ExpandableBestFit: sh.bestFit, ReleaseBeforeGrow: true,
		CrossStreamReuse: sh.crossStream,
		Logf:             func(format string, args ...any) { f.logs = append(f.logs, fmt.Sprintf(format, args...)) }})
	if err != nil {
		t.Fatal(err)
	}
	f.a = a
	t.Cleanup(func() {
		checkInvariants(t, a)
		if err := a.Close(); err != nil {
			t.Error(err)
		}
		closeSim(t, g, ss)
	})
	return f
}

func (f *expandableFixture) alloc(size uint64) gpumem.Ptr {
	f.t.Helper()
	return f.allocOn(size, f.s)
}

// allocOn allocates size bytes on stream s and writes them there.
func (f *expandableFixture) allocOn(size uint64, s gpumem.Stream) gpumem.Ptr {
	f.t.Helper()
	p, err := f.a.Allocate(size, s)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.a.b.MemsetAsync(p, 0xab, size, s); err != nil {
		f.t.Fatalf("writing %d bytes at %#x: %v", size, uintptr(p), err)
	}
	return p
}

func (f *expandableFixture) free(p gpumem.Ptr) {
	f.t.Helper()
	f.freeOn(p, f.s)
}

func (f *expandableFixture) freeOn(p gpumem.Ptr, s gpumem.Stream) {
	f.t.Helper()
	if err := f.a.Deallocate(p, s); err != nil {
		f.t.Fatal(err)
	}
}

func (f *expandableFixture) reserved() int64 { return f.a.Stats(0).ReservedBytes[0].Current }

const chunk20 = 20 << 20 // the large pool's chunk (LargeBuffer)

// With ExpandableBestFit the request of TestExpandablePrefersMappedBlock
// takes the best fit by size, the hole, and maps it, back to the high-water
// mark.
func TestExpandableBestFitMapsTheHole(t *testing.T) {
	f := newExpandableFixtureWith(t, fixtureShape{bestFit: true})
	a := f.alloc(3 * chunk20) // chunks 0-2
	b := f.alloc(chunk20)     // chunk 3
	c := f.alloc(5 * chunk20) // chunks 4-8
	d := f.alloc(chunk20)     // chunk 9
	high := f.reserved()
	f.free(a)
	if err := f.a.EmptyCache(); err != nil { // unmaps chunks 0-2: a hole of three
		t.Fatal(err)
	}
	f.free(c) // five free mapped chunks
	before := f.c.counts()
	p := f.alloc(3 * chunk20)
	if p != a {
		t.Errorf("3 chunks went to %#x, want the hole, the best fit by size, at %#x (the mapped block is at %#x)", uintptr(p), uintptr(a), uintptr(c))
	}
	after := f.c.counts()
	if maps := after[1] - before[1]; maps != 3 {
		t.Errorf("%d chunks mapped into the hole, want 3 (counts %v -> %v)", maps, before, after)
	}
	if r := f.reserved(); r != high {
		t.Errorf("reserved %d, want back at the high-water mark %d", r, high)
	}
	for _, x := range []gpumem.Ptr{p, b, d} {
		f.free(x)
	}
}

// A request that fits both an unmapped hole (the best fit by size) and a
// larger free block on mapped chunks takes the mapped one: no device call,
// no growth. The block is mapped from its start, so the request goes there.
func TestExpandablePrefersMappedBlock(t *testing.T) {
	f := newExpandableFixture(t)
	a := f.alloc(3 * chunk20) // chunks 0-2
	b := f.alloc(chunk20)     // chunk 3
	c := f.alloc(5 * chunk20) // chunks 4-8
	d := f.alloc(chunk20)     // chunk 9
	f.free(a)
	if err := f.a.EmptyCache(); err != nil { // unmaps chunks 0-2: a hole of three
		t.Fatal(err)
	}
	f.free(c) // five free mapped chunks
	before, res := f.c.counts(), f.reserved()
	p := f.alloc(3 * chunk20)
	if p != c { // the start of the mapped run, which starts the block
		t.Errorf("3 chunks went to %#x, want the start of the mapped free block at %#x (the hole is at %#x)", uintptr(p), uintptr(c), uintptr(a))
	}
	if after := f.c.counts(); after != before {
		t.Errorf("creates, maps, unmaps, grants went %v -> %v; want no device call", before, after)
	}
	if r := f.reserved(); r != res {
		t.Errorf("reserved %d -> %d; want no growth", res, r)
	}
	f.free(p)
	f.free(b)
	f.free(d)
}

// A free block whose mapped chunks start it and unmapped ones follow (a
// freed mapped block merged with an unmapped hole after it) serves the
// request at its start, so that what the request leaves of the run stays
// joined to the hole, one free block, rather than a mapped chunk cut off in
// front of the request.
func TestExpandableUsesLeadingMappedRun(t *testing.T) {
	f := newExpandableFixture(t)
	h := f.alloc(5 * chunk20) // chunks 0-4: the hole to come, the best fit by size
	k := f.alloc(chunk20)     // chunk 5
	x := f.alloc(5 * chunk20) // chunks 6-10
	y := f.alloc(3 * chunk20) // chunks 11-13
	z := f.alloc(chunk20)     // chunk 14
	f.free(h)
	f.free(y)
	if err := f.a.EmptyCache(); err != nil { // unmaps chunks 0-4 and 11-13
		t.Fatal(err)
	}
	f.free(x) // merges with the hole after it: mapped 6-10, unmapped 11-13
	before, res := f.c.counts(), f.reserved()
	p := f.alloc(4 * chunk20)
	if p != x {
		t.Errorf("4 chunks went to %#x, want the start of the leading mapped run at %#x (the end would be %#x, the hole %#x)",
			uintptr(p), uintptr(x), uintptr(x+chunk20), uintptr(h))
	}
	if after := f.c.counts(); after != before {
		t.Errorf("creates, maps, unmaps, grants went %v -> %v; want no device call", before, after)
	}
	if r := f.reserved(); r != res {
		t.Errorf("reserved %d -> %d; want no growth", res, r)
	}
	// What is left, chunk 10 and the hole 11-13, is one free block of four
	// chunks, now the best fit for four: the next request takes it.
	q := f.alloc(4 * chunk20)
	if want := x + 4*chunk20; q != want {
		t.Errorf("the next 4 chunks went to %#x, want the rest of the run and the hole after it at %#x", uintptr(q), uintptr(want))
	}
	for _, b := range []gpumem.Ptr{p, q, k, z} {
		f.free(b)
	}
}

// A free block whose mapped chunks start inside it (an unmapped hole merged
// with a freed mapped block after it) serves the request there, at the end
// of the mapped run: the block is split in front of the request, and what
// the request leaves of the run stays joined to the hole.
func TestExpandableUsesInteriorMappedRun(t *testing.T) {
	f := newExpandableFixture(t)
	a := f.alloc(3 * chunk20) // chunks 0-2
	c := f.alloc(5 * chunk20) // chunks 3-7
	d := f.alloc(chunk20)     // chunk 8
	f.free(a)
	if err := f.a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	f.free(c) // merges with the hole: one free block, unmapped then mapped
	before, res := f.c.counts(), f.reserved()
	p := f.alloc(4 * chunk20)
	if want := c + chunk20; p != want {
		t.Errorf("4 chunks went to %#x, want the end of the mapped run at %#x", uintptr(p), uintptr(want))
	}
	if after := f.c.counts(); after != before {
		t.Errorf("creates, maps, unmaps, grants went %v -> %v; want no device call", before, after)
	}
	if r := f.reserved(); r != res {
		t.Errorf("reserved %d -> %d; want no growth", res, r)
	}
	checkInvariants(t, f.a)
	// The hole in front, with the mapped chunk the request left, is a free
	// block of its own, usable (and mapped on use) like any other.
	q := f.alloc(2 * chunk20)
	if q != a {
		t.Errorf("2 chunks went to %#x, want the hole in front at %#x", uintptr(q), uintptr(a))
	}
	f.free(q)
	f.free(p)
	f.free(d)
}

// Release before growth unmaps a run of free chunks of another stream's
// segment in one call and moves their physical memory to the growth: one
// unmap, creates only for what it did not cover, one access grant.
func TestExpandableUnmapsRunsInOneCall(t *testing.T) {
	f := newExpandableFixture(t)
	a := f.allocOn(3*chunk20, f.other) // chunks 0-2 of the other stream's segment
	b := f.alloc(chunk20)              // chunk 0 of this one; the high-water mark is 4 chunks
	f.freeOn(a, f.other)
	before := f.c.counts()
	p := f.alloc(5 * chunk20) // 5 new chunks: 3 moved, 2 created
	after := f.c.counts()
	got := [4]int{after[0] - before[0], after[1] - before[1], after[2] - before[2], after[3] - before[3]}
	if want := [4]int{2, 5, 1, 1}; got != want {
		t.Errorf("creates, maps, unmaps, grants: %v, want %v", got, want)
	}
	if r := f.reserved(); r != 6*chunk20 {
		t.Errorf("reserved %d, want 6 chunks (%d)", r, 6*chunk20)
	}
	f.free(p)
	f.free(b)
}

// Two replays of a trace with two streams make the same device calls: which
// segment gives up chunks for a growth does not depend on map order.
func TestExpandableReplayRepeatable(t *testing.T) {
	tr := loadTrace(t, "pytorch-gpt")
	var runs [2]replayResult
	for i := range runs {
		b, streams := replayBackend(t)
		runs[i] = replay(t, b, expandableOptions(), tr, streams)
	}
	for _, r := range runs {
		t.Logf("device allocs %d frees %d, peak reserved %d", r.stats.NumDeviceAlloc, r.stats.NumDeviceFree, r.peakReserved)
	}
	if runs[0].stats.NumDeviceAlloc != runs[1].stats.NumDeviceAlloc || runs[0].stats.NumDeviceFree != runs[1].stats.NumDeviceFree ||
		runs[0].peakReserved != runs[1].peakReserved {
		t.Error("two replays of one trace differ")
	}
}

// Growth past the high-water mark synchronizes the device only when it
// unmaps: while every mapped chunk is in use (a workload reaching its peak
// for the first time grows this way at every step) there is nothing to
// move; chunks that move within their segment leave ghosts and are not
// unmapped (ghost.go); only chunks taken from another stream's segment
// are, and a synchronization, which stalls every stream of the device, is
// paid for those alone.
func TestExpandableGrowthSynchronizesOnlyToUnmap(t *testing.T) {
	f := newExpandableFixture(t)
	syncs := func() int64 { return f.a.Stats(0).NumSyncAllStreams }
	a := f.alloc(2 * chunk20)
	b := f.alloc(chunk20)
	c := f.alloc(chunk20) // past the high-water mark, every chunk in use
	if n := syncs(); n != 0 {
		t.Errorf("growing with every mapped chunk in use synchronized the device %d times, want 0", n)
	}
	f.free(a) // two free mapped chunks
	before := f.c.counts()
	d := f.alloc(3 * chunk20) // moves the two, creates one
	after := f.c.counts()
	if n := syncs(); n != 0 {
		t.Errorf("a growth that moved chunks within its segment synchronized the device %d times, want 0", n)
	}
	if creates, maps, unmaps := after[0]-before[0], after[1]-before[1], after[2]-before[2]; creates != 1 || maps != 3 || unmaps != 0 {
		t.Errorf("the growth made %d creates, %d maps and %d unmap calls, want 1, 3 and 0", creates, maps, unmaps)
	}
	o := f.allocOn(chunk20, f.other) // another stream's segment: a create
	f.freeOn(o, f.other)
	f.free(b)
	before = f.c.counts()
	e := f.alloc(7 * chunk20) // past the mark: moves b's chunk and takes o's
	after = f.c.counts()
	if n := syncs(); n != 1 {
		t.Errorf("a growth that unmapped another segment's chunk synchronized the device %d times, want 1", n)
	}
	if creates, unmaps := after[0]-before[0], after[2]-before[2]; unmaps != 1 || creates != 5 {
		t.Errorf("the growth made %d creates and %d unmap calls, want 5 and 1", creates, unmaps)
	}
	f.free(c)
	f.free(d)
	f.free(e)
}

// The same, seen from the device: work queued on another stream is still
// queued after growths that unmap nothing (the simulator in manual mode
// runs a stream's work only when something waits for it), and has run after
// a growth that unmaps another segment's chunk, which must wait for it.
func TestExpandableGrowthLeavesOtherStreamsRunning(t *testing.T) {
	f := newExpandableFixtureOn(t, true)
	queued := func() bool {
		t.Helper()
		done, err := f.g.StreamQuery(f.other)
		if err != nil {
			t.Fatal(err)
		}
		return !done
	}
	busy := f.alloc(chunk20)
	if err := f.g.MemsetAsync(busy, 1, chunk20, f.other); err != nil {
		t.Fatal(err)
	}
	x := f.alloc(2 * chunk20) // chunks 1-2: past the high-water mark, every chunk in use
	z := f.alloc(chunk20)     // chunk 3
	if !queued() {
		t.Error("growths with nothing to move ran the work of another stream: they synchronized the device")
	}
	f.free(x)                 // chunks 1-2 free and mapped, between live blocks
	y := f.alloc(3 * chunk20) // after chunk 3: moves chunks 1-2 within the segment, creates one
	if !queued() {
		t.Error("a growth that moved chunks within their segment ran the work of another stream")
	}
	if n := f.a.Stats(0).NumDeviceFree; n != 0 {
		t.Errorf("%d chunks unmapped, want none: moves within a segment leave ghosts", n)
	}
	o := f.allocOn(chunk20, f.third)
	f.freeOn(o, f.third)
	w := f.alloc(4 * chunk20) // past the mark, above the ghosts: takes o's chunk from the third stream's segment
	if queued() {
		t.Error("a growth that unmapped another segment's chunk left another stream's work queued: it unmapped without synchronizing")
	}
	if n := f.a.Stats(0).NumDeviceFree; n != 1 {
		t.Errorf("%d chunks unmapped, want the 1 taken from the other segment", n)
	}
	for _, p := range []gpumem.Ptr{w, y, z, busy} {
		f.free(p)
	}
}
