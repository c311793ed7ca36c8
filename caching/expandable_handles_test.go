package caching

import (
	"context"
	"testing"
)

// newHandleChunksFixture is an expandable fixture (PyTorch's expandable
// segments with release before growth) whose physical allocations cover up
// to n chunks.
func newHandleChunksFixture(t *testing.T, n int) *expandableFixture {
	f := newExpandableFixture(t)
	f.a.opts.ExpandableHandleChunks = n
	f.a.devs[0].handleChunks = uint64(n)
	return f
}

// A mapping of five chunks makes ceil(5/n) physical allocations, one map
// each, and one access grant; with one chunk an allocation it makes five.
func TestExpandableHandleChunksCutCalls(t *testing.T) {
	for _, c := range []struct {
		n             int
		creates, maps int
	}{{1, 5, 5}, {4, 2, 2}, {8, 1, 1}} {
		f := newHandleChunksFixture(t, c.n)
		p := f.alloc(5 * chunk20)
		got := f.c.counts()
		if got[0] != c.creates || got[1] != c.maps || got[3] != 1 {
			t.Errorf("%d chunks an allocation: %d creates, %d maps, %d grants; want %d, %d, 1", c.n, got[0], got[1], got[3], c.creates, c.maps)
		}
		if r := f.reserved(); r != 5*chunk20 {
			t.Errorf("%d chunks an allocation: reserved %d, want %d", c.n, r, 5*chunk20)
		}
		if st := f.a.Stats(0); st.NumDeviceAlloc != int64(c.maps) {
			t.Errorf("%d chunks an allocation: NumDeviceAlloc %d, want one a map, %d", c.n, st.NumDeviceAlloc, c.maps)
		}
		f.free(p)
	}
}

// An allocation of several chunks is unmapped whole: a block that holds
// one of its chunks keeps the others mapped through EmptyCache; once the
// block goes, one unmap returns them all.
func TestExpandableAllocationUnmapsWhole(t *testing.T) {
	f := newHandleChunksFixture(t, 4)
	p := f.alloc(4 * chunk20) // one allocation, chunks 0-3
	f.free(p)
	q := f.alloc(chunk20) // on chunk 0, best fit in the free range
	if got := f.c.counts(); got[0] != 1 {
		t.Fatalf("%d creates: the second request should reuse mapped memory", got[0])
	}
	if err := f.a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if r := f.reserved(); r != 4*chunk20 {
		t.Errorf("reserved %d after EmptyCache with chunk 0 in use, want the whole allocation, %d", r, 4*chunk20)
	}
	if got := f.c.counts(); got[2] != 0 {
		t.Errorf("%d unmaps while the allocation is partly in use", got[2])
	}
	f.free(q)
	if err := f.a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if r := f.reserved(); r != 0 {
		t.Errorf("reserved %d after EmptyCache with nothing in use", r)
	}
	if got := f.c.counts(); got[2] != 1 {
		t.Errorf("%d unmaps for one allocation, want 1", got[2])
	}
	if st := f.a.Stats(0); st.NumDeviceFree != 1 {
		t.Errorf("NumDeviceFree %d, want one an unmapped allocation", st.NumDeviceFree)
	}
}

// Allocations of several chunks sleep and wake with the rest: kept
// contents come back byte for byte, the physical memory is released while
// asleep, and Close releases all of it.
func TestExpandableHandleChunksSleepWake(t *testing.T) {
	g, a, ss := newSleepSimWith(t, 1<<30, expandableHandleChunks(4))
	keep, err := a.AllocateTagged(70<<20, ss[0], KeepOnSleep) // four 20 MiB chunks: one allocation
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.AllocateTagged(50<<20, ss[0], DiscardOnSleep); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 70<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := g.CopyToDevice(keep, data); err != nil {
		t.Fatal(err)
	}
	if got := g.Calls("MemCreate"); got != 2 {
		t.Fatalf("%d creates for two requests, of four new chunks and of two (the third shares chunk 3), want 2", got)
	}
	before := usedBytes(t, g)
	ctx := context.Background()
	if err := a.Sleep(ctx); err != nil {
		t.Fatal(err)
	}
	if used := usedBytes(t, g); used >= before {
		t.Errorf("device memory in use %d asleep, %d awake: nothing released", used, before)
	}
	if st := a.Stats(0); st.AsleepBytes != 120<<20 {
		t.Errorf("AsleepBytes %d, want the six chunks, %d", st.AsleepBytes, 120<<20)
	}
	if err := a.Wake(ctx); err != nil {
		t.Fatal(err)
	}
	if !holds(t, g, keep, data) {
		t.Error("kept contents changed across Sleep and Wake")
	}
	checkInvariants(t, a)
	if err := a.Close(); err != nil { // simtest reports what Close leaves
		t.Fatal(err)
	}
}

// Chunks moved as ghosts and chunks newly mapped come to the grant as one
// list; a run split between the two, in whatever order, is one grant.
func TestGrantRunsOneCallPerRun(t *testing.T) {
	f := newExpandableFixture(t)
	p := f.alloc(4 * chunk20) // chunks 0-3 mapped and granted
	d := f.a.devs[0]
	before := f.c.counts()
	d.mu.Lock()
	err := d.grantRunsLocked(d.large.exp[f.s.Handle], []uint64{2, 3, 0, 1})
	d.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if got := f.c.counts()[3] - before[3]; got != 1 {
		t.Errorf("%d grants for chunks 2, 3, 0, 1; want one for the run 0-3", got)
	}
	f.free(p)
}
