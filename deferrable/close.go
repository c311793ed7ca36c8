// Close and TrimHost: giving back what the manager holds.
//
// See doc.go for an overview.

package deferrable

import (
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
)

// Close frees every buffer (after the work recorded against it), the pinned
// host arena, the staging buffers, the copy stream, the events and the disk
// tier. Holds not yet
// released are dropped; their streams should be idle. Later calls fail with
// ErrClosed, but Close, which returns nil as every allocator's does.
func (m *Manager) Close() error {
	if m == nil {
		return fmt.Errorf("deferrable: Close of a nil manager: %w", gpumem.ErrInvalidValue)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	for m.nMoving > 0 {
		m.cond.Wait()
	}
	var errs []error
	type rel struct {
		p     gpumem.Ptr
		waits []gpumem.Event
	}
	var devs []rel
	for b := range m.live {
		for s := range b.held {
			// A stream destroyed since (idle, as asked) takes no fence:
			// the device is synchronized instead, which orders the free
			// just as well.
			if err := m.fenceOrSyncLocked(b, s); err != nil && !errors.Is(err, errHoldEnded) {
				errs = append(errs, err)
			}
		}
		if b.tier == TierDevice {
			devs = append(devs, rel{b.dptr, fenceList(b)})
		}
		if b.tier == TierDisk {
			m.disk.release(b.ext)
		}
		b.freed, b.hblk = true, hostBlock{}
	}
	bufs := m.live
	m.live = map[*Buffer]struct{}{}
	m.holds = map[gpumem.Stream]map[*Buffer]struct{}{}
	m.mu.Unlock()

	if len(devs) > 0 {
		cs, err := m.mv.copyStream()
		if err != nil {
			errs = append(errs, err)
		} else {
			for _, r := range devs {
				for _, ev := range r.waits {
					if err := m.b.StreamWaitEvent(cs, ev); err != nil {
						errs = append(errs, err)
					}
				}
				if err := m.res.Deallocate(r.p, cs); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if err := m.mv.close(); err != nil {
		errs = append(errs, err)
	}
	if err := m.arena.close(); err != nil {
		errs = append(errs, err)
	}
	m.mu.Lock()
	var infos []Info
	for b := range bufs {
		m.dropFencesLocked(b)
		m.st.Frees++
		m.historyLocked(gpumem.ActionFreeComplete, m.mv.current(), b.dptr, b.size)
		infos = append(infos, b.infoLocked())
	}
	for _, ev := range m.events {
		if err := m.b.EventDestroy(ev); err != nil {
			errs = append(errs, err)
		}
	}
	m.events = nil
	for t := range m.tiers {
		m.tiers[t].Buffers, m.tiers[t].Bytes = 0, 0
	}
	m.mu.Unlock()
	if f := m.cb.Free; f != nil {
		for _, info := range infos {
			f(info)
		}
	}
	if m.disk != nil {
		if err := m.disk.close(); err != nil {
			errs = append(errs, err)
		}
	}
	if m.ownRes != nil {
		if err := m.ownRes.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("deferrable: close: %w", err)
	}
	return nil
}

// TrimHost gives back to the system the pinned slabs of the host tier that no
// buffer uses, and returns their bytes. The host tier keeps its slabs across
// spills (pinning memory is slow); call TrimHost after a phase that spilled
// much to unpin what it left behind.
func (m *Manager) TrimHost() (uint64, error) {
	if err := m.usable("trim host"); err != nil {
		return 0, err
	}
	return m.arena.trim()
}
