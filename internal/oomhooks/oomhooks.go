// Package oomhooks keeps an allocator's out-of-memory handler and observers:
// set and added from any goroutine, read and called by the allocation path
// with none of the allocator's locks held.
package oomhooks

import (
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
