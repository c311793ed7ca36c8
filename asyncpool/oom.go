package asyncpool

import (
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
)

// oom is the slow path of an allocation that found no memory (cause is the
// backend's error): outside capture (and while no capture the allocator
// knows of is open on the device), wait for the device, free what graphs
// released, trim the pool and try once more; then ask the OOM handler; then
// fail.
func (d *device) oom(size uint64, s gpumem.Stream, capturing bool, cause error) (gpumem.Ptr, error) {
	var extra []error
	capturing = d.captureNear(capturing)
	if !capturing {
		d.mu.Lock()
		d.tally.retries++
		d.mu.Unlock()
		if err := d.settleGraphs(); err != nil {
			extra = append(extra, err)
		}
		if err := d.b.DeviceSynchronize(d.id); err != nil {
			extra = append(extra, fmt.Errorf("asyncpool: synchronizing device %d: %w", d.id, err))
		}
		if err := d.syncFree(); err != nil {
			extra = append(extra, err)
		}
		if err := d.b.MemPoolTrimTo(d.pool, 0); err != nil {
			extra = append(extra, fmt.Errorf("asyncpool: trimming device %d's pool: %w", d.id, err))
		}
		var p gpumem.Ptr
		var err error
		if p, cause, err = d.retryMalloc(size, s); p != 0 || err != nil {
			return p, err
		}
	}
	for attempt := 0; ; attempt++ {
		var again bool
		if d.unlocked(func() { again = d.a.hooks.Retry(d.id, size, attempt) }) {
			return 0, errClosed
		}
		if !again {
			break
		}
		var p gpumem.Ptr
		var err error
		if p, cause, err = d.retryMalloc(size, s); p != 0 || err != nil {
			return p, err
		}
	}
	return 0, d.fail(d.oomError(size, capturing, errors.Join(append([]error{cause}, extra...)...)), s, size)
}

// maxRequest is the largest size that is not impossibly large (2^62, as
// in caching): above it a request is ErrInvalidValue.
const maxRequest = 1 << 62

// tooLarge fails a request larger than the device as any other exhaustion
// (an *gpumem.OutOfMemoryError, counted in NumOOMs, told to the observers)
// after asking the OOM handler, as caching does; the pool is not trimmed
// for it, since no trimming could make room. During a capture the error
// goes without the device's and the pool's figures, as in oom.
func (d *device) tooLarge(size uint64, s gpumem.Stream, capturing bool) error {
	capturing = d.captureNear(capturing)
	d.unlocked(func() {
		for attempt := 0; d.a.hooks.Retry(d.id, size, attempt); attempt++ {
		}
	})
	cause := fmt.Errorf("asyncpool: %d bytes exceed device %d's capacity of %d: %w", size, d.id, d.total, gpumem.ErrOutOfMemory)
	return d.fail(d.oomError(size, capturing, cause), s, size)
}

// captureNear reports whether the out-of-memory path must leave the device
// and its pool alone: the allocation is being captured, or a capture the
// allocator knows of is open on another stream of the device. Waiting for
// the device, trimming the pool or querying it would invalidate that
// capture, as EmptyCache's would (which is refused then).
func (d *device) captureNear(capturing bool) bool {
	if capturing {
		return true
	}
	open, err := d.captureOpen()
	return err == nil && open
}

// fail counts the out-of-memory failure e in the statistics and history,
// gives e the statistics it leaves (for its memory summary) and tells the
// observers. life's read lock is held on entry, and released while the
// observers run.
func (d *device) fail(e *gpumem.OutOfMemoryError, s gpumem.Stream, size uint64) *gpumem.OutOfMemoryError {
	d.mu.Lock()
	d.tally.ooms++
	d.hist.Add(gpumem.ActionOOM, d.id, s.Handle, 0, size)
	var st gpumem.MemoryStats
	d.tally.expand(&st)
	d.mu.Unlock()
	e.Stats = &st
	d.unlocked(func() { d.a.hooks.Notify(func() *gpumem.OutOfMemoryError { return e }) })
	return e
}

// unlocked runs f, the OOM handler or the observers, with life's read lock
// (which the allocation path holds) released, so that f may call the
// allocator, Close included. It reports whether the device was closed
// meanwhile.
func (d *device) unlocked(f func()) bool {
	d.life.RUnlock()
	defer d.life.RLock() // held again even if f panics: Allocate releases it
	f()
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// retryMalloc tries the allocation once more. It returns the memory, or
// the out-of-memory cause to report, or an error that ends the allocation.
func (d *device) retryMalloc(size uint64, s gpumem.Stream) (p gpumem.Ptr, cause, err error) {
	p, err = d.tryMalloc(size, s)
	switch {
	case err == nil:
		return p, nil, nil
	case errors.Is(err, gpumem.ErrOutOfMemory):
		return 0, err, nil
	}
	return 0, nil, fmt.Errorf("asyncpool: allocating %d bytes on %v: %w", size, s, err)
}

// oomError describes the failure as PyTorch does. Largest is the pool's
// reserved-but-unused bytes: an upper bound, since the driver does not say
// how that memory is fragmented.
func (d *device) oomError(size uint64, capturing bool, cause error) *gpumem.OutOfMemoryError {
	e := &gpumem.OutOfMemoryError{
		Allocator: "asyncpool",
		Device:    d.id,
		Requested: size,
		Capacity:  d.total,
		Allocated: uint64(max(d.allocatedBytes(), 0)),
		Err:       cause,
	}
	if capturing {
		// Device and pool queries would invalidate a global-mode
		// capture: the error goes without those figures.
		return d.hint(e)
	}
	if free, _, err := d.b.MemInfo(d.id); err == nil {
		e.Free = free
	}
	e.NoteOtherProcesses(d.b)
	reserved, err1 := d.b.MemPoolGetAttribute(d.pool, gpumem.PoolReservedMemCurrent)
	used, err2 := d.b.MemPoolGetAttribute(d.pool, gpumem.PoolUsedMemCurrent)
	if err1 == nil {
		e.Reserved = reserved
		if err2 == nil && reserved > used {
			e.Largest = reserved - used
		}
	}
	return d.hint(e)
}

// hint fills in e's advice.
func (d *device) hint(e *gpumem.OutOfMemoryError) *gpumem.OutOfMemoryError {
	switch pending := d.pending.Load(); {
	case pending > 0:
		e.Hint = fmt.Sprintf("%s freed but still pending release (on the free stream or held by graphs): lower throttle_ratio so that allocations wait for pending frees sooner, destroy graphs that own memory, or lower release_threshold_mb; per_process_memory_fraction keeps room for other pools (GPUMEM_ALLOC_CONF).",
			gpumem.FormatBytes(uint64(pending)))
	default:
		e.Hint = "Lower throttle_ratio or release_threshold_mb in GPUMEM_ALLOC_CONF so that the pool returns unused memory sooner, or set per_process_memory_fraction to share the device with other pools."
	}
	return e
}
