// Holds: Acquire and Release, synchronous and stream-ordered, and when a buffer is locked.
//
// See doc.go for an overview.

package deferrable

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
)

// Acquire retrieves the buffer to the device if needed (which may spill
// others) and holds it: it returns the device address, valid for work ordered
// on s (s waits, without blocking the host, for a copy still in flight). The
// hold is counted; it ends with Release. Buffers held are never spilled.
func (b *Buffer) Acquire(s gpumem.Stream) (gpumem.Ptr, error) {
	return b.acquire(s, false)
}

// AcquireAsync is Acquire for stream-ordered work: the hold is registered on
// s and ends with ReleaseAsync(s), Manager.ReleaseStream(s) or
// Manager.SyncAndUnlock(s) once s has passed the work. Several streams may
// hold one buffer at once.
func (b *Buffer) AcquireAsync(s gpumem.Stream) (gpumem.Ptr, error) {
	return b.acquire(s, true)
}

func (b *Buffer) acquire(s gpumem.Stream, async bool) (gpumem.Ptr, error) {
	const op = "acquire"
	if err := b.valid(op); err != nil {
		return 0, err
	}
	m := b.m
	if err := m.checkStream(op, s); err != nil {
		return 0, err
	}
	m.mu.Lock()
	if err := b.waitLocked(op); err != nil {
		m.mu.Unlock()
		return 0, err
	}
	if b.tier != TierDevice {
		m.markMovingLocked(b)
		m.mu.Unlock()
		notify, err := m.unspill(context.Background(), b)
		m.mu.Lock()
		b.moving = false
		m.nMoving--
		m.cond.Broadcast()
		if err == nil {
			err = b.usableLocked(op)
		}
		if err != nil {
			m.mu.Unlock()
			notify()
			return 0, err
		}
		defer notify()
	}
	defer m.mu.Unlock()
	if b.ready {
		ev := b.readyEv
		if done, err := m.b.EventQuery(ev); err == nil && done {
			b.ready = false
			m.events = append(m.events, ev)
		} else if err := m.b.StreamWaitEvent(s, ev); err != nil {
			return 0, fmt.Errorf("deferrable: acquire: order %v after the copy: %w", s, err)
		}
	}
	if async {
		if b.held == nil {
			b.held = make(map[gpumem.Stream]int)
		}
		b.held[s]++
		set := m.holds[s]
		if set == nil {
			set = make(map[*Buffer]struct{})
			m.holds[s] = set
		}
		set[b] = struct{}{}
	} else {
		b.syncLocks++
		seen := false
		for _, t := range b.syncStreams {
			seen = seen || t == s
		}
		if !seen {
			b.syncStreams = append(b.syncStreams, s)
		}
	}
	m.clock++
	b.lastUsed = m.clock
	return b.dptr, nil
}

// Release ends one Acquire hold. When the last one ends, an event is recorded
// on each stream the holders named, so a later spill or free waits for the
// work they queued there; the host does not wait. If a stream can no
// longer take the event (destroyed since), the device is synchronized
// instead and the hold still ends; the error returned says so.
func (b *Buffer) Release() error {
	m, err := b.lockUsable("release")
	if err != nil {
		return err
	}
	defer m.mu.Unlock()
	if b.syncLocks == 0 {
		return fmt.Errorf("deferrable: release: buffer %d is not acquired: %w", b.id, gpumem.ErrInvalidValue)
	}
	var failed error
	if b.syncLocks == 1 {
		for _, s := range b.syncStreams {
			if err := m.fenceOrSyncLocked(b, s); err != nil {
				if !errors.Is(err, errHoldEnded) {
					return fmt.Errorf("deferrable: release: %w", err)
				}
				failed = errors.Join(failed, err)
			}
		}
		b.syncStreams = b.syncStreams[:0]
	}
	b.syncLocks--
	m.clock++
	b.lastUsed = m.clock
	if failed != nil {
		return fmt.Errorf("deferrable: release: %w", failed)
	}
	return nil
}

// ReleaseAsync ends one AcquireAsync hold on s: it records an event on s and
// the lock drops when s reaches it (checked lazily, when the manager looks for
// buffers to spill). The host does not wait. If s can no longer take the
// event (destroyed since), the device is synchronized instead and the hold
// ends, with an error that says so.
func (b *Buffer) ReleaseAsync(s gpumem.Stream) error {
	m, err := b.lockUsable("release async")
	if err != nil {
		return err
	}
	defer m.mu.Unlock()
	if b.held[s] == 0 {
		return fmt.Errorf("deferrable: release async: buffer %d is not held on %v: %w", b.id, s, gpumem.ErrInvalidValue)
	}
	if err := m.fenceOrSyncLocked(b, s); err != nil {
		if !errors.Is(err, errHoldEnded) {
			return fmt.Errorf("deferrable: release async: %w", err)
		}
		// The device was synchronized: nothing queued on s can still
		// use the buffer, and there is no fence to wait for.
		if b.held[s]--; b.held[s] == 0 {
			delete(b.held, s)
		}
		return fmt.Errorf("deferrable: release async: %w", err)
	}
	if b.held[s]--; b.held[s] == 0 {
		delete(b.held, s)
	}
	if b.pending == nil {
		b.pending = make(map[gpumem.Stream]int)
	}
	b.pending[s]++
	m.clock++
	b.lastUsed = m.clock
	return nil
}

// Locked reports whether the buffer is held or its asynchronous release has
// not yet been seen complete.
func (b *Buffer) Locked() bool {
	if b == nil || b.m == nil {
		return false
	}
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	return !b.freed && b.m.lockedLocked(b)
}

// lockedLocked reports whether b is held, or released asynchronously by an
// event not yet complete (queried lazily here).
func (m *Manager) lockedLocked(b *Buffer) bool {
	if b.syncLocks > 0 || len(b.held) > 0 {
		return true
	}
	for s, n := range b.pending {
		if n == 0 {
			delete(b.pending, s)
			continue
		}
		done, err := m.b.EventQuery(b.fences[s])
		if err != nil || !done {
			return true
		}
		delete(b.pending, s)
		m.unholdLocked(b, s)
	}
	return false
}

// unholdLocked forgets b on stream s once it is neither held nor pending there.
func (m *Manager) unholdLocked(b *Buffer, s gpumem.Stream) {
	if b.held[s] > 0 || b.pending[s] > 0 {
		return
	}
	if set := m.holds[s]; set != nil {
		delete(set, b)
		if len(set) == 0 {
			delete(m.holds, s)
		}
	}
}
