// Package oomhooks keeps an allocator's out-of-memory handler and observers:
// set and added from any goroutine, read and called by the allocation path
// with none of the allocator's locks held.
package oomhooks

import (
	"fmt"
	"sync"

	"github.com/gpumem/gpumem"
)

// Hooks is an allocator's OOM handler and observers. The zero value is
// ready: no handler, no observers.
type Hooks struct {
	mu        sync.Mutex
	handler   gpumem.OOMHandler
	observers []gpumem.OOMObserver
}

// SetHandler installs h; nil removes the handler.
func (k *Hooks) SetHandler(h gpumem.OOMHandler) {
	k.mu.Lock()
	k.handler = h
	k.mu.Unlock()
}

// Handler returns the handler, or nil.
func (k *Hooks) Handler() gpumem.OOMHandler {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.handler
}

// AddObserver adds o; nil is ignored.
func (k *Hooks) AddObserver(o gpumem.OOMObserver) {
	if o == nil {
		return
	}
	k.mu.Lock()
	k.observers = append(k.observers, o)
	k.mu.Unlock()
}

// Notify tells every observer of the failure that describe returns; it
// calls describe only when there is an observer, and the observers with no
// lock held.
func (k *Hooks) Notify(describe func() *gpumem.OutOfMemoryError) {
	k.mu.Lock()
	obs := k.observers[:len(k.observers):len(k.observers)]
	k.mu.Unlock()
	if len(obs) == 0 {
		return
	}
	e := describe()
	for _, o := range obs {
		o(e)
	}
}

// MaxAttempts bounds the attempts an allocation makes at its OOM handler's
// request, in every allocator and adaptor: after the first failure the
// handler is asked at most MaxAttempts times (attempt 0 to MaxAttempts-1),
// and the allocation is retried after each "yes". A handler that frees
// nothing but keeps answering yes would otherwise hold the caller forever;
// eight attempts leave a handler that frees memory in stages (spill a tier,
// then another) room to work.
const MaxAttempts = 8

// Retry asks the handler, with no lock held, whether to retry an allocation
// of size bytes on device dev that failed for lack of memory; attempt counts
// from 0. It is false when there is no handler, when the handler declines,
// and from attempt MaxAttempts on.
func (k *Hooks) Retry(dev int, size uint64, attempt int) bool {
	if attempt >= MaxAttempts {
		return false
	}
	h := k.Handler()
	return h != nil && h(dev, size, attempt)
}

// CheckAttempts, for tests, returns an error unless attempts are the
// attempt arguments that a handler always asking for a retry is called
// with for one allocation: 0 to MaxAttempts-1, in order.
func CheckAttempts(attempts []int) error {
	if len(attempts) != MaxAttempts {
		return fmt.Errorf("handler asked %d times (attempts %v), want %d", len(attempts), attempts, MaxAttempts)
	}
	for i, a := range attempts {
		if a != i {
			return fmt.Errorf("attempts %v, want 0 to %d in order", attempts, MaxAttempts-1)
		}
	}
	return nil
}
