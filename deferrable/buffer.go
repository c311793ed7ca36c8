package deferrable

import (
	"errors"
	"fmt"
	"time"

	"github.com/gpumem/gpumem"
)

// Buffer is a deferrable buffer: device memory that the manager may move to
// the host or to disk while nobody holds it. Its device address is reachable
// only while it is held (Acquire, AcquireAsync, LockAndLaunch); an address
// must not be used after the hold is released, because the next Acquire may
// return another one.
type Buffer struct {
	m    *Manager
	id   uint64
	size uint64

	// Guarded by m.mu. While moving is set, the fields describing where the
	// bytes are (tier, dptr, host, ext) belong to the goroutine moving it.
	tier     Tier
	moving   bool
	freed    bool
	priority int
	lastUsed uint64
	dptr     gpumem.Ptr // TierDevice
	hblk     hostBlock  // TierHost
	ext      extent     // TierDisk

	syncLocks   int                            // Acquire holds
	syncStreams []gpumem.Stream                // streams of the current Acquire holds
	held        map[gpumem.Stream]int          // AcquireAsync holds not yet released, per stream
	pending     map[gpumem.Stream]int          // async releases waiting for fences[s]
	fences      map[gpumem.Stream]gpumem.Event // last recorded use on each stream
	ready       bool                           // readyEv marks an allocation or unspill that Acquire must order after
	readyEv     gpumem.Event                   // recorded on the copy stream
}

// ID is the buffer's number, unique within its manager.
func (b *Buffer) ID() uint64 {
	if b == nil {
		return 0
	}
	return b.id
}

// Size is the buffer's size in bytes.
func (b *Buffer) Size() uint64 {
	if b == nil {
		return 0
	}
	return b.size
}

func (b *Buffer) infoLocked() Info {
	return Info{ID: b.id, Size: b.size, Priority: b.priority, Tier: b.tier}
}

func (b *Buffer) valid(op string) error {
	if b == nil || b.m == nil {
		return fmt.Errorf("deferrable: %s: nil buffer: %w", op, gpumem.ErrInvalidValue)
	}
	return nil
}

// usableLocked says why the buffer cannot be used, if it cannot.
func (b *Buffer) usableLocked(op string) error {
	if b.m.closed {
		return fmt.Errorf("deferrable: %s: %w", op, gpumem.ErrClosed)
	}
	if b.freed {
		return fmt.Errorf("deferrable: %s: buffer %d was freed: %w", op, b.id, gpumem.ErrInvalidValue)
	}
	return nil
}

// waitLocked waits until no goroutine is moving b, then checks it is usable.
func (b *Buffer) waitLocked(op string) error {
	for {
		if err := b.usableLocked(op); err != nil {
			return err
		}
		if !b.moving {
			return nil
		}
		b.m.cond.Wait()
	}
}

// Where reports the buffer's tier; for a freed buffer, the tier it was freed
// from. A buffer being moved reports where it was until the move completes.
func (b *Buffer) Where() Tier {
	if b == nil || b.m == nil {
		return TierDevice
	}
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	return b.tier
}

// Priority returns the buffer's spill priority.
func (b *Buffer) Priority() int {
	if b == nil || b.m == nil {
		return 0
	}
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	return b.priority
}

// SetPriority sets the buffer's spill priority: buffers of lower priority are
// spilled first (with the default policy). The default is 0.
func (b *Buffer) SetPriority(p int) error {
	if err := b.valid("set priority"); err != nil {
		return err
	}
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	if err := b.usableLocked("set priority"); err != nil {
		return err
	}
	b.priority = p
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
		notify, err := m.unspill(b)
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
// work they queued there; the host does not wait.
func (b *Buffer) Release() error {
	const op = "release"
	if err := b.valid(op); err != nil {
		return err
	}
	m := b.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := b.usableLocked(op); err != nil {
		return err
	}
	if b.syncLocks == 0 {
		return fmt.Errorf("deferrable: release: buffer %d is not acquired: %w", b.id, gpumem.ErrInvalidValue)
	}
	if b.syncLocks == 1 {
		for _, s := range b.syncStreams {
			if err := m.recordFenceLocked(b, s); err != nil {
				return fmt.Errorf("deferrable: release: %w", err)
			}
		}
		b.syncStreams = b.syncStreams[:0]
	}
	b.syncLocks--
	m.clock++
	b.lastUsed = m.clock
	return nil
}

// ReleaseAsync ends one AcquireAsync hold on s: it records an event on s and
// the lock drops when s reaches it (checked lazily, when the manager looks for
// buffers to spill). The host does not wait.
func (b *Buffer) ReleaseAsync(s gpumem.Stream) error {
	const op = "release async"
	if err := b.valid(op); err != nil {
		return err
	}
	m := b.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := b.usableLocked(op); err != nil {
		return err
	}
	if b.held[s] == 0 {
		return fmt.Errorf("deferrable: release async: buffer %d is not held on %v: %w", b.id, s, gpumem.ErrInvalidValue)
	}
	if err := m.recordFenceLocked(b, s); err != nil {
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
func (m *Manager) freeDevice(p gpumem.Ptr, waits []gpumem.Event) error {
	cs, err := m.mv.copyStream()
	if err != nil {
		return err
	}
	for _, ev := range waits {
		if err := m.b.StreamWaitEvent(cs, ev); err != nil {
			return fmt.Errorf("order free after last use: %w", err)
		}
	}
	return m.res.Deallocate(p, cs)
}

// MoveTo moves the buffer to tier t now: down (it must not be locked) or up
// (TierDevice retrieves it without holding it). Limits apply: a move to the
// host fails with ErrOutOfMemory when the host tier is full, and a move to
// disk needs Options.DiskDir.
func (b *Buffer) MoveTo(t Tier) error {
	const op = "move"
	if err := b.valid(op); err != nil {
		return err
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
	m.markMovingLocked(b)
	m.mu.Unlock()
	var notify func()
	var err error
	switch {
	case t == TierDevice:
		notify, err = m.unspill(b)
	case from == TierDevice:
		if t == TierHost {
			if err = m.reserveHost(b.size); err == nil {
				notify, err = m.fromDevice(b, TierHost)
			}
		} else {
			notify, err = m.fromDevice(b, TierDisk)
		}
	case t == TierDisk:
		notify, err = m.hostToDisk(b)
	default:
		if err = m.reserveHost(b.size); err == nil {
			notify, err = m.diskToHost(b)
		}
	}
	m.doneMoving(b)
	if notify != nil {
		notify()
	}
	return err
}

func nop() {}

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

// spillOne moves device-resident b (marked moving) to the host tier, making
// room there by demoting older host buffers to disk, or to disk directly.
func (m *Manager) spillOne(b *Buffer) (func(), error) {
	err := m.reserveHost(b.size)
	if err == nil {
		notify, err := m.fromDevice(b, TierHost)
		if err != nil && m.disk != nil && errors.Is(err, gpumem.ErrOutOfMemory) {
			// The arena could not place it (its limit, fragmentation).
			return m.fromDevice(b, TierDisk)
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
		m.demoteHost(b.size)
		if m.reserveHost(b.size) == nil {
			return m.fromDevice(b, TierHost)
		}
	}
	return m.fromDevice(b, TierDisk)
}

// demoteHost moves host buffers to disk until size more bytes fit under the
// host limit (as far as it can).
func (m *Manager) demoteHost(size uint64) {
	m.mu.Lock()
	var victims []*Buffer
	if used := m.tiers[TierHost].Bytes + m.hostRsv + size; used > m.hostLm {
		victims = m.chooseLocked(TierHost, used-m.hostLm)
	}
	m.mu.Unlock()
	for _, v := range victims {
		notify, _ := m.hostToDisk(v) // failure: v stays on the host
		m.doneMoving(v)
		notify()
	}
}

// fromDevice copies device-resident b (marked moving) to tier to (host room
// already reserved): to the host, one DMA into a block of the pinned arena; to
// disk, through the staging ring. Then it gives the device memory back.
func (m *Manager) fromDevice(b *Buffer, to Tier) (func(), error) {
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
		stat.Failures++
		m.mu.Unlock()
		return nop, fmt.Errorf("deferrable: spill buffer %d (%s) to %v: %w", b.id, gpumem.FormatBytes(size), to, err)
	}
	cs, err := m.mv.copyStream()
	if err != nil {
		return fail(err)
	}
	var blk hostBlock
	var ext extent
	var start time.Time
	if to == TierHost {
		if blk, err = m.arena.alloc(size); err != nil {
			return fail(err)
		}
		start = time.Now()
		err = m.mv.copyDirect(blk.ptr(), src, size, waits)
	} else {
		ext = m.disk.alloc(size)
		start = time.Now()
		err = m.mv.toHost(src, size, waits, func(off uint64, p []byte) error {
			return m.disk.writeAt(p, ext.off+off)
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
	stat.Count++
	stat.Bytes += size
	stat.Duration += dur
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
// its pinned block, and gives the block back to the arena.
func (m *Manager) hostToDisk(b *Buffer) (func(), error) {
	m.mu.Lock()
	blk, size := b.hblk, b.size
	m.mu.Unlock()
	ext := m.disk.alloc(size)
	start := time.Now()
	var err error
	if mem := blk.bytes(); mem != nil {
		err = m.disk.writeAt(mem, ext.off)
	} else {
		err = m.chunked(size, func(off uint64, p []byte) error {
			if err := m.arena.readBlock(blk, off, p); err != nil {
				return err
			}
			return m.disk.writeAt(p, ext.off+off)
		})
	}
	dur := time.Since(start)
	if err != nil {
		m.disk.release(ext)
		m.mu.Lock()
		m.st.HostToDisk.Failures++
		m.mu.Unlock()
		return nop, fmt.Errorf("deferrable: spill buffer %d to disk: %w", b.id, err)
	}
	m.arena.release(blk)
	m.mu.Lock()
	defer m.mu.Unlock()
	b.hblk, b.ext, b.tier = hostBlock{}, ext, TierDisk
	m.subTierLocked(TierHost, size, 1)
	m.addTierLocked(TierDisk, size, 1)
	m.st.HostToDisk.Count++
	m.st.HostToDisk.Bytes += size
	m.st.HostToDisk.Duration += dur
	m.historyLocked(gpumem.ActionSpill, gpumem.Stream{Device: m.dev}, 0, size)
	return m.notifySpill(b.infoLocked(), TierHost), nil
}

// chunked calls f on consecutive pieces of size bytes, each given a scratch
// slice of at most the staging size (for backends whose pinned memory the
// process cannot address).
func (m *Manager) chunked(size uint64, f func(off uint64, p []byte) error) error {
	buf := make([]byte, min(size, m.mv.chunk))
	for off := uint64(0); off < size; off += uint64(len(buf)) {
		if err := f(off, buf[:min(uint64(len(buf)), size-off)]); err != nil {
			return err
		}
	}
	return nil
}

// diskToHost reads disk-resident b (marked moving; host room reserved) back
// into a block of the pinned arena.
func (m *Manager) diskToHost(b *Buffer) (func(), error) {
	size, ext := b.size, b.ext
	fail := func(err error) (func(), error) {
		m.mu.Lock()
		m.hostRsv -= size
		m.st.DiskToHost.Failures++
		m.mu.Unlock()
		return nop, fmt.Errorf("deferrable: read buffer %d back from disk: %w", b.id, err)
	}
	blk, err := m.arena.alloc(size)
	if err != nil {
		return fail(err)
	}
	start := time.Now()
	if mem := blk.bytes(); mem != nil {
		err = m.disk.readAt(mem, ext.off)
	} else {
		err = m.chunked(size, func(off uint64, p []byte) error {
			if err := m.disk.readAt(p, ext.off+off); err != nil {
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
	m.st.DiskToHost.Count++
	m.st.DiskToHost.Bytes += size
	m.st.DiskToHost.Duration += dur
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
// waited for until it has completed.
func (m *Manager) unspill(b *Buffer) (func(), error) {
	m.mu.Lock()
	from, size, blk, ext := b.tier, b.size, b.hblk, b.ext
	m.mu.Unlock()
	stat := &m.st.HostToDevice
	if from == TierDisk {
		stat = &m.st.DiskToDevice
	}
	fail := func(err error) (func(), error) {
		m.mu.Lock()
		stat.Failures++
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
	if from == TierHost {
		err = m.mv.copyDirect(p, blk.ptr(), size, nil)
	} else {
		err = m.mv.toDevice(p, size, func(off uint64, dst []byte) error {
			return m.disk.readAt(dst, ext.off+off)
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
	stat.Count++
	stat.Bytes += size
	stat.Duration += dur
	m.historyLocked(gpumem.ActionUnspill, cs, p, size)
	info := b.infoLocked()
	m.mu.Unlock()
	if f := m.cb.Unspill; f != nil {
		return func() { f(info, from) }, nil
	}
	return nop, nil
}
