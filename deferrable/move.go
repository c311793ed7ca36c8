// Tier moves: copies between the device, the pinned host arena and the disk file.
//
// See doc.go for an overview.

package deferrable

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/extent"
)

// MoveTo moves the buffer to tier t now: down (it must not be locked) or up
// (TierDevice retrieves it without holding it). Limits apply: a move to the
// host fails with ErrOutOfMemory when the host tier is full, and a move to
// disk needs Options.DiskDir.
func (b *Buffer) MoveTo(t Tier) error {
	return b.MoveToContext(context.Background(), t)
}

// MoveToContext is MoveTo, stopped when ctx is done: it checks ctx before the
// move and between the chunks of a copy through the staging ring, to disk or
// from disk (a copy between the device and the pinned arena is one DMA and
// runs to its end). A stopped move leaves the buffer where it was, whole, and
// returns an error matching ctx.Err(); it is not counted in Stats' failures.
// Waiting for another goroutine's move of the same buffer is not stopped.
func (b *Buffer) MoveToContext(ctx context.Context, t Tier) error {
	const op = "move"
	if err := b.valid(op); err != nil {
		return err
	}
	if ctx == nil {
		return errNilContext(op)
	}
	if t < 0 || t >= numTiers {
		return fmt.Errorf("deferrable: move to %v: %w", t, gpumem.ErrInvalidValue)
	}
	m := b.m
	if t == TierDisk && m.disk == nil {
		return fmt.Errorf("deferrable: move to disk: no disk tier (Options.DiskDir): %w", gpumem.ErrInvalidValue)
	}
	m.mu.Lock()
	if err := b.waitLocked(op); err != nil {
		m.mu.Unlock()
		return err
	}
	from := b.tier
	if from == t {
		m.mu.Unlock()
		return nil
	}
	if from == TierDevice && m.lockedLocked(b) {
		m.mu.Unlock()
		return fmt.Errorf("deferrable: move buffer %d to %v: %w", b.id, t, ErrLocked)
	}
	if err := ctx.Err(); err != nil {
		m.mu.Unlock()
		return fmt.Errorf("deferrable: move buffer %d to %v: %w", b.id, t, err)
	}
	m.markMovingLocked(b)
	m.mu.Unlock()
	var notify func()
	var err error
	switch {
	case t == TierDevice:
		notify, err = m.unspill(ctx, b)
	case from == TierDevice:
		if t == TierHost {
			if err = m.reserveHost(b.size); err == nil {
				notify, err = m.fromDevice(ctx, b, TierHost, false)
			}
		} else {
			notify, err = m.fromDevice(ctx, b, TierDisk, false)
		}
	case t == TierDisk:
		notify, err = m.hostToDisk(ctx, b)
	default:
		if err = m.reserveHost(b.size); err == nil {
			notify, err = m.diskToHost(ctx, b)
		}
	}
	m.doneMoving(b)
	if notify != nil {
		notify()
	}
	return err
}

func nop() {}

// errNilContext is the error of an operation given a nil context.
func errNilContext(op string) error {
	return fmt.Errorf("deferrable: %s: nil context (use context.Background()): %w", op, gpumem.ErrInvalidValue)
}

// stopped reports whether err is a move stopped by its context, which
// Stats does not count as a failure.
func stopped(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func (m *Manager) markMovingLocked(b *Buffer) {
	b.moving = true
	m.nMoving++
}

func (m *Manager) doneMoving(b *Buffer) {
	m.mu.Lock()
	b.moving = false
	m.nMoving--
	m.cond.Broadcast()
	m.mu.Unlock()
}

// fromDevice copies device-resident b (marked moving) to tier to (host room
// already reserved): to the host, one DMA into a block of the pinned arena; to
// disk, through the staging ring. Then it gives the device memory back. With
// fallback, a failure for lack of memory is counted as a fallback, not a
// failure: the caller then spills to disk. It stops when ctx is done, before
// the copy or between chunks to disk.
func (m *Manager) fromDevice(ctx context.Context, b *Buffer, to Tier, fallback bool) (func(), error) {
	m.mu.Lock()
	src, size, waits := b.dptr, b.size, fenceList(b)
	m.mu.Unlock()
	stat := &m.st.DeviceToHost
	if to == TierDisk {
		stat = &m.st.DeviceToDisk
	}
	fail := func(err error) (func(), error) {
		m.mu.Lock()
		if to == TierHost {
			m.hostRsv -= size
		}
		switch {
		case fallback && errors.Is(err, gpumem.ErrOutOfMemory):
			stat.Fallbacks++
		case !stopped(err):
			stat.Failures++
		}
		m.mu.Unlock()
		return nop, fmt.Errorf("deferrable: spill buffer %d (%s) to %v: %w", b.id, gpumem.FormatBytes(size), to, err)
	}
	cs, err := m.mv.copyStream()
	if err != nil {
		return fail(err)
	}
	var blk hostBlock
	var ext extent.Extent
	var start time.Time
	if to == TierHost {
		if blk, err = m.arena.alloc(size); err != nil {
			return fail(err)
		}
		if err = ctx.Err(); err != nil {
			m.arena.release(blk)
			return fail(err)
		}
		start = time.Now()
		err = m.mv.copyDirect(blk.ptr(), src, size, waits)
	} else {
		if ext, err = m.disk.alloc(size); err != nil {
			return fail(err)
		}
		start = time.Now()
		err = m.mv.toHost(src, size, waits, func(off uint64, p []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			return m.disk.writeAt(p, ext.Off+off)
		})
	}
	dur := time.Since(start)
	if err != nil {
		if to == TierDisk {
			m.disk.release(ext)
		} else {
			m.arena.release(blk)
		}
		return fail(err)
	}
	// The copy stream waited for every fence and the copy has completed: all
	// use of the device memory is over.
	derr := m.res.Deallocate(src, cs)
	m.mu.Lock()
	if to == TierHost {
		m.hostRsv -= size
		b.hblk = blk
	} else {
		b.ext = ext
	}
	m.subTierLocked(TierDevice, size, 1)
	m.addTierLocked(to, size, 1)
	b.tier, b.dptr = to, 0
	m.dropFencesLocked(b)
	stat.done(size, dur)
	m.historyLocked(gpumem.ActionSpill, cs, src, size)
	info := b.infoLocked()
	m.mu.Unlock()
	if derr != nil {
		derr = fmt.Errorf("deferrable: spill buffer %d: give device memory back: %w", b.id, derr)
	}
	return m.notifySpill(info, TierDevice), derr
}

func (m *Manager) notifySpill(info Info, from Tier) func() {
	if f := m.cb.Spill; f != nil {
		return func() { f(info, from) }
	}
	return nop
}

// hostToDisk writes host-resident b (marked moving) to the disk tier, from
// its pinned block, and gives the block back to the arena. It stops when ctx
// is done, between chunks.
func (m *Manager) hostToDisk(ctx context.Context, b *Buffer) (func(), error) {
	m.mu.Lock()
	blk, size := b.hblk, b.size
	m.mu.Unlock()
	ext, err := m.disk.alloc(size)
	if err != nil {
		m.mu.Lock()
		m.st.HostToDisk.Failures++
		m.mu.Unlock()
		return nop, fmt.Errorf("deferrable: spill buffer %d to disk: %w", b.id, err)
	}
	start := time.Now()
	if mem := blk.bytes(); mem != nil {
		err = m.pieces(ctx, size, func(off, n uint64) error {
			return m.disk.writeAt(mem[off:off+n], ext.Off+off)
		})
	} else {
		err = m.chunked(ctx, size, func(off uint64, p []byte) error {
			if err := m.arena.readBlock(blk, off, p); err != nil {
				return err
			}
			return m.disk.writeAt(p, ext.Off+off)
		})
	}
	dur := time.Since(start)
	if err != nil {
		m.disk.release(ext)
		m.mu.Lock()
		if !stopped(err) {
			m.st.HostToDisk.Failures++
		}
		m.mu.Unlock()
		return nop, fmt.Errorf("deferrable: spill buffer %d to disk: %w", b.id, err)
	}
	m.arena.release(blk)
	m.mu.Lock()
	defer m.mu.Unlock()
	b.hblk, b.ext, b.tier = hostBlock{}, ext, TierDisk
	m.subTierLocked(TierHost, size, 1)
	m.addTierLocked(TierDisk, size, 1)
	m.st.HostToDisk.done(size, dur)
	m.historyLocked(gpumem.ActionSpill, gpumem.Stream{Device: m.dev}, 0, size)
	return m.notifySpill(b.infoLocked(), TierHost), nil
}

// pieces calls f on consecutive pieces [off, off+n) of size bytes, of at most
// the staging size each, checking ctx before each.
func (m *Manager) pieces(ctx context.Context, size uint64, f func(off, n uint64) error) error {
	for off := uint64(0); off < size; off += m.mv.chunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := f(off, min(m.mv.chunk, size-off)); err != nil {
			return err
		}
	}
	return nil
}

// chunked calls f on consecutive pieces of size bytes, each given a scratch
// slice of at most the staging size (for backends whose pinned memory the
// process cannot address), checking ctx before each.
func (m *Manager) chunked(ctx context.Context, size uint64, f func(off uint64, p []byte) error) error {
	buf := make([]byte, min(size, m.mv.chunk))
	return m.pieces(ctx, size, func(off, n uint64) error { return f(off, buf[:n]) })
}

// diskToHost reads disk-resident b (marked moving; host room reserved) back
// into a block of the pinned arena. It stops when ctx is done, between chunks.
func (m *Manager) diskToHost(ctx context.Context, b *Buffer) (func(), error) {
	size, ext := b.size, b.ext
	fail := func(err error) (func(), error) {
		m.mu.Lock()
		m.hostRsv -= size
		if !stopped(err) {
			m.st.DiskToHost.Failures++
		}
		m.mu.Unlock()
		return nop, fmt.Errorf("deferrable: read buffer %d back from disk: %w", b.id, err)
	}
	blk, err := m.arena.alloc(size)
	if err != nil {
		return fail(err)
	}
	start := time.Now()
	if mem := blk.bytes(); mem != nil {
		err = m.pieces(ctx, size, func(off, n uint64) error {
			return m.disk.readAt(mem[off:off+n], ext.Off+off)
		})
	} else {
		err = m.chunked(ctx, size, func(off uint64, p []byte) error {
			if err := m.disk.readAt(p, ext.Off+off); err != nil {
				return err
			}
			return m.arena.writeBlock(blk, off, p)
		})
	}
	dur := time.Since(start)
	if err != nil {
		m.arena.release(blk)
		return fail(err)
	}
	m.disk.release(ext)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hostRsv -= size
	b.hblk, b.tier = blk, TierHost
	m.subTierLocked(TierDisk, size, 1)
	m.addTierLocked(TierHost, size, 1)
	m.st.DiskToHost.done(size, dur)
	m.historyLocked(gpumem.ActionUnspill, gpumem.Stream{Device: m.dev}, 0, size)
	info := b.infoLocked()
	if f := m.cb.Unspill; f != nil {
		return func() { f(info, TierDisk) }, nil
	}
	return nop, nil
}

// unspill brings b (marked moving, on the host or disk) back to the device:
// new device memory (which may spill others), then the copy on the copy
// stream (one DMA from the pinned arena, or the staging ring from disk),
// waited for until it has completed. It stops when ctx is done, before the
// copy or between chunks from disk.
func (m *Manager) unspill(ctx context.Context, b *Buffer) (func(), error) {
	m.mu.Lock()
	from, size, blk, ext := b.tier, b.size, b.hblk, b.ext
	m.mu.Unlock()
	stat := &m.st.HostToDevice
	if from == TierDisk {
		stat = &m.st.DiskToDevice
	}
	fail := func(err error) (func(), error) {
		m.mu.Lock()
		if !stopped(err) {
			stat.Failures++
		}
		m.mu.Unlock()
		return nop, fmt.Errorf("deferrable: unspill buffer %d (%s) from %v: %w", b.id, gpumem.FormatBytes(size), from, err)
	}
	cs, err := m.mv.copyStream()
	if err != nil {
		return fail(err)
	}
	m.mu.Lock()
	ev, err := m.eventLocked()
	m.mu.Unlock()
	if err != nil {
		return fail(err)
	}
	putEvent := func() {
		m.mu.Lock()
		m.events = append(m.events, ev)
		m.mu.Unlock()
	}
	p, err := m.allocDevice(size, cs)
	if err != nil {
		putEvent()
		return fail(err)
	}
	start := time.Now()
	switch {
	case ctx.Err() != nil:
		err = ctx.Err() // nothing queued on the copy stream yet
	case from == TierHost:
		err = m.mv.copyDirect(p, blk.ptr(), size, nil)
	default:
		err = m.mv.toDevice(p, size, func(off uint64, dst []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			return m.disk.readAt(dst, ext.Off+off)
		}, ev)
		if err == nil {
			// Time the copy through its completion.
			if err = m.b.EventSynchronize(ev); err != nil {
				err = fmt.Errorf("deferrable: wait for copy: %w", err)
				m.b.StreamSynchronize(cs)
			}
		}
	}
	dur := time.Since(start)
	if err != nil {
		putEvent()
		m.res.Deallocate(p, cs) // the mover drained the copy stream
		return fail(err)
	}
	if from == TierDisk {
		m.disk.release(ext)
	} else {
		m.arena.release(blk)
	}
	m.mu.Lock()
	b.hblk = hostBlock{}
	b.tier, b.dptr = TierDevice, p
	// The copy has completed; nothing needs to wait for it.
	m.events = append(m.events, ev)
	m.subTierLocked(from, size, 1)
	m.addTierLocked(TierDevice, size, 1)
	stat.done(size, dur)
	m.historyLocked(gpumem.ActionUnspill, cs, p, size)
	info := b.infoLocked()
	m.mu.Unlock()
	if f := m.cb.Unspill; f != nil {
		return func() { f(info, from) }, nil
	}
	return nop, nil
}
