package caching

import (
	"path/filepath"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/trace"
)

// descendingUpstream hands out segments downwards from a high address, as
// the CUDA driver did for the GPU anchor's cudaMalloc calls on the H200
// (each new segment below the last), where the simulator's Malloc hands
// them out upwards. It backs no memory: for replays that touch none.
type descendingUpstream struct{ next uint64 }

func (u *descendingUpstream) Alloc(_ int, size uint64) (gpumem.Ptr, error) {
	u.next -= (size + RoundLarge - 1) &^ (RoundLarge - 1)
	return gpumem.Ptr(u.next), nil
}

func (u *descendingUpstream) Free(int, gpumem.Ptr) error { return nil }

// TestEqualSizeTieBreak pins PyTorch's BlockComparatorSize: among free
// blocks of the same size (and stream), the lowest address is taken, so
// which one serves a request depends on where the device put the
// segments.
func TestEqualSizeTieBreak(t *testing.T) {
	for _, down := range []bool{false, true} {
		b, streams := replayBackend(t)
		o := Options{}
		if down {
			o.Upstream = &descendingUpstream{next: 1 << 46}
		}
		a, err := New(b, o)
		if err != nil {
			t.Fatal(err)
		}
		s := streams[0]
		// Two 12 MiB segments, both freed: two cached blocks of one size.
		p1, _ := a.Allocate(12<<20, s)
		p2, _ := a.Allocate(12<<20, s)
		if err := a.Deallocate(p1, s); err != nil {
			t.Fatal(err)
		}
		if err := a.Deallocate(p2, s); err != nil {
			t.Fatal(err)
		}
		want := min(p1, p2)
		if got, _ := a.Allocate(12<<20, s); got != want {
			t.Errorf("descending=%v: got %#x, want the lower address %#x (segments at %#x, %#x)", down, got, want, p1, p2)
		}
		a.Close()
	}
}

// TestReplayDriverAddressOrder replays the traces recorded with PyTorch
// 2.11 on an H200 under PyTorch's semantics with segments placed as the
// driver placed the anchor's (downwards), and checks the anchor's figures
// to the byte: ptreplay, c10's allocator with its default configuration.
// With the simulator's upward addresses, unet and kvserve differ (ties
// between equal-sized free blocks break the other way).
func TestReplayDriverAddressOrder(t *testing.T) {
	if raceOn {
		t.Skip("measured without the race detector")
	}
	for _, c := range []struct {
		name     string
		reserved uint64
		allocs   int64
	}{
		{"unet", 18320719872, 217},
		{"kvserve", 991952896, 53},
		{"cnn", 14925430784, 80},
		{"pytorch-gpt", 1046478848, 42},
	} {
		tr, err := trace.ReadFile(filepath.Join("..", "testdata", c.name+".trace.gz"))
		if err != nil {
			t.Fatal(err)
		}
		b, streams := replayBackend(t)
		r := replay(t, b, Options{Upstream: &descendingUpstream{next: 1 << 46}}, tr, streams)
		if r.peakReserved != c.reserved || int64(r.stats.NumDeviceAlloc) != c.allocs {
			t.Errorf("%s: peak reserved %d with %d device allocations, want PyTorch's %d with %d",
				c.name, r.peakReserved, r.stats.NumDeviceAlloc, c.reserved, c.allocs)
		}
	}
}
