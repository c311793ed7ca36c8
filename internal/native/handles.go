package native

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gpumem/gpumem"
)

// Handles the backend destroyed must not reach the vendor library again: a
// destroyed stream, event, graph, instantiated graph, module or pool passed
// to it is undefined behaviour, which may crash the process (a second
// destroy, a launch of a destroyed graph, an allocation from a destroyed
// pool). The backend keeps the handles it made, live or destroyed
// (Backend.streams for streams, a handleBook for each other kind), and a
// count of those destroyed and not given again, so that the check costs one
// atomic load while nothing of the kind was destroyed, and a map lookup
// after. Handles the library gives again (a new object at a destroyed
// one's address) are live again. Functions are not checked: the driver may
// reuse an unloaded kernel's handle for one loaded elsewhere in the
// process, which the backend cannot see.

// handleBook is what the backend knows of the handles of one kind it made:
// live (true) or destroyed (false).
type handleBook struct {
	m    sync.Map // handle -> bool
	dead atomic.Int64
}

func (e *handleBook) made(h uintptr) {
	if v, ok := e.m.Swap(h, true); ok && !v.(bool) {
		e.dead.Add(-1)
	}
}

func (e *handleBook) destroyed(h uintptr) {
	if v, ok := e.m.Swap(h, false); !ok || v.(bool) {
		e.dead.Add(1)
	}
}

func (e *handleBook) isDead(h uintptr) bool {
	if e.dead.Load() == 0 {
		return false
	}
	v, ok := e.m.Load(h)
	return ok && !v.(bool)
}

// refuseDead is the error for a handle of kind (a "graph") that this
// backend destroyed, nil for any other handle.
func (b *Backend) refuseDead(book *handleBook, kind string, h uintptr) error {
	if !book.isDead(h) {
		return nil
	}
	return b.destroyedErr(kind, h)
}

//go:noinline
func (b *Backend) destroyedErr(kind string, h uintptr) error {
	return fmt.Errorf("gpumem: %s: %s %#x was destroyed: %w", b.d.Name, kind, h, gpumem.ErrInvalidValue)
}

// deadStream refuses a stream this backend destroyed (and the library has
// not given again).
func (b *Backend) deadStream(s gpumem.Stream) error {
	if s.Handle <= maxSpecialStream || b.deadStreams.Load() == 0 {
		return nil
	}
	if v, ok := b.streams.Load(s.Handle); ok && !v.(streamState).live {
		return fmt.Errorf("gpumem: %s: %v was destroyed: %w", b.d.Name, s, gpumem.ErrInvalidValue)
	}
	return nil
}

// deadEvent refuses events this backend destroyed.
func (b *Backend) deadEvent(es ...gpumem.Event) error {
	for _, e := range es {
		if err := b.refuseDead(&b.events, "event", e.Handle); err != nil {
			return err
		}
	}
	return nil
}

// streamMade notes a stream the library gave, live.
func (b *Backend) streamMade(s gpumem.Stream) {
	if v, ok := b.streams.Swap(s.Handle, streamState{dev: s.Device, live: true}); ok && !v.(streamState).live {
		b.deadStreams.Add(-1)
	}
}

// streamDestroyed notes a stream destroyed.
func (b *Backend) streamDestroyed(s gpumem.Stream) {
	if v, ok := b.streams.Swap(s.Handle, streamState{dev: s.Device}); !ok || v.(streamState).live {
		b.deadStreams.Add(1)
	}
}
