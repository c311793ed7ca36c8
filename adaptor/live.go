package adaptor

import (
	"errors"
	"sync"

	"github.com/gpumem/gpumem"
)

// liveAlloc is an allocation live through an adaptor that accounts for
// each (Limit, Statistics): its device and the bytes asked for.
type liveAlloc struct {
	dev  int
	size uint64
}

// deallocateLive is the Deallocate of an adaptor that keeps its live
// allocations in live, guarded by mu: p leaves live before the upstream is
// called (without mu), so that two frees of p cannot both reach it; it
// goes back if the upstream refuses while still holding it (any error but
// ErrClosed). After the upstream's free, uncount runs with mu held.
func (l *link) deallocateLive(mu *sync.Mutex, live map[gpumem.Ptr]liveAlloc, p gpumem.Ptr, s gpumem.Stream, uncount func(liveAlloc)) error {
	if l.closed.Load() {
		return l.errClosed()
	}
	mu.Lock()
	a, ok := live[p]
	if !ok {
		mu.Unlock()
		return l.errForeign("Deallocate", p)
	}
	delete(live, p)
	mu.Unlock()
	if err := l.up.Deallocate(p, s); err != nil {
		if !errors.Is(err, gpumem.ErrClosed) {
			mu.Lock()
			live[p] = a // still allocated upstream
			mu.Unlock()
		}
		return err
	}
	mu.Lock()
	uncount(a)
	mu.Unlock()
	return nil
}

// recordLive is the RecordStream of an adaptor that keeps its live
// allocations in live, guarded by mu: p must be live through it.
func (l *link) recordLive(mu *sync.Mutex, live map[gpumem.Ptr]liveAlloc, p gpumem.Ptr, s gpumem.Stream) error {
	if l.closed.Load() {
		return l.errClosed()
	}
	mu.Lock()
	_, ok := live[p]
	mu.Unlock()
	if !ok {
		return l.errForeign("RecordStream", p)
	}
	return l.up.RecordStream(p, s)
}
