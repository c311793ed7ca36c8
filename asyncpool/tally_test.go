package asyncpool

import (
	"math/rand/v2"
	"testing"

	"github.com/gpumem/gpumem"
)

// refStats keeps the statistics the long way, with a gpumem.StatArray per
// figure, as the caching allocator does: the tally must read the same.
type refStats struct{ st gpumem.MemoryStats }

func (r *refStats) alloc(size uint64) {
	k, n := kind(size), int64(size)
	r.st.NumDeviceAlloc++
	for _, a := range []*gpumem.StatArray{&r.st.Allocation, &r.st.Active, &r.st.Segment} {
		a.Add(k, 1)
	}
	for _, a := range []*gpumem.StatArray{&r.st.AllocatedBytes, &r.st.RequestedBytes, &r.st.ActiveBytes} {
		a.Add(k, n)
	}
}

func (r *refStats) free(size uint64, pending bool) {
	k, n := kind(size), int64(size)
	r.st.Allocation.Add(k, -1)
	r.st.AllocatedBytes.Add(k, -n)
	r.st.RequestedBytes.Add(k, -n)
	if pending {
		r.st.PendingReleaseBytes += n
		return
	}
	r.st.NumDeviceFree++
	r.released(size, false)
}

func (r *refStats) released(size uint64, pending bool) {
	k, n := kind(size), int64(size)
	if pending {
		r.st.PendingReleaseBytes -= n
	}
	r.st.Active.Add(k, -1)
	r.st.Segment.Add(k, -1)
	r.st.ActiveBytes.Add(k, -n)
}

func (r *refStats) resetPeaks() {
	for _, a := range []*gpumem.StatArray{&r.st.Allocation, &r.st.Active, &r.st.Segment, &r.st.AllocatedBytes, &r.st.RequestedBytes, &r.st.ActiveBytes} {
		for i := range a {
			a[i].ResetPeak()
		}
	}
}

func TestTallyMatchesStatArrays(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var ta tally
	var ref refStats
	var live, pend []uint64
	sizes := []uint64{512, 1 << 20, 1<<20 + 1, 20 << 20}
	for step := 0; step < 5000; step++ {
		switch r := rng.IntN(12); {
		case r < 5 || len(live) == 0:
			sz := sizes[rng.IntN(len(sizes))]
			ta.alloc(sz)
			ref.alloc(sz)
			live = append(live, sz)
		case r < 9:
			i := rng.IntN(len(live))
			sz := live[i]
			pending := rng.IntN(3) == 0
			ta.free(sz, pending)
			if rng.IntN(4) == 0 {
				// The free failed: undone exactly.
				ta.unfree(sz, pending)
				break
			}
			ref.free(sz, pending)
			live = append(live[:i], live[i+1:]...)
			if pending {
				pend = append(pend, sz)
			}
		case r < 11:
			if len(pend) == 0 {
				break
			}
			i := rng.IntN(len(pend))
			ta.released(pend[i])
			ref.released(pend[i], true)
			pend = append(pend[:i], pend[i+1:]...)
		default:
			ta.resetPeaks()
			ref.resetPeaks()
		}
		var got gpumem.MemoryStats
		ta.expand(&got)
		if got != ref.st {
			t.Fatalf("step %d: tally reads\n%+v\nwant\n%+v", step, got, ref.st)
		}
	}
}
