// Locks over several buffers and streams: LockAndLaunch, ReleaseStream, SyncAndUnlock.
//
// See doc.go for an overview.

package deferrable

import (
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
)

// LockAndLaunch is the seed's synchronous form: it retrieves every buffer to
// the device and locks it, calls fn with their device addresses (in the order
// given), and unlocks them. fn's work must be ordered on the device's default
// stream or complete when fn returns.
func (m *Manager) LockAndLaunch(fn func(ptrs []gpumem.Ptr) error, bufs ...*Buffer) error {
	if m == nil {
		return errNil("LockAndLaunch")
	}
	if fn == nil {
		return fmt.Errorf("deferrable: lock and launch: nil function: %w", gpumem.ErrInvalidValue)
	}
	s := gpumem.Stream{Device: m.dev}
	ptrs, err := m.acquireAll(s, false, bufs)
	if err != nil {
		return err
	}
	// The buffers are released on every way out of fn: a panic in fn
	// releases them and then goes on panicking.
	done := false
	defer func() {
		if !done {
			m.undo(s, false, bufs)
		}
	}()
	ferr := fn(ptrs)
	done = true
	var errs []error
	for _, b := range bufs {
		if err := b.Release(); err != nil {
			errs = append(errs, err)
		}
	}
	if ferr != nil {
		return ferr
	}
	return errors.Join(errs...)
}

// LockAndLaunchAsync is the stream-ordered form: it retrieves and locks every
// buffer on s and calls fn, which queues work on s. The locks stay registered
// on s until ReleaseStream(s) or SyncAndUnlock(s).
func (m *Manager) LockAndLaunchAsync(s gpumem.Stream, fn func(s gpumem.Stream, ptrs []gpumem.Ptr) error, bufs ...*Buffer) error {
	if m == nil {
		return errNil("LockAndLaunchAsync")
	}
	if fn == nil {
		return fmt.Errorf("deferrable: lock and launch: nil function: %w", gpumem.ErrInvalidValue)
	}
	ptrs, err := m.acquireAll(s, true, bufs)
	if err != nil {
		return err
	}
	// A panic in fn releases the holds on s (as ReleaseStream would for
	// them) and then goes on panicking.
	done := false
	defer func() {
		if !done {
			m.undo(s, true, bufs)
		}
	}()
	err = fn(s, ptrs)
	done = true
	return err
}

func (m *Manager) acquireAll(s gpumem.Stream, async bool, bufs []*Buffer) ([]gpumem.Ptr, error) {
	ptrs := make([]gpumem.Ptr, len(bufs))
	for i, b := range bufs {
		if b == nil || b.m != m {
			m.undo(s, async, bufs[:i])
			return nil, fmt.Errorf("deferrable: lock and launch: buffer %d is not one of this manager's: %w", i, gpumem.ErrInvalidValue)
		}
		p, err := b.acquire(s, async)
		if err != nil {
			m.undo(s, async, bufs[:i])
			return nil, err
		}
		ptrs[i] = p
	}
	return ptrs, nil
}

func (m *Manager) undo(s gpumem.Stream, async bool, bufs []*Buffer) {
	for _, b := range bufs {
		if async {
			b.ReleaseAsync(s)
		} else {
			b.Release()
		}
	}
}

// ReleaseStream releases every asynchronous hold registered on s (by
// AcquireAsync or LockAndLaunchAsync), as one ReleaseAsync(s) on each: the
// locks drop when s reaches this point, without blocking the host. If s can
// no longer take the events (destroyed since the holds were taken), the
// device is synchronized instead and the holds end, with an error that says
// so.
func (m *Manager) ReleaseStream(s gpumem.Stream) error {
	if m == nil {
		return errNil("ReleaseStream")
	}
	if s.Device != m.dev {
		return m.checkStream("release stream", s)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("deferrable: release stream: %w", gpumem.ErrClosed)
	}
	if len(m.holds[s]) == 0 {
		// Nothing to release: only say whether s is a stream at all. A
		// stream with holds is not asked, since it may have been
		// destroyed since they were taken.
		return m.checkStream("release stream", s)
	}
	var errs []error
	var ended error // the device was synchronized in place of a fence
	for b := range m.holds[s] {
		n := b.held[s]
		if n == 0 {
			continue
		}
		err := ended
		if err == nil {
			err = m.fenceOrSyncLocked(b, s)
		}
		if err != nil {
			if !errors.Is(err, errHoldEnded) {
				errs = append(errs, err)
				continue
			}
			// Nothing queued on s can still use b, and there is no
			// fence to wait for: the holds end now.
			ended = err
			delete(b.held, s)
			m.unholdLocked(b, s)
			continue
		}
		delete(b.held, s)
		if b.pending == nil {
			b.pending = make(map[gpumem.Stream]int)
		}
		b.pending[s] += n
		m.clock++
		b.lastUsed = m.clock
	}
	if ended != nil {
		errs = append(errs, fmt.Errorf("deferrable: release stream: %w", ended))
	}
	return errors.Join(errs...)
}

// SyncAndUnlock is the seed's synchronous unlock: it releases every hold
// registered on s, waits for s to finish its work, and drops the locks at once.
func (m *Manager) SyncAndUnlock(s gpumem.Stream) error {
	if m == nil {
		return errNil("SyncAndUnlock")
	}
	if err := m.ReleaseStream(s); err != nil {
		return err
	}
	if err := m.b.StreamSynchronize(s); err != nil {
		return fmt.Errorf("deferrable: sync and unlock: %w", err)
	}
	m.mu.Lock()
	for b := range m.holds[s] {
		m.lockedLocked(b) // the events on s are complete: this drops them
	}
	m.mu.Unlock()
	return nil
}
