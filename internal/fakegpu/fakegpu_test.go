package fakegpu

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
)

var _ gpumem.Backend = (*GPU)(nil)

func TestMemoryBooks(t *testing.T) {
	g := New(10<<20, WithCapacities(10<<20, 4<<20))
	if n, _ := g.DeviceCount(); n != 2 {
		t.Fatalf("%d devices, want 2", n)
	}
	p, err := g.Malloc(1, 3<<20)
	if err != nil {
		t.Fatal(err)
	}
	if free, total, _ := g.MemInfo(1); free != 1<<20 || total != 4<<20 {
		t.Errorf("device 1: free %d total %d", free, total)
	}
	if free, _, _ := g.MemInfo(0); free != 10<<20 {
		t.Errorf("device 0: free %d, want all", free)
	}
	if _, err := g.Malloc(1, 2<<20); !errors.Is(err, gpumem.ErrOutOfMemory) {
		t.Errorf("over capacity: %v", err)
	}
	q, _ := g.Malloc(0, 1)
	if q-p != 4<<20 { // 3 MiB rounded to the 2 MiB alignment
		t.Errorf("addresses %#x %#x not 4 MiB apart", p, q)
	}
	if g.Mallocs() != 2 || g.Calls("Malloc") != 3 || g.Allocations() != 2 {
		t.Errorf("mallocs %d, calls %d, live %d", g.Mallocs(), g.Calls("Malloc"), g.Allocations())
	}
	if err := g.Free(1, p); err != nil {
		t.Fatal(err)
	}
	if err := g.Free(1, p); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("double free: %v", err)
	}
	if g.Used(1) != 0 || g.Used(0) != 1 {
		t.Errorf("used %d, %d", g.Used(0), g.Used(1))
	}
	if _, _, err := g.MemInfo(2); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("MemInfo of a missing device: %v", err)
	}
}

func TestOptions(t *testing.T) {
	g := New(1<<30, WithDevices(3), WithName("sim"), WithBase(1<<32), WithAlign(512))
	if n, _ := g.DeviceCount(); n != 3 || g.Name() != "sim" {
		t.Fatalf("%d devices named %q", n, g.Name())
	}
	p, _ := g.Malloc(2, 1)
	q, _ := g.Malloc(2, 1)
	if p != 1<<32 || q != p+512 {
		t.Errorf("addresses %#x %#x", p, q)
	}
	var e *gpumem.Error
	g.FailCall("Malloc", 3)
	if _, err := g.Malloc(0, 1); !errors.As(err, &e) || e.Backend != "sim" {
		t.Errorf("injected failure: %v", err)
	}
	if _, err := g.Malloc(0, 1); err != nil {
		t.Errorf("the call after the injected failure: %v", err)
	}
	b, err := g.Open(2, 80<<30)
	if b != g || err != nil {
		t.Fatal("Open did not return the GPU")
	}
	if d, c := g.Asked(); d != 2 || c != 80<<30 {
		t.Errorf("asked %d, %d", d, c)
	}
	_ = g.Close()
	if !g.Closed() {
		t.Error("not closed")
	}
}

func TestStreamsAndEvents(t *testing.T) {
	g := New(1<<30, WithStreamFlags(gpumem.StreamNonBlocking))
	if _, err := g.StreamCreate(0, gpumem.StreamDefault, 0); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("blocking stream accepted: %v", err)
	}
	s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil || g.Streams() != 1 {
		t.Fatalf("%v, %d streams", err, g.Streams())
	}
	ev, _ := g.EventCreate(0, gpumem.EventDisableTiming)
	if err := g.EventRecord(ev, s); err != nil {
		t.Fatal(err)
	}
	if done, err := g.EventQuery(ev); !done || err != nil {
		t.Errorf("event not complete: %v", err)
	}
	_ = g.EventDestroy(ev)
	if err := g.StreamDestroy(s); err != nil || g.Streams() != 0 || g.Events() != 0 {
		t.Errorf("%v; %d streams, %d events", err, g.Streams(), g.Events())
	}
	if err := g.StreamDestroy(s); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("second destroy: %v", err)
	}
	if g.TotalCalls() == 0 || len(g.Ops()) == 0 {
		t.Error("calls not counted")
	}
}

func TestVirtualMemory(t *testing.T) {
	g := New(8 << 20)
	if gran, err := g.MemGranularity(0, false); err != nil || gran != 2<<20 {
		t.Fatalf("granularity %d, %v", gran, err)
	}
	va, _ := g.MemAddressReserve(16<<20, 0)
	h, err := g.MemCreate(0, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.MemCreate(0, 6<<20); !errors.Is(err, gpumem.ErrOutOfMemory) {
		t.Errorf("over capacity: %v", err)
	}
	_ = g.MemMap(va, 2<<20, 0, h)
	_ = g.MemMap(va+2<<20, 2<<20, 2<<20, h)
	if g.Mappings() != 2 || g.Handles() != 1 {
		t.Errorf("%d mappings, %d handles", g.Mappings(), g.Handles())
	}
	_ = g.MemUnmap(va, 4<<20)
	_ = g.MemRelease(h)
	if g.Mappings() != 0 || g.Handles() != 0 || g.Used(0) != 0 {
		t.Errorf("left %d mappings, %d handles, %d bytes", g.Mappings(), g.Handles(), g.Used(0))
	}
	if _, err := New(1, WithoutVMM()).MemGranularity(0, false); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("without VMM: %v", err)
	}
}
