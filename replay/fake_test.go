package replay

import (
	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/fakegpu"
)

// newFakeGPU returns the fake GPU a replay runs on: one device of capacity
// bytes whose StreamCreate accepts only the non-blocking streams a replay
// asks for.
func newFakeGPU(capacity uint64) *fakegpu.GPU {
	return fakegpu.New(capacity, fakegpu.WithStreamFlags(gpumem.StreamNonBlocking), fakegpu.WithBase(1<<32), fakegpu.WithAlign(512))
}

// newPassAlloc returns the pass-through allocator: its reserved bytes are
// exactly the live requested bytes, so a replay's peak reserved must equal
// the trace's floor.
func newPassAlloc(b gpumem.Backend) *fakegpu.Pass { return fakegpu.NewPass(b, "pass") }
