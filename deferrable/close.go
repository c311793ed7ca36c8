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
// tier. Holds not yet released are dropped; their streams should be idle.
// Later calls fail with ErrClosed, but Close, which returns nil as every
// allocator's does once everything is given back. A Close the device
// refuses part of (a free, an event's destroy, the copy stream's) says so
// and keeps what was refused; the next Close tries it again, so that a
// transient failure leaks nothing.
func (m *Manager) Close() error {
	if m == nil {
		return errNil("Close")
	}
	m.closeMu.Lock()
	defer m.closeMu.Unlock()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		if m.left.done {
			return nil
		}
		return m.giveBack(nil)
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

	// Each device buffer is freed on the copy stream after the work
	// recorded against it; what cannot be ordered so, or is refused, is
	// left for giveBack, which frees it after a device synchronization.
	if len(devs) > 0 {
		cs, err := m.mv.copyStream()
		if err != nil {
			errs = append(errs, err)
		}
		for _, r := range devs {
			ordered := err == nil
			for _, ev := range r.waits {
				// A wait refused is no loss: the free is made after a
				// device synchronization instead (giveBack), whose
				// failure is reported.
				if ordered && m.b.StreamWaitEvent(cs, ev) != nil {
					ordered = false
				}
			}
			if !ordered {
				m.left.frees = append(m.left.frees, r.p)
				continue
			}
			if ferr := m.res.Deallocate(r.p, cs); ferr != nil {
				errs = append(errs, ferr)
				m.left.frees = append(m.left.frees, r.p)
			}
		}
	}

	m.mu.Lock()
	var infos []Info
	for b := range bufs {
		m.dropFencesLocked(b)
		m.st.Frees++
		m.historyLocked(gpumem.ActionFreeComplete, m.mv.current(), b.dptr, b.size)
		infos = append(infos, b.infoLocked())
	}
	m.left.events = append(m.left.events, m.events...)
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
	return m.giveBack(errs)
}

// closeLeft is what Close has still to give back: nothing once done.
type closeLeft struct {
	done   bool
	frees  []gpumem.Ptr   // device buffers whose ordered free failed
	events []gpumem.Event // events not yet destroyed
	disk   bool           // the disk tier's file closed and removed
	res    bool           // the manager's own device resource closed
}

// giveBack frees what Close holds, keeping what is refused for the next
// Close; errs are the errors of the Close so far. Called with m.closeMu held.
func (m *Manager) giveBack(errs []error) error {
	if len(m.left.frees) > 0 {
		// Whatever stream the frees were to be ordered on, the device's
		// work is complete after this: the default stream orders them.
		if err := m.b.DeviceSynchronize(m.dev); err != nil {
			errs = append(errs, fmt.Errorf("deferrable: synchronizing device %d before freeing: %w", m.dev, err))
		} else {
			kept := m.left.frees[:0]
			for _, p := range m.left.frees {
				if err := m.res.Deallocate(p, gpumem.Stream{Device: m.dev}); err != nil {
					errs = append(errs, err)
					kept = append(kept, p)
				}
			}
			m.left.frees = kept
		}
	}
	if err := m.mv.close(); err != nil {
		errs = append(errs, err)
	}
	if err := m.arena.close(); err != nil {
		errs = append(errs, err)
	}
	kept := m.left.events[:0]
	for _, ev := range m.left.events {
		if err := m.b.EventDestroy(ev); err != nil {
			errs = append(errs, err)
			kept = append(kept, ev)
		}
	}
	m.left.events = kept
	if m.disk != nil && !m.left.disk {
		if err := m.disk.close(); err != nil {
			errs = append(errs, err)
		} else {
			m.left.disk = true
		}
	}
	// The manager's own device resource keeps and retries what it is
	// refused itself; its memory goes last, after every free above.
	if m.ownRes != nil && len(m.left.frees) == 0 && !m.left.res {
		if err := m.ownRes.Close(); err != nil {
			errs = append(errs, err)
		} else {
			m.left.res = true
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("deferrable: close: %w", err)
	}
	m.left.done = true
	return nil
}

// TrimHost gives back to the system the pinned slabs of the host tier that no
// buffer uses, and returns their bytes. The host tier keeps its slabs across
// spills (pinning memory is slow); call TrimHost after a phase that spilled
// much to unpin what it left behind.
func (m *Manager) TrimHost() (uint64, error) {
	if m == nil {
		return 0, errNil("TrimHost")
	}
	if err := m.usable("trim host"); err != nil {
		return 0, err
	}
	return m.arena.trim()
}
