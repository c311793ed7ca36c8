package deferrable_test

import (
	"bytes"
	"testing"

	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/deferrable"
)

// The manager over the project's caching allocator, which is given the
// manager's OOM handler: another user of the allocator gets memory that only
// spilling can free, and the buffers come back intact.
func TestCachingAllocatorSpillsOnOOM(t *testing.T) {
	g := newSim(t, 64*mib, false)
	ca, err := caching.New(g, caching.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := newManager(t, g, deferrable.Options{Resource: ca, StagingBytes: mib})
	ca.SetOOMHandler(m.OOMHandler())
	s := newStream(t, g)
	var bufs []*deferrable.Buffer
	for i := 0; i < 12; i++ { // 12 x 4 MiB: more than the device holds with the outsider's 32 MiB
		b, err := m.Alloc(4*mib, s)
		if err != nil {
			t.Fatalf("alloc %d: %v", i, err)
		}
		write(t, g, b, s, pattern(uint64(i), 4*mib))
		bufs = append(bufs, b)
	}
	p, err := ca.Allocate(32*mib, s)
	if err != nil {
		t.Fatalf("allocation that needs spilling: %v", err)
	}
	if st := m.Stats(); st.OOMHandlerCalls == 0 || st.Host.Buffers == 0 {
		t.Fatalf("nothing was spilled: %+v", st)
	}
	for i, b := range bufs {
		if !bytes.Equal(read(t, g, b, s), pattern(uint64(i), 4*mib)) {
			t.Fatalf("buffer %d changed", i)
		}
	}
	if err := ca.Deallocate(p, s); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ca.Close(); err != nil {
		t.Fatal(err)
	}
	checkLeaks(t, g)
}
