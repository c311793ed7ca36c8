package sim_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

// The memory detector: uses after asynchronous frees, reuse that does not
// follow events, sub-allocation reuse seen through tags, unmapped memory,
// and the virtual memory API's rules.

func TestUseAfterFreeAsync(t *testing.T) {
	g := newSim(t, sim.Config{Manual: true})
	s1, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	s2, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	p, err := g.MallocAsync(4096, s1)
	ok(t, err)
	ok(t, g.MemsetAsync(p, 1, 4096, s1))
	// The bug: freeing on s2 without ordering s2 after s1's use.
	ok(t, g.FreeAsync(p, s2))
	if !g.Step(s2) {
		t.Fatal("the free did not run")
	}
	ok(t, g.Drain())
	v := g.Violations()
	if len(v) != 1 || v[0].Op != "MemsetAsync" || v[0].Stream != s1 || v[0].Addr != p || !strings.Contains(v[0].What, "use after free") {
		t.Fatalf("violations = %v, want one use after free by MemsetAsync on s1", v)
	}
	g.ClearViolations()
	// Done right: the same stream orders the use before the free.
	q, err := g.MallocAsync(4096, s1)
	ok(t, err)
	ok(t, g.MemsetAsync(q, 1, 4096, s1))
	ok(t, g.FreeAsync(q, s1))
	r, err := g.MallocAsync(4096, s1)
	ok(t, err)
	if r != q {
		t.Errorf("stream-ordered reuse on the same stream: got %#x, want %#x", uint64(r), uint64(q))
	}
	ok(t, g.MemsetAsync(r, 2, 4096, s1))
	ok(t, g.FreeAsync(r, s1))
	ok(t, g.Drain())
	ok(t, g.StreamDestroy(s1))
	ok(t, g.StreamDestroy(s2))
	noLeaks(t, g)
}

// A range freed on one stream is reused by another only when that stream is
// ordered after the free.
func TestPoolReuseFollowsEvents(t *testing.T) {
	g := newSim(t, sim.Config{Manual: true})
	s1, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	s2, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	e, _ := g.EventCreate(0, gpumem.EventDisableTiming)
	p, err := g.MallocAsync(1<<20, s1)
	ok(t, err)
	ok(t, g.FreeAsync(p, s1))
	q, err := g.MallocAsync(1<<20, s2)
	ok(t, err)
	if q == p {
		t.Fatal("s2 reused memory freed on s1 without being ordered after the free")
	}
	ok(t, g.EventRecord(e, s1))
	ok(t, g.StreamWaitEvent(s2, e))
	r, err := g.MallocAsync(1<<20, s2)
	ok(t, err)
	if r != p {
		t.Errorf("s2, ordered after the free by an event, got %#x, want the freed %#x", uint64(r), uint64(p))
	}
	for _, x := range []gpumem.Ptr{q, r} {
		ok(t, g.FreeAsync(x, s2))
	}
	ok(t, g.Drain())
	ok(t, g.EventDestroy(e))
	ok(t, g.StreamDestroy(s1))
	ok(t, g.StreamDestroy(s2))
	noLeaks(t, g)
}

func TestTagDetectsSubAllocationReuse(t *testing.T) {
	g := newSim(t, sim.Config{Manual: true})
	s, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	seg, err := g.Malloc(0, 2<<20)
	ok(t, err)
	block := seg.Add(4096)
	ok(t, g.Tag(block, 8192, 1))
	if err := g.Tag(block.Add(4096), 100, 2); err == nil {
		t.Error("overlapping tags accepted")
	}
	ok(t, g.Launch(s, block, 8192, func(mem []byte) { mem[0] = 1 }))
	// The sub-allocator frees the block and hands it to another owner
	// before the kernel ran: a bug the detector reports.
	ok(t, g.Untag(block))
	ok(t, g.Tag(block, 8192, 2))
	ok(t, g.Drain())
	v := g.Violations()
	if len(v) != 1 || v[0].Op != "Launch" || !strings.Contains(v[0].What, "owner 1") {
		t.Fatalf("violations = %v, want the kernel's use of owner 1's freed block", v)
	}
	ok(t, g.StreamDestroy(s))
	ok(t, g.Free(0, seg)) // drops the tag too
	if l := g.Leaks(); len(l) != 0 {
		t.Errorf("leaks: %q", l)
	}
}

func TestMemUnmapDetected(t *testing.T) {
	g := newSim(t, sim.Config{Manual: true})
	s, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	gran, err := g.MemGranularity(0, true)
	ok(t, err)
	va, err := g.MemAddressReserve(gran, 0)
	ok(t, err)
	h, err := g.MemCreate(0, gran)
	ok(t, err)
	ok(t, g.MemMap(va, gran, 0, h))
	if err := g.MemsetAsync(va, 1, 16, s); err == nil {
		t.Error("memory without access was usable")
	}
	ok(t, g.MemSetAccess(va, gran, 0, gpumem.AccessReadWrite))
	ok(t, g.MemsetAsync(va, 1, 16, s))
	if err := g.MemAddressFree(va, gran); err == nil {
		t.Error("a mapped reservation was freed")
	}
	ok(t, g.MemUnmap(va, gran))
	ok(t, g.Drain())
	if v := g.Violations(); len(v) != 1 || v[0].Op != "MemsetAsync" {
		t.Errorf("violations = %v, want the memset after the unmap", v)
	}
	g.ClearViolations()
	ok(t, g.MemRelease(h))
	ok(t, g.MemAddressFree(va, gran))
	ok(t, g.StreamDestroy(s))
	noLeaks(t, g)
}

func TestVMMRules(t *testing.T) {
	g := newSim(t, sim.Config{Devices: []sim.DeviceConfig{{Capacity: 64 << 20, Granularity: 2 << 20}}})
	gran, _ := g.MemGranularity(0, false)
	va, err := g.MemAddressReserve(4*gran, 8*gran)
	ok(t, err)
	if uint64(va)%(8*gran) != 0 {
		t.Errorf("reservation %#x is not aligned to %d", uint64(va), 8*gran)
	}
	if _, err := g.MemAddressReserve(gran+1, 0); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("unaligned reservation size: %v", err)
	}
	h, err := g.MemCreate(0, 2*gran)
	ok(t, err)
	free0, _, _ := g.MemInfo(0)
	if free0 != 64<<20-2*gran {
		t.Errorf("MemCreate not counted: free %d", free0)
	}
	if _, err := g.MemCreate(0, 64<<20); !errors.Is(err, gpumem.ErrOutOfMemory) {
		t.Errorf("MemCreate beyond capacity: %v", err)
	}
	for name, err := range map[string]error{
		"unaligned offset":     g.MemMap(va, gran, 4096, h),
		"beyond the handle":    g.MemMap(va, gran, 2*gran, h),
		"outside reservations": g.MemMap(va.Add(8*gran), gran, 0, h),
	} {
		if !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("MemMap %s: %v", name, err)
		}
	}
	ok(t, g.MemMap(va, 2*gran, 0, h))
	if err := g.MemMap(va.Add(gran), gran, 0, h); err == nil {
		t.Error("overlapping mapping accepted")
	}
	// Mapping the same physical memory twice shares the data.
	ok(t, g.MemMap(va.Add(2*gran), gran, gran, h))
	ok(t, g.MemSetAccess(va, 3*gran, 0, gpumem.AccessReadWrite))
	if err := g.MemSetAccess(va, ^uint64(0), 0, gpumem.AccessReadWrite); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("an access range that wraps past 2^64: %v, want ErrInvalidValue", err)
	}
	ok(t, g.CopyToDevice(va.Add(gran+5), []byte("shared")))
	got := make([]byte, 6)
	ok(t, g.CopyFromDevice(got, va.Add(2*gran+5)))
	if string(got) != "shared" {
		t.Errorf("aliased mapping reads %q", got)
	}
	ok(t, g.MemRelease(h)) // still mapped: the memory stays
	if free, _, _ := g.MemInfo(0); free != free0 {
		t.Errorf("released while mapped: free %d, want %d", free, free0)
	}
	if err := g.MemUnmap(va, gran); err == nil {
		t.Error("unmapping part of a mapping succeeded")
	}
	ok(t, g.MemUnmap(va, 3*gran))
	if free, _, _ := g.MemInfo(0); free != 64<<20 {
		t.Errorf("after the last unmap free %d, want all", free)
	}
	ok(t, g.MemAddressFree(va, 4*gran))
	noLeaks(t, g)
}
