// Fences: the events that order a buffer's moves and frees after its last use.
//
// See doc.go for an overview.

package deferrable

import (
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
)

// recordFenceLocked records b's fence event for stream s on s: a later move or
// free of b is ordered after the work queued on s so far.
func (m *Manager) recordFenceLocked(b *Buffer, s gpumem.Stream) error {
	ev, ok := b.fences[s]
	if !ok {
		var err error
		if ev, err = m.eventLocked(); err != nil {
			return err
		}
		if b.fences == nil {
			b.fences = make(map[gpumem.Stream]gpumem.Event)
		}
		b.fences[s] = ev
	}
	if err := m.b.EventRecord(ev, s); err != nil {
		return fmt.Errorf("deferrable: record event on %v: %w", s, err)
	}
	return nil
}

// errHoldEnded is matched by fenceOrSyncLocked's error when no fence could
// be recorded but the device was synchronized instead: the hold ends.
var errHoldEnded = errors.New("no fence could be recorded on the stream (destroyed, or not live): the device was synchronized instead and the hold ended")

// fenceOrSyncLocked records b's fence on s, the end of a hold. If that
// fails (s destroyed since it was acquired on, say), the device is
// synchronized instead, so that no work queued on s can still use b, and
// the error returned matches errHoldEnded and wraps the recording's; if
// that fails too, the hold must stay, and the error says both.
func (m *Manager) fenceOrSyncLocked(b *Buffer, s gpumem.Stream) error {
	err := m.recordFenceLocked(b, s)
	if err == nil {
		return nil
	}
	if serr := m.b.DeviceSynchronize(m.dev); serr != nil {
		return errors.Join(err, fmt.Errorf("deferrable: synchronizing device %d instead: %w", m.dev, serr))
	}
	return fmt.Errorf("%w: %w", errHoldEnded, err)
}

func (m *Manager) eventLocked() (gpumem.Event, error) {
	if n := len(m.events); n > 0 {
		ev := m.events[n-1]
		m.events = m.events[:n-1]
		return ev, nil
	}
	ev, err := m.b.EventCreate(m.dev, gpumem.EventDisableTiming)
	if err != nil {
		return gpumem.Event{}, fmt.Errorf("deferrable: create event: %w", err)
	}
	return ev, nil
}

// dropFencesLocked returns b's fence events to the pool and forgets its
// pending releases; every use of the old device memory is complete or ordered.
func (m *Manager) dropFencesLocked(b *Buffer) {
	for s, ev := range b.fences {
		m.events = append(m.events, ev)
		delete(b.fences, s)
	}
	for s := range b.pending {
		delete(b.pending, s)
		m.unholdLocked(b, s)
	}
	if b.ready {
		m.events = append(m.events, b.readyEv)
		b.ready = false
	}
}

func fenceList(b *Buffer) []gpumem.Event {
	out := make([]gpumem.Event, 0, len(b.fences))
	for _, ev := range b.fences {
		out = append(out, ev)
	}
	return out
}

// pendingFenceLocked finds a fence whose completion would unlock a device
// buffer held only by asynchronous releases.
func (m *Manager) pendingFenceLocked() (gpumem.Event, bool) {
	for b := range m.live {
		if b.tier != TierDevice || b.moving || b.syncLocks > 0 || len(b.held) > 0 {
			continue
		}
		for s, n := range b.pending {
			if n > 0 {
				return b.fences[s], true
			}
		}
	}
	return gpumem.Event{}, false
}
