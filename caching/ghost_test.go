package caching

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/gpumem/gpumem"
)

// ghostFixture: an expandable fixture after a growth that moved chunks
// within the segment. a (3 chunks at chunk 0) was freed and b holds chunk
// 3, so the 4-chunk growth d at chunks 4-7 moved the handles of chunks 0-2
// to chunks 4-6 (leaving ghosts at 0-2) and created chunk 7.
func ghostFixture(t *testing.T) (f *expandableFixture, base, b, d gpumem.Ptr) {
	return ghostFixtureOn(t, false)
}

// ghostFixtureOn is ghostFixture on a simulator in manual mode if manual.
func ghostFixtureOn(t *testing.T, manual bool) (f *expandableFixture, base, b, d gpumem.Ptr) {
	f = newExpandableFixtureOn(t, manual)
	a := f.alloc(3 * chunk20)
	b = f.alloc(chunk20)
	f.free(a)
	before := f.c.counts()
	d = f.alloc(4 * chunk20)
	if d != a.Add(4*chunk20) {
		t.Fatalf("the growth went to %#x, want chunk 4 (%#x)", uintptr(d), uintptr(a.Add(4*chunk20)))
	}
	if got, want := diff(before, f.c.counts()), [4]int{1, 4, 0, 1}; got != want {
		t.Fatalf("creates, maps, unmaps, grants of the growth: %v, want %v", got, want)
	}
	return f, a, b, d
}

func diff(before, after [4]int) [4]int {
	return [4]int{after[0] - before[0], after[1] - before[1], after[2] - before[2], after[3] - before[3]}
}

// A growth that moves free chunks of its own segment maps their handles at
// the new place and leaves them mapped at the old (ghosts): no unmap, no
// synchronization, reserved memory unchanged, and the old place unmapped
// as far as the allocator is concerned.
func TestExpandableMoveLeavesGhosts(t *testing.T) {
	f, _, b, d := ghostFixture(t)
	if n := f.a.Stats(0).NumSyncAllStreams; n != 0 {
		t.Errorf("%d synchronizations, want 0", n)
	}
	if r := f.reserved(); r != 5*chunk20 {
		t.Errorf("reserved %d, want 5 chunks", r)
	}
	e := f.a.devs[0].large.exp[f.s.Handle].exp
	for i := range 3 {
		if !e.ghost[i] || e.mapped[i] {
			t.Errorf("chunk %d: ghost %v mapped %v, want a ghost", i, e.ghost[i], e.mapped[i])
		}
		if gs := e.moved[e.handles[i]]; gs == nil || gs.active != uint64(4+i) {
			t.Errorf("chunk %d's handle is not active at chunk %d", i, 4+i)
		}
	}
	f.free(d)
	f.free(b)
}

// A ghost whose handle is free at its active chunk becomes active again
// with no device call; one whose handle is in use is unmapped (after a
// synchronization) before another handle is mapped there.
func TestExpandableGhostsRevive(t *testing.T) {
	f, base, b, d := ghostFixture(t)
	f.free(d) // chunks 4-7 free and mapped, the start of their free block
	e1, e2, e3 := f.alloc(chunk20), f.alloc(chunk20), f.alloc(chunk20)
	if e1 != base.Add(4*chunk20) || e2 != base.Add(5*chunk20) || e3 != base.Add(6*chunk20) {
		t.Fatalf("one-chunk blocks at %#x, %#x and %#x, want chunks 4, 5 and 6", uintptr(e1), uintptr(e2), uintptr(e3))
	}
	f.free(e1)
	f.free(e2) // free and mapped: chunks 4-5 (the handles of ghosts 0-1) and 7; chunk 6 (ghost 2's) in use
	before := f.c.counts()
	g := f.alloc(3 * chunk20) // no mapped run of 3: the best fit is the ghosts at 0-2
	if g != base {
		t.Fatalf("3 chunks went to %#x, want the ghosts at %#x", uintptr(g), uintptr(base))
	}
	// Ghosts 0 and 1 revive; ghost 2 is unmapped and chunk 7's handle,
	// free, moves there (leaving a ghost at 7).
	if got, want := diff(before, f.c.counts()), [4]int{0, 1, 1, 1}; got != want {
		t.Errorf("creates, maps, unmaps, grants: %v, want %v", got, want)
	}
	if n := f.a.Stats(0).NumSyncAllStreams; n != 0 {
		t.Errorf("%d synchronizations of the device, want 0 (the unmap of a ghost waits for its stream's event)", n)
	}
	if r := f.reserved(); r != 5*chunk20 {
		t.Errorf("reserved %d, want 5 chunks", r)
	}
	e := f.a.devs[0].large.exp[f.s.Handle].exp
	for i, want := range []bool{false, false, false, false, true, true, false, true} {
		if e.ghost[i] != want {
			t.Errorf("chunk %d: ghost %v, want %v", i, e.ghost[i], want)
		}
	}
	// The revived memory is mapped and accessible: the fixture wrote g.
	f.free(g)
	f.free(e3)
	f.free(b)
}

// The unmap of a ghost waits for the work queued on the segment's stream
// before the ghost was made (which may still write there), not for the
// whole device: on the simulator in manual mode, where a stream's work runs
// only when something waits for it, another stream's work is still queued
// after the unmap, and the write queued before the move ran first (else the
// simulator reports a write to unmapped memory when the test ends).
func TestExpandableGhostUnmapWaitsForItsStream(t *testing.T) {
	f, base, b, d := ghostFixtureOn(t, true)
	// Still queued: the fixture's write of its first block (chunks 0-2,
	// now ghosts) on the segment's stream, and this one on another.
	if err := f.g.MemsetAsync(b, 1, chunk20, f.other); err != nil {
		t.Fatal(err)
	}
	f.free(d)
	e1 := f.alloc(chunk20)
	e2 := f.alloc(chunk20)
	f.free(e1)
	g := f.alloc(3 * chunk20) // revives ghosts 0 and 2, unmaps ghost 1 (its handle is e2's)
	if g != base {
		t.Fatalf("3 chunks went to %#x, want %#x", uintptr(g), uintptr(base))
	}
	if done, err := f.g.StreamQuery(f.other); err != nil || done {
		t.Errorf("another stream's work ran (%v, %v): the unmap of a ghost waited for the whole device", done, err)
	}
	if n := f.a.Stats(0).NumSyncAllStreams; n != 0 {
		t.Errorf("%d synchronizations of the device, want 0", n)
	}
	f.free(g)
	f.free(e2)
	f.free(b)
}

// Releasing memory takes its ghosts with it: EmptyCache leaves nothing
// mapped and the device's memory free, Sleep releases every byte and Wake
// maps the live blocks back, usable.
func TestExpandableGhostsReleasedWithTheirMemory(t *testing.T) {
	t.Run("EmptyCache", func(t *testing.T) {
		f, _, b, d := ghostFixture(t)
		f.free(d)
		f.free(b)
		if err := f.a.EmptyCache(); err != nil {
			t.Fatal(err)
		}
		if r := f.reserved(); r != 0 {
			t.Errorf("reserved %d after EmptyCache, want 0", r)
		}
		if free, total, _ := f.g.MemInfo(0); free != total {
			t.Errorf("%d of %d bytes free after EmptyCache: physical memory still mapped at a ghost", free, total)
		}
	})
	t.Run("Sleep", func(t *testing.T) {
		f, _, b, d := ghostFixture(t)
		f.free(b) // d's chunks are the moved handles and a created one
		ctx := context.Background()
		if err := f.a.Sleep(ctx); err != nil {
			t.Fatal(err)
		}
		if free, total, _ := f.g.MemInfo(0); free != total {
			t.Errorf("%d of %d bytes free while asleep: physical memory still mapped at a ghost", free, total)
		}
		if err := f.a.Wake(ctx); err != nil {
			t.Fatal(err)
		}
		if err := f.g.MemsetAsync(d, 1, 4*chunk20, f.s); err != nil {
			t.Errorf("writing the woken block: %v", err)
		}
		f.free(d)
	})
}

// mapOnce is a backend that refuses to map a handle that is already mapped
// (as a driver might), to exercise the fallback.
type mapOnce struct {
	gpumem.Backend
	mu     sync.Mutex
	at     map[gpumem.Ptr]gpumem.MemHandle
	mapped map[gpumem.MemHandle]bool
}

func (m *mapOnce) MemMap(p gpumem.Ptr, size, off uint64, h gpumem.MemHandle) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mapped[h] {
		return fmt.Errorf("handle mapped twice: %w", gpumem.ErrInvalidValue)
	}
	if err := m.Backend.MemMap(p, size, off, h); err != nil {
		return err
	}
	m.at[p], m.mapped[h] = h, true
	return nil
}

func (m *mapOnce) MemUnmap(p gpumem.Ptr, size uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.Backend.MemUnmap(p, size); err != nil {
		return err
	}
	for q, h := range m.at {
		if q >= p && q < p.Add(size) {
			delete(m.at, q)
			delete(m.mapped, h)
		}
	}
	return nil
}

// On a backend that maps a handle only once, the first move falls back to
// unmapping (one call for the run, after a synchronization) and says so,
// and later moves unmap from the start.
func TestExpandableMovesUnmapWhereHandlesMapOnce(t *testing.T) {
	f := newExpandableFixtureWith(t, fixtureShape{below: func(g gpumem.Backend) gpumem.Backend {
		return &mapOnce{Backend: g, at: map[gpumem.Ptr]gpumem.MemHandle{}, mapped: map[gpumem.MemHandle]bool{}}
	}})
	a, c := f.a, f.c
	for round := range 2 {
		x := f.alloc(3 * chunk20)
		y := f.alloc(chunk20)
		f.free(x)
		before := c.counts()
		syncs := a.Stats(0).NumSyncAllStreams
		p := f.alloc(5 * chunk20) // 3 moved, 2 created
		got := diff(before, c.counts())
		want := [4]int{2, 5, 1, 1}
		if round == 0 {
			want[1]++ // the refused map
		}
		if got != want {
			t.Errorf("round %d: creates, maps, unmaps, grants: %v, want %v", round, got, want)
		}
		if n := a.Stats(0).NumSyncAllStreams - syncs; n != 1 {
			t.Errorf("round %d: %d synchronizations, want 1", round, n)
		}
		f.free(p)
		f.free(y)
		if err := a.EmptyCache(); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.logs) != 1 || !strings.Contains(f.logs[0], "moves unmap from now on") {
		t.Errorf("logs %q, want one saying moves unmap from now on", f.logs)
	}
}

// singleMapper says, as the HIP backend does, that a handle is mapped at
// one address at a time.
type singleMapper struct{ gpumem.Backend }

func (singleMapper) MapsHandleTwice() (bool, string) { return false, "one mapping per handle" }

// A backend that says a handle is mapped once gets moves that unmap from
// the start: no refused map, nothing logged.
func TestExpandableMovesUnmapWhereTheBackendSaysSo(t *testing.T) {
	f := newExpandableFixtureWith(t, fixtureShape{above: func(c gpumem.Backend) gpumem.Backend { return singleMapper{c} }})
	a, c := f.a, f.c
	x := f.alloc(3 * chunk20)
	y := f.alloc(chunk20)
	f.free(x)
	before := c.counts()
	p := f.alloc(5 * chunk20)
	if got, want := diff(before, c.counts()), [4]int{2, 5, 1, 1}; got != want {
		t.Errorf("creates, maps, unmaps, grants: %v, want %v", got, want)
	}
	if n := a.Stats(0).NumSyncAllStreams; n != 1 {
		t.Errorf("%d synchronizations, want 1", n)
	}
	if len(f.logs) != 0 {
		t.Errorf("logs %q, want none", f.logs)
	}
	f.free(p)
	f.free(y)
}

// Faults on the ghosts' paths fail the allocation and leave a consistent
// state (the fixture checks the invariants and the simulator's leaks at
// the end): a map of a moving chunk that fails for another reason than a
// refusal, the unmap of a ghost, and the access grant after a move (which
// releases the moved chunks, ghosts and all).
func TestExpandableGhostFaults(t *testing.T) {
	transient := errors.New("injected failure")
	// failing injects transient into op's next call and makes an
	// allocation of size fail with it.
	failing := func(t *testing.T, f *expandableFixture, op string, size uint64) {
		t.Helper()
		f.g.InjectFault(op, 1, transient)
		if _, err := f.a.Allocate(size, f.s); !errors.Is(err, transient) {
			t.Fatalf("Allocate: %v, want the injected failure", err)
		}
		checkInvariants(t, f.a)
	}
	// failedMove is a growth that moves the three free chunks below a live
	// one (returned), failed in op.
	failedMove := func(t *testing.T, op string) (*expandableFixture, gpumem.Ptr) {
		t.Helper()
		f := newExpandableFixture(t)
		a := f.alloc(3 * chunk20)
		b := f.alloc(chunk20)
		f.free(a)
		failing(t, f, op, 4*chunk20)
		return f, b
	}
	t.Run("move's map", func(t *testing.T) {
		f, b := failedMove(t, "MemMap")
		if r := f.reserved(); r != 4*chunk20 {
			t.Errorf("reserved %d after the failure, want 4 chunks", r)
		}
		before := f.c.counts()
		d := f.alloc(4 * chunk20) // moves the three free chunks now
		if got, want := diff(before, f.c.counts()), [4]int{1, 4, 0, 1}; got != want {
			t.Errorf("retry: creates, maps, unmaps, grants %v, want %v", got, want)
		}
		f.free(d)
		f.free(b)
	})
	t.Run("ghost's unmap", func(t *testing.T) {
		f, _, b, d := ghostFixture(t)
		f.free(d)
		e1 := f.alloc(chunk20)
		e2 := f.alloc(chunk20)
		f.free(e1)
		failing(t, f, "MemUnmap", 3*chunk20)
		g := f.alloc(3 * chunk20)
		f.free(g)
		f.free(e2)
		f.free(b)
	})
	t.Run("grant after a move", func(t *testing.T) {
		f, b := failedMove(t, "MemSetAccess")
		if r := f.reserved(); r != chunk20 {
			t.Errorf("reserved %d after the failed grant, want b's chunk alone (the moved ones released)", r)
		}
		if free, total, _ := f.g.MemInfo(0); total-free != chunk20 {
			t.Errorf("%d bytes of the device in use, want b's chunk alone: a released chunk still mapped at a ghost", total-free)
		}
		d := f.alloc(4 * chunk20)
		f.free(d)
		f.free(b)
	})
}

// A block that must map chunks goes to the window that needs the fewest
// (ghosts ready to revive count as mapped) rather than to the best fit by
// size: over the fifty-four phase workloads of testdata/phase (three passes
// each), that makes fewer device calls in all than best fit alone, on more
// workloads than it makes more, and no larger a footprint in all.
func TestExpandableWindowSearchSavesDeviceCalls(t *testing.T) {
	if raceOn {
		t.Skip("a count over fifty-four workloads, measured without the race detector (TestPyTorchFootprintsOnPhaseWorkloads replays one under it)")
	}
	anchors := loadPhaseAnchors(t)
	var calls, peaks [2]int64
	fewer, more := 0, 0
	// Mapped-first placement, where the window search runs, with no
	// slack: the slack lets both map new memory where they would move
	// chunks, which is not what this compares.
	search := expandableMappedFirstOptions()
	search.ExpandableSlack = 0
	bestFit := search
	bestFit.bestFitOnly = true
	for _, an := range anchors {
		var c [2]int64
		for i, r := range replayEach(t, phaseTrace(t, an.Trace), search, bestFit) {
			c[i] = r.stats.NumDeviceAlloc + r.stats.NumDeviceFree
			calls[i] += c[i]
			peaks[i] += int64(r.peakReserved)
		}
		if c[0] < c[1] {
			fewer++
		} else if c[0] > c[1] {
			more++
		}
	}
	t.Logf("device calls %d with the window search, %d without (fewer on %d workloads, more on %d); peak reserved %d and %d in all",
		calls[0], calls[1], fewer, more, peaks[0], peaks[1])
	if calls[0] >= calls[1] || fewer <= more {
		t.Errorf("the window search saved no device calls: %d against %d, fewer on %d workloads, more on %d", calls[0], calls[1], fewer, more)
	}
	if peaks[0] > peaks[1] {
		t.Errorf("peak reserved %d in all with the window search, above %d without", peaks[0], peaks[1])
	}
}
