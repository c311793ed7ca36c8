package tests

import (
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/caching"
)

// TestGPUCachingGrowable grows a wholly free segment of the caching
// allocator in place on the real driver (the virtual memory API: create,
// map and access the difference) and checks every byte of the grown range
// through the device: a memset on the stream, copied back to the host.
func TestGPUCachingGrowable(t *testing.T) {
	b := openGPU(t, "cuda")
	defer b.Close()
	a, err := caching.New(b, caching.Options{GrowSegments: true, ReleaseBeforeGrow: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s, err := b.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.StreamDestroy(s)
	p, err := a.Allocate(100<<20, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Deallocate(p, s); err != nil {
		t.Fatal(err)
	}
	const n = 300 << 20
	q, err := a.Allocate(n, s)
	if err != nil {
		t.Fatal(err)
	}
	st := a.Stats(0)
	if q != p || st.SegmentGrowths != 1 || st.NumDeviceFree != 0 || st.ReservedBytes[gpumem.StatAll].Current != n {
		t.Fatalf("not grown in place: %#x vs %#x, growths %d, device frees %d, reserved %d",
			uintptr(q), uintptr(p), st.SegmentGrowths, st.NumDeviceFree, st.ReservedBytes[gpumem.StatAll].Current)
	}
	fillAndCheck(t, b, s, q, n, 0x5a, "the grown segment")
	if err := a.Deallocate(q, s); err != nil {
		t.Fatal(err)
	}
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if r := a.Stats(0).ReservedBytes[gpumem.StatAll].Current; r != 0 {
		t.Fatalf("reserved %d after EmptyCache", r)
	}
	t.Logf("grew a 100 MiB segment to 300 MiB in place at %#x; all %d bytes read back", uintptr(q), n)
}
