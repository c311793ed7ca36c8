package fakegpu

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gpumem/gpumem"
)

// Pass is a pass-through gpumem.Allocator for tests: every Allocate is one
// Malloc of the backend and every Deallocate one Free, so its reserved
// bytes are exactly the live requested bytes (a replay's peak reserved
// through it is the trace's floor). A pointer must be deallocated on the
// stream it was allocated on; RecordStream only counts (Records). Close
// frees what is still live. A Pass is safe for concurrent use.
type Pass struct {
	b       gpumem.Backend
	name    string
	mu      sync.Mutex
	stats   gpumem.MemoryStats
	owner   map[gpumem.Ptr]passAlloc
	records int
	closed  bool
}

type passAlloc struct {
	size   uint64
	stream gpumem.Stream
}

// NewPass returns a Pass over b; name is the allocator named in its
// out-of-memory errors and the prefix of its other errors.
func NewPass(b gpumem.Backend, name string) *Pass {
	return &Pass{b: b, name: name, owner: map[gpumem.Ptr]passAlloc{}}
}

// Records returns the number of successful RecordStream calls.
func (a *Pass) Records() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.records
}

// Live returns the number of allocations not yet deallocated.
func (a *Pass) Live() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.owner)
}

// Closed reports whether Close was called.
func (a *Pass) Closed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closed
}

// Allocate mallocs size bytes on s's device; a failed Malloc is counted and
// returned as a *gpumem.OutOfMemoryError wrapping the backend's error.
func (a *Pass) Allocate(size uint64, s gpumem.Stream) (gpumem.Ptr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return 0, gpumem.ErrClosed
	}
	p, err := a.b.Malloc(s.Device, size)
	if err != nil {
		a.stats.NumOOMs++
		return 0, &gpumem.OutOfMemoryError{Allocator: a.name, Requested: size, Err: err}
	}
	a.owner[p] = passAlloc{size, s}
	a.stats.NumDeviceAlloc++
	a.add(int64(size))
	return p, nil
}

// add moves the allocated, reserved and requested bytes by n.
func (a *Pass) add(n int64) {
	a.stats.AllocatedBytes.Add(gpumem.StatLarge, n)
	a.stats.ReservedBytes.Add(gpumem.StatLarge, n)
	a.stats.RequestedBytes.Add(gpumem.StatLarge, n)
}

// Deallocate frees p, which must have been allocated on s.
func (a *Pass) Deallocate(p gpumem.Ptr, s gpumem.Stream) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.freeLocked(p, s)
}

func (a *Pass) freeLocked(p gpumem.Ptr, s gpumem.Stream) error {
	o, ok := a.owner[p]
	if !ok {
		return fmt.Errorf("%s: unknown pointer %#x: %w", a.name, p, gpumem.ErrInvalidValue)
	}
	if o.stream != s {
		return fmt.Errorf("%s: freed on %v, allocated on %v: %w", a.name, s, o.stream, gpumem.ErrInvalidValue)
	}
	if err := a.b.Free(s.Device, p); err != nil {
		return err
	}
	delete(a.owner, p)
	a.stats.NumDeviceFree++
	a.add(-int64(o.size))
	return nil
}

// RecordStream counts the record of a live pointer.
func (a *Pass) RecordStream(p gpumem.Ptr, s gpumem.Stream) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.owner[p]; !ok {
		return fmt.Errorf("%s: record of unknown pointer %#x: %w", a.name, p, gpumem.ErrInvalidValue)
	}
	a.records++
	return nil
}

// Stats returns the statistics of every device together.
func (a *Pass) Stats(dev int) gpumem.MemoryStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}

// ResetPeakStats resets the peaks.
func (a *Pass) ResetPeakStats(dev int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stats.ResetPeaks()
}

// Close frees every live allocation; a second Close returns
// gpumem.ErrClosed.
func (a *Pass) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return gpumem.ErrClosed
	}
	a.closed = true
	var errs []error
	for p, o := range a.owner {
		errs = append(errs, a.freeLocked(p, o.stream))
	}
	return errors.Join(errs...)
}

// EmptyCache does nothing: a Pass caches nothing.
func (a *Pass) EmptyCache() error { return nil }

// SetOOMHandler does nothing: a Pass does not retry.
func (a *Pass) SetOOMHandler(gpumem.OOMHandler) {}

// AddOOMObserver does nothing.
func (a *Pass) AddOOMObserver(gpumem.OOMObserver) {}
