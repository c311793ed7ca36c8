package backendtest

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
)

func testMalloc(t *testing.T, b gpumem.Backend, dev int) {
	for _, size := range []uint64{1, 255, 512, 4097, 1 << 20, 3<<20 + 5, 64 << 20, 768 << 20} {
		p, err := b.Malloc(dev, size)
		must(t, err, "Malloc")
		if p == 0 || uint64(p)%256 != 0 {
			t.Errorf("Malloc(%d) = %#x: want a non-null pointer aligned to 256 bytes", size, uint64(p))
		}
		n := int(min(size, 1<<20))
		want := pattern(n, byte(size))
		must(t, b.CopyToDevice(p, want), "CopyToDevice")
		expectBytes(t, readBack(t, b, p, n), want, "read back")
		if size > 1<<20 {
			// The end of the allocation is usable too.
			tail := pattern(4096, 3)
			must(t, b.CopyToDevice(p.Add(size-4096), tail), "CopyToDevice at the end")
			expectBytes(t, readBack(t, b, p.Add(size-4096), 4096), tail, "end read back")
		}
		must(t, b.Free(dev, p), "Free")
	}
	// Many live allocations get distinct addresses.
	seen := map[gpumem.Ptr]bool{}
	var ptrs []gpumem.Ptr
	for i := 0; i < 64; i++ {
		p, err := b.Malloc(dev, 4096)
		must(t, err, "Malloc")
		if seen[p] {
			t.Errorf("address %#x handed out twice", uint64(p))
		}
		seen[p] = true
		ptrs = append(ptrs, p)
	}
	for _, p := range ptrs {
		must(t, b.Free(dev, p), "Free")
	}
}

func testMallocErrors(t *testing.T, b gpumem.Backend, dev int) {
	p, err := b.Malloc(dev, 1<<20)
	must(t, err, "Malloc")
	if err := b.Free(dev, p.Add(4096)); err == nil {
		t.Error("Free of a pointer inside an allocation succeeded")
	}
	must(t, b.Free(dev, p), "Free")
	if err := b.Free(dev, p); err == nil {
		t.Error("double Free succeeded")
	}
	if _, err := b.Malloc(dev, 1<<50); !errors.Is(err, gpumem.ErrOutOfMemory) {
		t.Errorf("Malloc(1 PiB): %v, want ErrOutOfMemory", err)
	}
	var ge *gpumem.Error
	if _, err := b.Malloc(dev, 1<<50); errors.As(err, &ge) && ge.Name == "" {
		t.Errorf("out-of-memory error without a vendor name: %v", err)
	}
	if _, err := b.Malloc(-1, 512); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("Malloc on device -1: %v, want ErrInvalidValue", err)
	}
}

func testHost(t *testing.T, b gpumem.Backend, dev int) {
	h, err := b.MallocHost(1 << 20)
	must(t, err, "MallocHost")
	want := pattern(1<<20, 9)
	must(t, b.CopyToDevice(h, want), "CopyToDevice into pinned memory")
	d := malloc(t, b, dev, 1<<20)
	must(t, b.Memcpy(d, h, 1<<20), "Memcpy host to device")
	expectBytes(t, readBack(t, b, d, 1<<20), want, "device copy of pinned memory")
	must(t, b.FreeHost(h), "FreeHost")
	if err := b.FreeHost(h); err == nil {
		t.Error("double FreeHost succeeded")
	}
}

func testManaged(t *testing.T, b gpumem.Backend, dev int) {
	const n = 4 << 20
	p, err := b.MallocManaged(dev, n)
	skipIfNotSupported(t, err, "MallocManaged")
	defer func() { must(t, b.Free(dev, p), "Free managed") }()
	want := pattern(n, 6)
	must(t, b.CopyToDevice(p, want), "CopyToDevice into managed memory")
	here := gpumem.DeviceLocation(dev)
	if err := b.Advise(p, n, gpumem.AdviseSetPreferredLocation, here); err != nil {
		skipIfNotSupported(t, err, "Advise")
	}
	loc, err := b.RangeLocation(p, n, gpumem.RangePreferredLocation)
	must(t, err, "RangeLocation preferred")
	if loc != here {
		t.Errorf("preferred location %v, want %v", loc, here)
	}
	must(t, b.Advise(p, n, gpumem.AdviseUnsetPreferredLocation, here), "unset preferred location")
	s := newStream(t, b, dev, gpumem.StreamNonBlocking)
	must(t, b.Prefetch(p, n, here, s), "Prefetch to the device")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	loc, err = b.RangeLocation(p, n, gpumem.RangeLastPrefetchLocation)
	must(t, err, "RangeLocation last prefetch")
	if loc != here {
		t.Errorf("last prefetch location %v, want %v", loc, here)
	}
	must(t, b.Prefetch(p, n, gpumem.HostLocation(), s), "Prefetch to the host")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	loc, err = b.RangeLocation(p, n, gpumem.RangeLastPrefetchLocation)
	must(t, err, "RangeLocation last prefetch")
	if loc != gpumem.HostLocation() {
		t.Errorf("last prefetch location %v, want host", loc)
	}
	expectBytes(t, readBack(t, b, p, n), want, "managed data after migrations")
	must(t, b.Advise(p, n, gpumem.AdviseSetReadMostly, here), "read-mostly advice")
	must(t, b.Advise(p, n, gpumem.AdviseUnsetReadMostly, here), "unset read-mostly advice")
}
