// Allocation and free: device memory from the upstream, spilling on out of memory.
//
// See doc.go for an overview.

package deferrable

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/oomhooks"
)

// Alloc allocates a deferrable buffer of size bytes on the manager's device,
// spilling other buffers if the device is full or the soft limit would be
// passed. Its content is undefined until written. s is the stream of its
// first use; the buffer may be used on any stream of the device through
// Acquire.
func (m *Manager) Alloc(size uint64, s gpumem.Stream) (*Buffer, error) {
	if m == nil {
		return nil, errNil("Alloc")
	}
	if size == 0 {
		return nil, fmt.Errorf("deferrable: alloc 0 bytes: %w", gpumem.ErrInvalidValue)
	}
	if err := m.checkStream("alloc", s); err != nil {
		return nil, err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, fmt.Errorf("deferrable: alloc: %w", gpumem.ErrClosed)
	}
	m.nMoving++ // Close waits for this allocation to finish
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.nMoving--
		m.cond.Broadcast()
		m.mu.Unlock()
	}()
	cs, err := m.mv.copyStream()
	if err != nil {
		return nil, err
	}
	p, err := m.allocDevice(size, cs)
	if err != nil {
		return nil, err
	}
	b := &Buffer{m: m, size: size, tier: TierDevice, dptr: p}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		m.res.Deallocate(p, cs)
		return nil, fmt.Errorf("deferrable: alloc: %w", gpumem.ErrClosed)
	}
	// The allocation is ordered on the copy stream; the first Acquire orders
	// its stream after this event.
	ev, err := m.eventLocked()
	if err == nil {
		if err = m.b.EventRecord(ev, cs); err != nil {
			m.events = append(m.events, ev)
			err = fmt.Errorf("deferrable: alloc: record event: %w", err)
		}
	}
	if err != nil {
		m.mu.Unlock()
		m.res.Deallocate(p, cs)
		return nil, err
	}
	b.readyEv, b.ready = ev, true
	m.nextID++
	b.id = m.nextID
	m.clock++
	b.lastUsed = m.clock
	m.live[b] = struct{}{}
	m.addTierLocked(TierDevice, size, 1)
	m.st.Allocs++
	m.historyLocked(gpumem.ActionAlloc, s, p, size)
	info := b.infoLocked()
	m.mu.Unlock()
	if f := m.cb.Register; f != nil {
		f(info)
	}
	return b, nil
}

// allocDevice takes size bytes from the upstream resource on the copy stream
// cs, spilling first to honour the soft limit and again after each
// out-of-memory failure, at most oomhooks.MaxAttempts times (the bound the
// upstream's own handler loop has too). Called with no lock held.
func (m *Manager) allocDevice(size uint64, cs gpumem.Stream) (gpumem.Ptr, error) {
	if m.devLim > 0 {
		m.mu.Lock()
		cur := m.tiers[TierDevice].Bytes
		m.mu.Unlock()
		if cur+size > m.devLim {
			m.spillDevice(context.Background(), cur+size-m.devLim, false) // soft: go on whatever it freed
		}
	}
	for attempt := 0; ; attempt++ {
		p, err := m.res.Allocate(size, cs)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, gpumem.ErrOutOfMemory) {
			return 0, fmt.Errorf("deferrable: allocate %s: %w", gpumem.FormatBytes(size), err)
		}
		if attempt >= oomhooks.MaxAttempts {
			return 0, fmt.Errorf("deferrable: allocate %s: still out of memory after %d spills: %w", gpumem.FormatBytes(size), attempt, err)
		}
		freed, waited, serr := m.spillDevice(context.Background(), m.shortfall(size, attempt), true)
		if freed == 0 && !waited {
			if serr != nil {
				return 0, fmt.Errorf("deferrable: allocate %s: spilling failed (%v): %w", gpumem.FormatBytes(size), serr, err)
			}
			return 0, fmt.Errorf("deferrable: allocate %s: no unlocked buffer left to spill: %w", gpumem.FormatBytes(size), err)
		}
		m.mu.Lock()
		m.st.AllocRetries++
		m.mu.Unlock()
	}
}

// shortfall is how much to spill for an allocation of size that failed: at
// first what the device lacks, then (fragmentation, caches) the whole size.
func (m *Manager) shortfall(size uint64, attempt int) uint64 {
	if attempt == 0 {
		if free, _, err := m.b.MemInfo(m.dev); err == nil && free < size {
			return size - free
		}
	}
	return size
}

// Free gives the buffer back, wherever it is. It fails with ErrLocked while
// the buffer is held; asynchronous releases still in flight are fine (the
// device memory is freed in stream order after them).
func (b *Buffer) Free() error {
	const op = "free"
	if err := b.valid(op); err != nil {
		return err
	}
	m := b.m
	m.mu.Lock()
	if err := b.waitLocked(op); err != nil {
		m.mu.Unlock()
		return err
	}
	if b.syncLocks > 0 || len(b.held) > 0 {
		m.mu.Unlock()
		return fmt.Errorf("deferrable: free: buffer %d: %w", b.id, ErrLocked)
	}
	b.freed = true
	delete(m.live, b)
	for s := range b.pending {
		delete(b.pending, s)
		m.unholdLocked(b, s)
	}
	tier, p, waits := b.tier, b.dptr, fenceList(b)
	m.subTierLocked(tier, b.size, 1)
	m.markMovingLocked(b) // keeps Close waiting until the memory is back
	m.mu.Unlock()

	var err error
	switch tier {
	case TierDevice:
		err = m.freeDevice(p, waits)
	case TierDisk:
		m.disk.release(b.ext)
	}

	if tier == TierHost {
		m.arena.release(b.hblk)
	}
	m.mu.Lock()
	b.hblk = hostBlock{}
	m.dropFencesLocked(b)
	m.st.Frees++
	m.historyLocked(gpumem.ActionFreeComplete, m.mv.current(), p, b.size)
	info := b.infoLocked()
	b.moving = false
	m.nMoving--
	m.cond.Broadcast()
	m.mu.Unlock()
	if f := m.cb.Free; f != nil {
		f(info)
	}
	if err != nil {
		return fmt.Errorf("deferrable: free: buffer %d: %w", b.id, err)
	}
	return nil
}

// freeDevice gives device memory back on the copy stream, after the fences.
// A fence the copy stream cannot be ordered after is waited for on the host
// instead, so that the memory is given back now rather than held to Close;
// only when that wait fails too is the memory kept (the resource frees it at
// Close) and the error returned.
func (m *Manager) freeDevice(p gpumem.Ptr, waits []gpumem.Event) error {
	cs, err := m.mv.copyStream()
	if err != nil {
		return err
	}
	for _, ev := range waits {
		if err := m.b.StreamWaitEvent(cs, ev); err != nil {
			if serr := m.b.EventSynchronize(ev); serr != nil {
				return fmt.Errorf("order free after last use: %w (waiting on the host: %w)", err, serr)
			}
		}
	}
	return m.res.Deallocate(p, cs)
}
