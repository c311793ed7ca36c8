package native

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gpumem/gpumem"
)

// Handles the backend destroyed must not reach the vendor library again: a
// destroyed stream or event passed to it is undefined behaviour, which may
// crash the process. The backend keeps the handles it made, live or
// destroyed (Backend.streams for streams, events below), and a count of
// those destroyed and not given again, so that the check costs one atomic
// load while nothing was destroyed, and a map lookup after.

// eventBook is what the backend knows of the event handles it made: live
// (true) or destroyed (false).
type eventBook struct {
	m    sync.Map // handle -> bool
	dead atomic.Int64
}

func (e *eventBook) made(h uintptr) {
	if v, ok := e.m.Swap(h, true); ok && !v.(bool) {
		e.dead.Add(-1)
	}
}

func (e *eventBook) destroyed(h uintptr) {
	if v, ok := e.m.Swap(h, false); !ok || v.(bool) {
		e.dead.Add(1)
	}
}

func (e *eventBook) isDead(h uintptr) bool {
	if e.dead.Load() == 0 {
		return false
	}
	v, ok := e.m.Load(h)
	return ok && !v.(bool)
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
		if b.events.isDead(e.Handle) {
			return fmt.Errorf("gpumem: %s: event %#x was destroyed: %w", b.d.Name, e.Handle, gpumem.ErrInvalidValue)
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
