package backendtest

import (
	"testing"

	"github.com/gpumem/gpumem"
)

func testVMM(t *testing.T, b gpumem.Backend, dev int) {
	gran, err := b.MemGranularity(dev, false)
	skipIfNotSupported(t, err, "MemGranularity")
	if gran == 0 || gran&(gran-1) != 0 {
		t.Fatalf("granularity %d is not a power of two", gran)
	}
	rec, err := b.MemGranularity(dev, true)
	must(t, err, "recommended granularity")
	if rec < gran || rec%gran != 0 {
		t.Errorf("recommended granularity %d vs minimum %d", rec, gran)
	}
	size := 2 * gran
	va, err := b.MemAddressReserve(size, 0)
	must(t, err, "MemAddressReserve")
	h1, err := b.MemCreate(dev, gran)
	must(t, err, "MemCreate")
	h2, err := b.MemCreate(dev, gran)
	must(t, err, "MemCreate")
	if err := b.MemMap(va.Add(gran/2), gran, 0, h1); err == nil {
		t.Error("MemMap at an address not aligned to the granularity succeeded")
		_ = b.MemUnmap(va.Add(gran/2), gran)
	}
	must(t, b.MemMap(va, gran, 0, h1), "MemMap first half")
	must(t, b.MemMap(va.Add(gran), gran, 0, h2), "MemMap second half")
	must(t, b.MemSetAccess(va, size, dev, gpumem.AccessReadWrite), "MemSetAccess")
	// Data across the boundary of two physical allocations.
	want := pattern(8192, 4)
	at := va.Add(gran - 4096)
	must(t, b.CopyToDevice(at, want), "CopyToDevice across mappings")
	expectBytes(t, readBack(t, b, at, 8192), want, "read back across mappings")
	s := newStream(t, b, dev, gpumem.StreamNonBlocking)
	d := malloc(t, b, dev, 8192)
	must(t, b.MemcpyAsync(d, at, 8192, s), "MemcpyAsync from mapped memory")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	expectBytes(t, readBack(t, b, d, 8192), want, "async copy from mapped memory")
	must(t, b.MemUnmap(va, gran), "MemUnmap first half")
	must(t, b.MemUnmap(va.Add(gran), gran), "MemUnmap second half")
	must(t, b.MemRelease(h1), "MemRelease")
	must(t, b.MemRelease(h2), "MemRelease")
	must(t, b.MemAddressFree(va, size), "MemAddressFree")
	if _, err := b.MemCreate(dev, gran+1); err == nil {
		t.Error("MemCreate of a size that is not a multiple of the granularity succeeded")
	}
}
