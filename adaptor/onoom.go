package adaptor

// See doc.go for an overview.

import (
	"errors"
	"sync"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/oomhooks"
)

// OnOOM calls a handler when the upstream fails an allocation for lack of
// memory and retries it when the handler asks, after RMM's
// failure_callback_resource_adaptor.
//
// After the upstream's first out-of-memory failure (an error matching
// gpumem.ErrOutOfMemory) the handler is called with no lock held, with the
// device, the size and the attempt (from 0); when it returns true the
// allocation is tried again. The handler is asked at most
// oomhooks.MaxAttempts (8) times per allocation, the one bound of every
// allocator and adaptor: a handler that frees nothing but keeps answering
// yes cannot hold the caller forever. Each retry counts in Stats'
// NumAllocRetries; the final failure (the handler declined or the bound was
// reached) is returned as the upstream reported it and told to OnOOM's
// observers, once. Other errors are returned at once.
//
// The handler belongs to OnOOM: SetOOMHandler replaces it, and the
// upstream's own handler should be left unset, or the two retry loops
// nest. Observers added with AddOOMObserver are OnOOM's, told of final
// failures only; the upstream tells its own observers of every attempt.
//
// The device is the stream's (s.Device). Deallocate and RecordStream go to
// the upstream unchanged (OnOOM keeps no record of pointers), and so do
// EmptyCache and ResetPeakStats; Stats are the upstream's with OnOOM's
// retries added. Stream ordering is the upstream's.
//
// Closing an OnOOM closes its upstream (it owns it); a second Close returns
// nil. An OnOOM is safe for concurrent use; its handler may be called from
// several goroutines at once.
type OnOOM struct {
	link
	hooks oomhooks.Hooks

	mu      sync.Mutex
	retries map[int]int64
}

var _ gpumem.Adaptor = (*OnOOM)(nil)

// NewOnOOM returns an OnOOM over up with handler h (nil: none until
// SetOOMHandler).
func NewOnOOM(up gpumem.Allocator, h gpumem.OOMHandler) (*OnOOM, error) {
	if err := checkUpstream(up, "adaptor.OnOOM"); err != nil {
		return nil, err
	}
	o := &OnOOM{link: link{up: up, name: "adaptor.OnOOM"}, retries: map[int]int64{}}
	o.hooks.SetHandler(h)
	return o, nil
}

// Allocate takes size bytes from the upstream on s, retrying on
// exhaustion while the handler asks.
func (o *OnOOM) Allocate(size uint64, s gpumem.Stream) (gpumem.Ptr, error) {
	if o.closed.Load() {
		return 0, o.errClosed()
	}
	if size == 0 {
		return 0, o.errZero()
	}
	for attempt := 0; ; attempt++ {
		p, err := o.up.Allocate(size, s)
		if err == nil || !errors.Is(err, gpumem.ErrOutOfMemory) {
			return p, err
		}
		if o.hooks.Retry(s.Device, size, attempt) {
			o.mu.Lock()
			o.retries[s.Device]++
			o.mu.Unlock()
			continue
		}
		o.hooks.Notify(func() *gpumem.OutOfMemoryError {
			var oom *gpumem.OutOfMemoryError
			if errors.As(err, &oom) {
				return oom
			}
			return &gpumem.OutOfMemoryError{Allocator: o.name, Device: s.Device, Requested: size, Err: err}
		})
		return 0, err
	}
}

// Deallocate frees p through the upstream; s is the stream on which its
// last use is ordered.
func (o *OnOOM) Deallocate(p gpumem.Ptr, s gpumem.Stream) error {
	if o.closed.Load() {
		return o.errClosed()
	}
	return o.up.Deallocate(p, s)
}

// RecordStream marks p as used on s (upstream).
func (o *OnOOM) RecordStream(p gpumem.Ptr, s gpumem.Stream) error {
	if o.closed.Load() {
		return o.errClosed()
	}
	return o.up.RecordStream(p, s)
}

// Stats returns the upstream's statistics of device dev with OnOOM's
// retries added to NumAllocRetries.
func (o *OnOOM) Stats(dev int) gpumem.MemoryStats {
	if o.closed.Load() {
		return gpumem.MemoryStats{}
	}
	st := o.up.Stats(dev)
	o.mu.Lock()
	st.NumAllocRetries += o.retries[dev]
	o.mu.Unlock()
	return st
}

// ResetPeakStats resets the upstream's peaks of device dev.
func (o *OnOOM) ResetPeakStats(dev int) {
	if !o.closed.Load() {
		o.up.ResetPeakStats(dev)
	}
}

// SetOOMHandler replaces OnOOM's handler (nil: none, and failures are
// returned at once).
func (o *OnOOM) SetOOMHandler(h gpumem.OOMHandler) { o.hooks.SetHandler(h) }

// AddOOMObserver adds an observer told of every final failure.
func (o *OnOOM) AddOOMObserver(obs gpumem.OOMObserver) { o.hooks.AddObserver(obs) }

// Close closes the upstream, which releases everything allocated through
// o; every later call but Close and Stats fails with ErrClosed.
func (o *OnOOM) Close() error { return o.close() }
