package deferrable

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/clock"
)

// ErrLocked is returned when an operation needs a buffer that nobody holds
// (Free, an explicit move down) and the buffer is held. It matches
// gpumem.ErrInvalidValue.
var ErrLocked = fmt.Errorf("deferrable: buffer is locked: %w", gpumem.ErrInvalidValue)

// Defaults for Options.
const (
	DefaultStagingBytes   = 8 << 20
	DefaultStagingBuffers = 2
	DefaultHistorySize    = 4096
	DefaultHostSlabBytes  = 256 << 20
)

// Options configure a Manager. The zero value is a manager with no limits, no
// disk tier and a DeviceResource as its upstream.
type Options struct {
	// Resource provides the device memory of the buffers (any allocator). Nil:
	// a DeviceResource over the backend. The manager allocates and frees on its
	// own copy stream; it does not close the resource.
	Resource gpumem.Resource
	// DeviceLimit is a soft cap on the device bytes of the managed buffers:
	// before an allocation or an unspill would pass it, buffers are spilled
	// until it holds (as far as unlocked buffers allow). 0: no cap.
	DeviceLimit uint64
	// HostLimit caps the host tier: both the bytes of the buffers in it and the
	// pinned memory of its arena. Beyond it buffers go to disk (or, without a
	// disk tier, spilling fails). 0: no cap.
	HostLimit uint64
	// DiskDir enables the disk tier: a private directory is made in it for a
	// file that is unlinked at once where the OS allows. "": no disk tier.
	DiskDir string
	// Policy chooses victims. Nil: LRU.
	Policy Policy
	// Callbacks are told of registrations, frees, spills and unspills.
	Callbacks Callbacks
	// StagingBytes is the size of each pinned staging buffer of the disk tier,
	// the chunk of a transfer between the device and disk. 0:
	// DefaultStagingBytes.
	StagingBytes uint64
	// StagingBuffers is the number of staging buffers (2 or more overlap DMA
	// with file I/O). 0: DefaultStagingBuffers.
	StagingBuffers int
	// HostSlabBytes is the size of each pinned slab the host tier's arena
	// takes from MallocHost when it grows (a buffer larger than that gets a
	// slab of its own size). Slabs are kept for later spills until TrimHost or
	// Close. 0: DefaultHostSlabBytes (or HostLimit, if smaller).
	HostSlabBytes uint64
	// HistorySize is the number of history entries kept. 0: DefaultHistorySize;
	// negative: none.
	HistorySize int
}

// Manager owns the deferrable buffers of one device. See the package
// documentation for the design. All methods are safe for concurrent use.
type Manager struct {
	b      gpumem.Backend
	dev    int
	res    gpumem.Resource
	ownRes *DeviceResource
	policy Policy
	cb     Callbacks
	devLim uint64
	hostLm uint64
	mv     *mover
	arena  *hostArena
	disk   *diskStore

	mu        sync.Mutex
	cond      sync.Cond
	closed    bool
	live      map[*Buffer]struct{}
	holds     map[gpumem.Stream]map[*Buffer]struct{} // buffers held or pending on a stream
	nMoving   int                                    // buffers moving plus allocations in flight; Close waits for 0
	nSpilling int                                    // buffers being spilled off the device
	nextID    uint64
	clock     uint64
	tiers     [numTiers]TierStats
	hostRsv   uint64 // host bytes reserved by spills in flight
	st        Stats  // counters (tier and lock figures are computed)
	events    []gpumem.Event
	hist      []gpumem.HistoryEntry
	histNext  int
	histCap   int
}

// New returns a manager of device dev's deferrable buffers on backend b.
func New(b gpumem.Backend, dev int, opts Options) (*Manager, error) {
	if b == nil {
		return nil, fmt.Errorf("deferrable: new: nil backend: %w", gpumem.ErrInvalidValue)
	}
	n, err := b.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("deferrable: new: %w", err)
	}
	if dev < 0 || dev >= n {
		return nil, fmt.Errorf("deferrable: new: device %d of %d: %w", dev, n, gpumem.ErrInvalidValue)
	}
	if opts.StagingBytes == 0 {
		opts.StagingBytes = DefaultStagingBytes
	}
	if opts.StagingBuffers <= 0 {
		opts.StagingBuffers = DefaultStagingBuffers
	}
	switch {
	case opts.HistorySize == 0:
		opts.HistorySize = DefaultHistorySize
	case opts.HistorySize < 0:
		opts.HistorySize = 0
	}
	m := &Manager{
		b: b, dev: dev, res: opts.Resource, policy: opts.Policy, cb: opts.Callbacks,
		devLim: opts.DeviceLimit, hostLm: opts.HostLimit,
		mv:      newMover(b, dev, opts.StagingBytes, opts.StagingBuffers),
		live:    make(map[*Buffer]struct{}),
		holds:   make(map[gpumem.Stream]map[*Buffer]struct{}),
		histCap: opts.HistorySize,
	}
	if opts.HostSlabBytes == 0 {
		opts.HostSlabBytes = DefaultHostSlabBytes
		if opts.HostLimit > 0 {
			opts.HostSlabBytes = min(opts.HostSlabBytes, roundUp(opts.HostLimit, hostAlign))
		}
	}
	m.arena = newHostArena(b, roundUp(opts.HostSlabBytes, hostAlign), opts.HostLimit)
	m.cond.L = &m.mu
	if m.res == nil {
		m.ownRes = NewDeviceResource(b)
		m.res = m.ownRes
	}
	if m.policy == nil {
		m.policy = LRU{}
	}
	if opts.DiskDir != "" {
		if m.disk, err = newDiskStore(opts.DiskDir); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Device is the ordinal of the manager's device.
func (m *Manager) Device() int { return m.dev }

func (m *Manager) checkStream(op string, s gpumem.Stream) error {
	if s.Device != m.dev {
		return fmt.Errorf("deferrable: %s: %v is not on device %d: %w", op, s, m.dev, gpumem.ErrInvalidValue)
	}
	return nil
}

// Alloc allocates a deferrable buffer of size bytes on the manager's device,
// spilling other buffers if the device is full or the soft limit would be
// passed. Its content is undefined until written. s is the stream of its
// first use; the buffer may be used on any stream of the device through
// Acquire.
func (m *Manager) Alloc(size uint64, s gpumem.Stream) (*Buffer, error) {
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

func (m *Manager) usable(op string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("deferrable: %s: %w", op, gpumem.ErrClosed)
	}
	return nil
}

// allocDevice takes size bytes from the upstream resource on the copy stream
// cs, spilling first to honour the soft limit and again after each
// out-of-memory failure. Called with no lock held.
func (m *Manager) allocDevice(size uint64, cs gpumem.Stream) (gpumem.Ptr, error) {
	if m.devLim > 0 {
		m.mu.Lock()
		cur := m.tiers[TierDevice].Bytes
		m.mu.Unlock()
		if cur+size > m.devLim {
			m.spillDevice(cur+size-m.devLim, false) // soft: go on whatever it freed
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
		if attempt >= maxOOMRetries {
			return 0, fmt.Errorf("deferrable: allocate %s: still out of memory after %d spills: %w", gpumem.FormatBytes(size), attempt, err)
		}
		freed, waited, serr := m.spillDevice(m.shortfall(size, attempt), true)
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

// OOMHandler returns a handler to give other allocators (SetOOMHandler): on
// out-of-memory on the manager's device it spills at least the requested
// bytes of unlocked buffers (on the first attempt, only what the device
// lacks), as far as there are any, and asks for a retry when it spilled
// something.
func (m *Manager) OOMHandler() gpumem.OOMHandler {
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
		freed, waited, _ := m.spillDevice(m.shortfall(requested, attempt), true)
		m.mu.Lock()
		m.st.OOMHandlerCalls++
		m.st.OOMSpilledBytes += freed
		m.nMoving--
		m.cond.Broadcast()
		m.mu.Unlock()
		return freed > 0 || waited
	}
}

// Spill moves unlocked buffers off the device, chosen by the policy, until at
// least bytes have been freed or nothing unlocked is left. It returns the bytes
// freed; an error says why some buffer could not be moved (it stays where it
// was, whole).
func (m *Manager) Spill(bytes uint64) (uint64, error) {
	if err := m.usable("spill"); err != nil {
		return 0, err
	}
	freed, _, err := m.spillDevice(bytes, false)
	return freed, err
}

// spillDevice frees at least need device bytes if it can. With wait, when
// nothing can be spilled now it waits instead for what will free device
// memory soon: spills in flight on other goroutines, or an asynchronous
// release (EventSynchronize on its fence), and reports that it waited, so
// that the caller retries. Called with no lock held.
func (m *Manager) spillDevice(need uint64, wait bool) (freed uint64, waited bool, err error) {
	var errs []error
	for round := 0; freed < need && round < 8; round++ {
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
		for _, v := range victims {
			notify, err := m.spillOne(v)
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

func (m *Manager) addTierLocked(t Tier, bytes uint64, n int) {
	ts := &m.tiers[t]
	ts.Buffers += n
	ts.Bytes += bytes
	if ts.Bytes > ts.PeakBytes {
		ts.PeakBytes = ts.Bytes
	}
}

func (m *Manager) subTierLocked(t Tier, bytes uint64, n int) {
	ts := &m.tiers[t]
	ts.Buffers -= n
	ts.Bytes -= bytes
}

func (m *Manager) historyLocked(a gpumem.HistoryAction, s gpumem.Stream, p gpumem.Ptr, size uint64) {
	if m.histCap == 0 {
		return
	}
	e := gpumem.HistoryEntry{Time: clock.Now(), Action: a, Device: m.dev, Stream: s.Handle, Addr: p, Size: size}
	if len(m.hist) < m.histCap {
		m.hist = append(m.hist, e)
		return
	}
	m.hist[m.histNext] = e
	m.histNext = (m.histNext + 1) % m.histCap
}

// History returns the kept history, oldest first: allocations (alloc), frees
// (free_completed), spills and unspills, each with the device address that
// was given up or taken.
func (m *Manager) History() []gpumem.HistoryEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]gpumem.HistoryEntry, 0, len(m.hist))
	out = append(out, m.hist[m.histNext:]...)
	return append(out, m.hist[:m.histNext]...)
}

// Stats returns the manager's figures. Async releases are checked for
// completion (EventQuery) before they are counted as pending.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.st
	st.Device, st.Host, st.Disk = m.tiers[TierDevice], m.tiers[TierHost], m.tiers[TierDisk]
	st.PinnedBytes, st.PinnedSlabs, st.PinnedPeakBytes = m.arena.stats()
	for b := range m.live {
		m.lockedLocked(b)
		st.SyncLocks += b.syncLocks
		for _, n := range b.held {
			st.AsyncLocks += n
		}
		for _, n := range b.pending {
			st.PendingReleases += n
		}
	}
	return st
}

// ResetTransferStats zeroes the transfer counters (for measuring one phase).
func (m *Manager) ResetTransferStats() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range []*Transfer{&m.st.DeviceToHost, &m.st.DeviceToDisk, &m.st.HostToDisk,
		&m.st.HostToDevice, &m.st.DiskToDevice, &m.st.DiskToHost} {
		*t = Transfer{}
	}
}

// ReleaseStream releases every asynchronous hold registered on s (by
// AcquireAsync or LockAndLaunchAsync), as one ReleaseAsync(s) on each: the
// locks drop when s reaches this point, without blocking the host.
func (m *Manager) ReleaseStream(s gpumem.Stream) error {
	if err := m.checkStream("release stream", s); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("deferrable: release stream: %w", gpumem.ErrClosed)
	}
	var errs []error
	for b := range m.holds[s] {
		n := b.held[s]
		if n == 0 {
			continue
		}
		if err := m.recordFenceLocked(b, s); err != nil {
			errs = append(errs, err)
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
	return errors.Join(errs...)
}

// SyncAndUnlock is the seed's synchronous unlock: it releases every hold
// registered on s, waits for s to finish its work, and drops the locks at once.
func (m *Manager) SyncAndUnlock(s gpumem.Stream) error {
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

// LockAndLaunch is the seed's synchronous form: it retrieves every buffer to
// the device and locks it, calls fn with their device addresses (in the order
// given), and unlocks them. fn's work must be ordered on the device's default
// stream or complete when fn returns.
func (m *Manager) LockAndLaunch(fn func(ptrs []gpumem.Ptr) error, bufs ...*Buffer) error {
	if fn == nil {
		return fmt.Errorf("deferrable: lock and launch: nil function: %w", gpumem.ErrInvalidValue)
	}
	s := gpumem.Stream{Device: m.dev}
	ptrs, err := m.acquireAll(s, false, bufs)
	if err != nil {
		return err
	}
	ferr := fn(ptrs)
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
	if fn == nil {
		return fmt.Errorf("deferrable: lock and launch: nil function: %w", gpumem.ErrInvalidValue)
	}
	ptrs, err := m.acquireAll(s, true, bufs)
	if err != nil {
		return err
	}
	return fn(s, ptrs)
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

// Close frees every buffer (after the work recorded against it), the pinned
// host arena, the staging buffers, the copy stream, the events and the disk
// tier. Holds not yet
// released are dropped; their streams should be idle. Later calls fail with
// ErrClosed.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return fmt.Errorf("deferrable: close: %w", gpumem.ErrClosed)
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
			if err := m.recordFenceLocked(b, s); err != nil {
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

func fenceList(b *Buffer) []gpumem.Event {
	out := make([]gpumem.Event, 0, len(b.fences))
	for _, ev := range b.fences {
		out = append(out, ev)
	}
	return out
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
