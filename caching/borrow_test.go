package caching

import (
	"testing"

	"github.com/gpumem/gpumem"
)

// inSegmentOf reports whether p lies in the expandable segment of stream s's
// large pool.
func (f *expandableFixture) inSegmentOf(p gpumem.Ptr, s gpumem.Stream) bool {
	f.a.devs[0].mu.Lock()
	defer f.a.devs[0].mu.Unlock()
	seg := f.a.devs[0].large.exp[s.Handle]
	return seg != nil && p >= seg.addr && p < seg.addr.Add(seg.size)
}

// A growth past the high-water mark that its own segment cannot serve
// borrows another stream's free mapped memory, with cross-stream reuse on:
// no device call, the borrower ordered after the owner's work, the block
// back with its owner once freed. Without cross-stream reuse the same
// request moves memory (unmaps, maps, grants).
func TestExpandableBorrowsAcrossStreams(t *testing.T) {
	for _, cross := range []bool{true, false} {
		f := newExpandableFixtureWith(t, fixtureShape{crossStream: cross})
		x := f.alloc(10 * chunk20)
		f.free(x)
		before, reserved := f.c.counts(), f.reserved()
		y := f.allocOn(5*chunk20, f.other) // past the mark: nothing of the other stream's is mapped
		after := f.c.counts()
		reuses := f.a.Stats(0).CrossStreamReuses
		if !cross {
			if reuses != 0 || after == before || f.inSegmentOf(y, f.s) {
				t.Errorf("without cross-stream reuse: %d reuses, calls %v -> %v; the block should have been mapped in its own segment", reuses, before, after)
			}
			f.freeOn(y, f.other)
			continue
		}
		if reuses != 1 || !f.inSegmentOf(y, f.s) {
			t.Fatalf("%d cross-stream reuses, block in the first stream's segment: %v; want a block borrowed from it", reuses, f.inSegmentOf(y, f.s))
		}
		if after != before || f.reserved() != reserved {
			t.Errorf("borrowing made device calls (creates, maps, unmaps, grants %v -> %v) or changed reserved memory (%d -> %d)", before, after, reserved, f.reserved())
		}
		if n := f.a.Stats(0).NumSyncAllStreams; n != 0 {
			t.Errorf("%d device synchronizations, want none: a borrow orders the streams with an event", n)
		}
		f.freeOn(y, f.other)
		z := f.alloc(10 * chunk20) // the owner gets its memory back, mapped
		if got := f.c.counts(); got != before {
			t.Errorf("the owner mapped memory again after the loan ended: calls %v -> %v", before, got)
		}
		f.free(z)
	}
}

// A borrower waits for the owner's queued work on the memory (a stream
// wait, not a host one): in manual mode, the owner's work stays queued
// through the borrow, and the borrower's stream is not done until it ran.
func TestExpandableBorrowWaitsForTheOwner(t *testing.T) {
	f := newExpandableFixtureWith(t, fixtureShape{manual: true, crossStream: true})
	x := f.alloc(4 * chunk20)
	if err := f.g.MemsetAsync(x, 1, 4*chunk20, f.s); err != nil {
		t.Fatal(err)
	}
	f.free(x)
	y := f.allocOn(2*chunk20, f.other)
	if !f.inSegmentOf(y, f.s) {
		t.Fatal("the request did not borrow the first stream's memory")
	}
	if done, err := f.g.StreamQuery(f.s); err != nil || done {
		t.Fatalf("the owner's work ran during the borrow (done %v, %v): it synchronized", done, err)
	}
	if done, err := f.g.StreamQuery(f.other); err != nil || done {
		t.Fatalf("the borrower's stream is done (%v, %v) while the owner's work on the memory is queued: it does not wait for it", done, err)
	}
	if err := f.g.StreamSynchronize(f.other); err != nil {
		t.Fatal(err)
	}
	if done, err := f.g.StreamQuery(f.s); err != nil || !done {
		t.Errorf("the borrower's stream finished before the owner's work (%v, %v)", done, err)
	}
	f.freeOn(y, f.other)
}

// The small pool does not borrow: its chunks are small, and lending them
// pins the owner's mapped runs (measured: the footprint rose on a real
// trace); its memory moves as before.
func TestExpandableSmallPoolDoesNotBorrow(t *testing.T) {
	f := newExpandableFixtureWith(t, fixtureShape{crossStream: true})
	x := f.alloc(1 << 20)
	f.free(x)
	y := f.allocOn(1<<20, f.other)
	if n := f.a.Stats(0).CrossStreamReuses; n != 0 {
		t.Errorf("%d cross-stream reuses in the small pool, want none", n)
	}
	f.freeOn(y, f.other)
}

// recordCounter counts the events recorded on each stream handle.
type recordCounter struct {
	gpumem.Backend
	on map[uintptr]int
}

func (r *recordCounter) EventRecord(e gpumem.Event, s gpumem.Stream) error {
	r.on[s.Handle]++
	return r.Backend.EventRecord(e, s)
}

// A destroyed stream's cached blocks lend nothing: no event is recorded on
// its handle (the driver may have given it to a new stream), and the
// request maps memory of its own instead.
func TestExpandableBorrowSkipsDestroyedStreams(t *testing.T) {
	rc := &recordCounter{on: map[uintptr]int{}}
	f := newExpandableFixtureWith(t, fixtureShape{crossStream: true,
		above: func(b gpumem.Backend) gpumem.Backend { rc.Backend = b; return rc }})
	dead, err := f.g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	d := f.allocOn(4*chunk20, dead)
	f.freeOn(d, dead)
	if err := f.g.StreamDestroy(dead); err != nil {
		t.Fatal(err)
	}
	clear(rc.on)
	y := f.allocOn(4*chunk20, f.other) // past the mark: only the dead stream's block would lend
	if n := rc.on[dead.Handle]; n != 0 {
		t.Errorf("%d events recorded on a destroyed stream", n)
	}
	if n := f.a.Stats(0).CrossStreamReuses; n != 0 || !f.inSegmentOf(y, f.other) {
		t.Errorf("%d cross-stream reuses, block in its own segment: %v; want its own memory", n, f.inSegmentOf(y, f.other))
	}
	f.freeOn(y, f.other)
	if err := f.a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
}

// The owner does not get a lent block back while the borrower's work on it
// is queued: freed on the borrower's stream, the block waits for an event
// there, so the owner's next request of the same size lands elsewhere.
func TestExpandableLentBlockWaitsForTheBorrower(t *testing.T) {
	f := newExpandableFixtureWith(t, fixtureShape{manual: true, crossStream: true})
	x := f.alloc(4 * chunk20)
	f.free(x)
	y := f.allocOn(4*chunk20, f.other)
	if y != x {
		t.Fatalf("borrowed %#x, want the owner's free block %#x", uintptr(y), uintptr(x))
	}
	if err := f.g.MemsetAsync(y, 2, 4*chunk20, f.other); err != nil {
		t.Fatal(err)
	}
	f.freeOn(y, f.other)
	z := f.alloc(4 * chunk20)
	if z < y.Add(4*chunk20) && y < z.Add(4*chunk20) {
		t.Errorf("the owner got %#x, overlapping the block lent at %#x, while the borrower's work on it is queued", uintptr(z), uintptr(y))
	}
	if err := f.g.StreamSynchronize(f.other); err != nil {
		t.Fatal(err)
	}
	f.free(z)
}
