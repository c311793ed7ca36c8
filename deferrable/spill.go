// The spilling policy: when to spill, which buffers, and to which tier.
//
// See doc.go for an overview.

package deferrable

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
)

// Spill moves unlocked buffers off the device, chosen by the policy, until at
// least bytes have been freed or nothing unlocked is left. It returns the bytes
// freed; an error says why some buffer could not be moved (it stays where it
// was, whole).
func (m *Manager) Spill(bytes uint64) (uint64, error) {
	if m == nil {
		return 0, errNil("Spill")
	}
	return m.SpillContext(context.Background(), bytes)
}

// SpillContext is Spill, stopped when ctx is done: it checks ctx before each
// buffer and between the chunks of a copy through the staging ring or to
// disk (a copy into the pinned arena is one DMA and runs to its end). A
// buffer whose move is stopped stays where it was, whole; the buffers moved
// before stay moved. It returns the bytes freed so far and an error matching
// ctx.Err(). A stopped move is not counted in Stats' failures.
func (m *Manager) SpillContext(ctx context.Context, bytes uint64) (uint64, error) {
	if m == nil {
		return 0, errNil("SpillContext")
	}
	if err := m.usable("spill"); err != nil {
		return 0, err
	}
	if ctx == nil {
		return 0, errNilContext("spill")
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("deferrable: spill: %w", err)
	}
	freed, _, err := m.spillDevice(ctx, bytes, false)
	return freed, err
}

// OOMHandler returns a handler to give other allocators (SetOOMHandler): on
// out-of-memory on the manager's device it spills at least the requested
// bytes of unlocked buffers (on the first attempt, only what the device
// lacks), as far as there are any, and asks for a retry when it spilled
// something.
func (m *Manager) OOMHandler() gpumem.OOMHandler {
	if m == nil {
		return nil
	}
	return func(dev int, requested uint64, attempt int) bool {
		if dev != m.dev {
			return false
		}
		if requested == 0 {
			requested = 1
		}
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return false
		}
		m.nMoving++ // Close waits for this handler
		m.mu.Unlock()
		freed, waited, _ := m.spillDevice(context.Background(), m.shortfall(requested, attempt), true)
		m.mu.Lock()
		m.st.OOMHandlerCalls++
		m.st.OOMSpilledBytes += freed
		m.nMoving--
		m.cond.Broadcast()
		m.mu.Unlock()
		return freed > 0 || waited
	}
}

// spillDevice frees at least need device bytes if it can. With wait, when
// nothing can be spilled now it waits instead for what will free device
// memory soon: spills in flight on other goroutines, or an asynchronous
// release (EventSynchronize on its fence), and reports that it waited, so
// that the caller retries. It stops when ctx is done, between buffers or
// inside a move. Called with no lock held.
func (m *Manager) spillDevice(ctx context.Context, need uint64, wait bool) (freed uint64, waited bool, err error) {
	var errs []error
	for round := 0; freed < need && round < 8; round++ {
		if err := ctx.Err(); err != nil {
			errs = append(errs, fmt.Errorf("deferrable: spill: %w", err))
			break
		}
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			break
		}
		victims := m.chooseLocked(TierDevice, need-freed)
		if len(victims) == 0 {
			if !wait || waited {
				m.mu.Unlock()
				break
			}
			if m.nSpilling > 0 {
				for n := m.nSpilling; n > 0 && m.nSpilling == n && !m.closed; {
					m.cond.Wait()
				}
				m.mu.Unlock()
				waited = true
				continue
			}
			ev, ok := m.pendingFenceLocked()
			m.mu.Unlock()
			if !ok {
				break
			}
			m.b.EventSynchronize(ev)
			waited = true
			continue
		}
		m.nSpilling += len(victims)
		m.mu.Unlock()
		progress := false
		for i, v := range victims {
			if err := ctx.Err(); err != nil {
				// The rest stay where they are.
				for _, r := range victims[i:] {
					m.mu.Lock()
					m.nSpilling--
					m.mu.Unlock()
					m.doneMoving(r)
				}
				return freed, waited, errors.Join(append(errs, fmt.Errorf("deferrable: spill: %w", err))...)
			}
			notify, err := m.spillOne(ctx, v)
			m.mu.Lock()
			m.nSpilling--
			m.mu.Unlock()
			m.doneMoving(v)
			notify()
			if err != nil {
				errs = append(errs, err)
				continue
			}
			freed += v.size
			progress = true
		}
		if !progress {
			break
		}
	}
	return freed, waited, errors.Join(errs...)
}

// chooseLocked asks the policy for victims among the unlocked buffers of tier
// and marks the chosen ones moving.
func (m *Manager) chooseLocked(tier Tier, need uint64) []*Buffer {
	var cands []Candidate
	for b := range m.live {
		if b.tier == tier && !b.moving && !m.lockedLocked(b) {
			cands = append(cands, Candidate{Buffer: b, Info: b.infoLocked(), LastUsed: b.lastUsed})
		}
	}
	if len(cands) == 0 {
		return nil
	}
	eligible := make(map[*Buffer]bool, len(cands))
	for _, c := range cands {
		eligible[c.Buffer] = true
	}
	var out []*Buffer
	for _, c := range m.policy.Victims(cands, need) {
		if eligible[c.Buffer] {
			eligible[c.Buffer] = false
			m.markMovingLocked(c.Buffer)
			out = append(out, c.Buffer)
		}
	}
	return out
}

// spillOne moves device-resident b (marked moving) to the host tier, making
// room there by demoting older host buffers to disk, or to disk directly.
func (m *Manager) spillOne(ctx context.Context, b *Buffer) (func(), error) {
	err := m.reserveHost(b.size)
	if err == nil {
		notify, err := m.fromDevice(ctx, b, TierHost, m.disk != nil)
		if err != nil && m.disk != nil && errors.Is(err, gpumem.ErrOutOfMemory) {
			// The arena could not place it (its limit, fragmentation).
			return m.fromDevice(ctx, b, TierDisk, false)
		}
		return notify, err
	}
	if m.disk == nil {
		m.mu.Lock()
		m.st.DeviceToHost.Failures++
		m.mu.Unlock()
		return nop, fmt.Errorf("deferrable: spill buffer %d: %w", b.id, err)
	}
	if b.size <= m.hostLm {
		m.demoteHost(ctx, b.size)
		if m.reserveHost(b.size) == nil {
			return m.fromDevice(ctx, b, TierHost, false)
		}
	}
	return m.fromDevice(ctx, b, TierDisk, false)
}

// reserveHost reserves room in the host tier or fails with ErrOutOfMemory.
func (m *Manager) reserveHost(size uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hostLm == 0 || m.tiers[TierHost].Bytes+m.hostRsv+size <= m.hostLm {
		m.hostRsv += size
		return nil
	}
	return fmt.Errorf("deferrable: host tier full: %s held and %s reserved of %s, %s more asked: %w",
		gpumem.FormatBytes(m.tiers[TierHost].Bytes), gpumem.FormatBytes(m.hostRsv), gpumem.FormatBytes(m.hostLm),
		gpumem.FormatBytes(size), gpumem.ErrOutOfMemory)
}

// demoteHost moves host buffers to disk until size more bytes fit under the
// host limit (as far as it can, and until ctx is done).
func (m *Manager) demoteHost(ctx context.Context, size uint64) {
	m.mu.Lock()
	var victims []*Buffer
	if used := m.tiers[TierHost].Bytes + m.hostRsv + size; used > m.hostLm {
		victims = m.chooseLocked(TierHost, used-m.hostLm)
	}
	m.mu.Unlock()
	for _, v := range victims {
		notify, _ := m.hostToDisk(ctx, v) // failure or ctx done: v stays on the host
		m.doneMoving(v)
		notify()
	}
}
