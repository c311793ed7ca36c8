package native

import (
	"sync"
	"sync/atomic"

	"github.com/gpumem/gpumem"
)

// open is every stream capture begun through a backend of this package in
// the process and not known to have ended. It is process-wide, not per
// backend: two backends over one library share streams, and a capture
// begun through one is a capture for an allocation made through the other.
//
// It errs only one way: a stream whose capture may still be open stays
// counted (a failed EndCapture whose status query fails too), which costs
// its asker a capture query per call, never a capture missed.
var open captures

// captures counts the open captures of each stream handle, with a lock-free
// emptiness test. A handle may have more than one: the per-thread default
// stream names a different stream on each thread, and each may capture.
type captures struct {
	mu sync.Mutex
	m  map[uintptr]int
	n  atomic.Int64 // the sum of m, read without mu
}

func (c *captures) add(stream uintptr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[uintptr]int{}
	}
	c.m[stream]++
	c.n.Add(1)
}

// remove forgets one capture of stream.
func (c *captures) remove(stream uintptr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if k := c.m[stream]; k > 0 {
		c.m[stream] = k - 1
		if k == 1 {
			delete(c.m, stream)
		}
		c.n.Add(-1)
	}
}

// forget drops every capture of stream (destroyed).
func (c *captures) forget(stream uintptr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n.Add(-int64(c.m[stream]))
	delete(c.m, stream)
}

func (c *captures) any() bool { return c.n.Load() != 0 }

// CapturesOpen reports whether a stream capture begun through a backend of
// this package (CUDA or HIP, any instance in the process) may still be
// open. While none is, no stream can be capturing, except through a
// capture begun outside gpumem (another binding of the vendor library in
// the same process), which it cannot see.
func (b *Backend) CapturesOpen() bool { return open.any() }

// captureBegun notes a capture that StreamBeginCapture began on s.
func (b *Backend) captureBegun(s gpumem.Stream) { open.add(s.Handle) }

// captureEnded notes an EndCapture of s that the vendor answered with
// status. A capture that ended with an error may still be open (a call
// from the wrong thread, on some versions): s is asked, and stays counted
// unless it answers that it is not capturing.
func (b *Backend) captureEnded(s gpumem.Stream, status uintptr) {
	if int32(status) != 0 {
		if info, err := b.StreamCaptureInfo(s); err != nil || info.Status != gpumem.CaptureNone {
			return
		}
	}
	open.remove(s.Handle)
}
