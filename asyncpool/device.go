package asyncpool

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/clock"
	"github.com/gpumem/gpumem/internal/guard"
	"github.com/gpumem/gpumem/internal/history"
)

// Record states.
const (
	stateLive         uint8 = iota // held by the user
	stateGraphOwned                // freed by the user outside the capture that allocated it: the graph owns it
	stateDeferred                  // freed by the user inside a capture: held until that graph is destroyed
	stateGraphFreeing              // the graph is gone: queued for a free on the free stream
)

// record is what the allocator knows of one live allocation. Records are
// stored by value in the device's table so that the hot path allocates
// nothing and copies little: a record is 24 bytes (a table slot, with its
// key, 32: two to a cache line). What only some records need (a capture,
// recorded streams, a state other than live) is behind x, so that the fast
// paths need one test, x == nil, to know a plain allocation.
type record struct {
	size   uint64
	stream uintptr   // the allocation stream's handle (a stream of the record's device)
	x      *recExtra // nil for a live allocation of no capture with no recorded streams
}

// recExtra is the part of a record that most allocations never need. It is
// never changed in place: records are values, and an earlier copy of a
// record must not see a change (record.edit copies it).
type recExtra struct {
	graph   *graphState     // the capture that allocated it, or nil
	streams []gpumem.Stream // streams recorded with RecordStream
	// For stateDeferred, stateGraphOwned and stateGraphFreeing: the stream
	// the user freed on.
	freeOn gpumem.Stream
	state  uint8
}

// state is the record's state (stateLive unless x says otherwise).
func (r *record) state() uint8 {
	if r.x == nil {
		return stateLive
	}
	return r.x.state
}

// graph is the capture that allocated the record, or nil.
func (r *record) graph() *graphState {
	if r.x == nil {
		return nil
	}
	return r.x.graph
}

// recorded lists the streams recorded with RecordStream.
func (r *record) recorded() []gpumem.Stream {
	if r.x == nil {
		return nil
	}
	return r.x.streams
}

// freeOn is the stream the user freed on (stateDeferred, stateGraphOwned,
// stateGraphFreeing).
func (r *record) freeOn() gpumem.Stream {
	if r.x == nil {
		return gpumem.Stream{}
	}
	return r.x.freeOn
}

// allocStream is the allocation stream, of device dev (the record's).
func (r *record) allocStream(dev int) gpumem.Stream {
	return gpumem.Stream{Handle: r.stream, Device: dev}
}

// edit gives r an extra part of its own, a copy of the one it had, and
// returns it for a change.
func (r *record) edit() *recExtra {
	x := &recExtra{}
	if r.x != nil {
		*x = *r.x
		x.streams = append([]gpumem.Stream(nil), r.x.streams...)
	}
	r.x = x
	return x
}

// pendingFree is a free enqueued on the free stream whose completion is not
// yet known. ev is recorded on the free stream after the free (zero when no
// event could be recorded: complete once a later entry is).
type pendingFree struct {
	ev   gpumem.Event
	p    gpumem.Ptr
	size uint64
}

// device is the allocator's state for one device. Lock order: life, then
// freeMu, then mu; evMu and relMu are leaves. A function whose name ends in
// Locked needs a lock held, and its comment says which. The fast paths
// (allocUncaptured, freeUncaptured) take mu alone and hold it across their
// one backend call; nothing the backend calls takes an allocator lock.
type device struct {
	// The fields the fast paths read come first, together, so that a pair
	// touches as few cache lines as it can (the driver's own work between
	// two calls evicts much of what the allocator touched).
	a     *Allocator
	b     gpumem.Backend
	id    int
	pool  gpumem.MemPool
	total uint64

	// guarded is the backend's capture check and call in one step, used
	// unless captures are learnt from the hooks; nil if it has none.
	guarded guard.Backend
	tracked bool    // CaptureCheckTracked over guarded: ask only while guarded.CapturesOpen()
	ratio   float64 // Options.ThrottleRatio

	// inflight is the bytes of allocations under way on the full path,
	// charged ahead of the pool's call so that the throttle counts them,
	// until the record is made. The bytes handed out are the tally's live
	// bytes (under mu) plus these; the fast paths, which hold mu across the
	// call, charge nothing.
	inflight atomic.Int64
	pending  atomic.Int64 // bytes freed by users but not known released
	queued   atomic.Int32 // len(fifo), for a lock-free check
	unheld   atomic.Int32 // graph states whose user object the graph does not hold yet
	hasWork  atomic.Bool  // toFree is not empty
	relFlag  atomic.Bool  // released is not empty
	hookCaps atomic.Int32 // captures open through BeginCapture: len(hooked)

	mu     sync.Mutex // guards everything below up to life
	closed bool       // set under life's write lock and mu
	recs   recTable
	tally  tally // the statistics
	hist   history.Ring
	ctr    Counters
	// poolSeen is the pool's reserved, reserved-high and used bytes as
	// Stats last read them, reported while a capture is open.
	poolSeen [3]uint64
	graphs   map[uint64]*graphState // capture id -> state, until the graph is destroyed
	hooked   map[gpumem.Stream]bool // streams whose capture BeginCapture began and EndCapture has not ended
	toFree   []gpumem.Ptr           // records in stateGraphFreeing

	// life is read-locked by every operation and write-locked by Close.
	life sync.RWMutex

	freeMu     sync.Mutex // guards the free stream, fifo, freeSeq, joined
	freeStream gpumem.Stream
	hasStream  bool
	fifo       []pendingFree
	freeSeq    uint64             // frees enqueued on the free stream
	joined     map[uintptr]uint64 // alloc stream -> freeSeq at its last throttle join

	evMu   sync.Mutex
	events []gpumem.Event // idle events of this device

	relMu    sync.Mutex
	released []*graphState // graphs destroyed, not yet processed

	own  bool      // pool created by the allocator
	orig [4]uint64 // the default pool's attributes before New, restored by Close
}

func newDevice(a *Allocator, dev int) (*device, error) {
	b := a.b
	d := &device{a: a, b: b, id: dev, ratio: a.opts.ThrottleRatio, graphs: map[uint64]*graphState{}, hooked: map[gpumem.Stream]bool{}, joined: map[uintptr]uint64{}}
	d.hist = history.New(a.opts.HistorySize)
	if g, ok := b.(guard.Backend); ok && g.GuardedCalls() && a.opts.CaptureCheck != CaptureCheckHooks {
		d.guarded = g
		d.tracked = a.opts.CaptureCheck == CaptureCheckTracked
	}
	_, total, err := b.MemInfo(dev)
	if err != nil {
		return nil, fmt.Errorf("asyncpool: device %d memory info: %w", dev, err)
	}
	if total == 0 {
		return nil, fmt.Errorf("asyncpool: device %d reports no memory: %w", dev, gpumem.ErrNoDevice)
	}
	d.total = total
	if a.opts.OwnPool {
		d.pool, err = b.MemPoolCreate(gpumem.PoolProps{Device: dev})
		if err != nil {
			return nil, fmt.Errorf("asyncpool: creating a pool on device %d: %w", dev, err)
		}
		d.own = true
	} else {
		d.pool, err = b.DefaultMemPool(dev)
		if err != nil {
			return nil, fmt.Errorf("asyncpool: device %d's default pool: %w", dev, err)
		}
		for i, at := range settable {
			if d.orig[i], err = b.MemPoolGetAttribute(d.pool, at); err != nil {
				return nil, fmt.Errorf("asyncpool: reading %s of device %d's default pool: %w", at, dev, err)
			}
		}
	}
	fail := func(err error) (*device, error) {
		if d.own {
			err = errors.Join(err, b.MemPoolDestroy(d.pool))
		} else {
			err = errors.Join(err, d.restore())
		}
		return nil, err
	}
	o := a.opts
	vals := [4]uint64{o.ReleaseThreshold, flag(!o.DisableFollowEventDependencies), flag(!o.DisableOpportunisticReuse), flag(!o.DisableInternalDependencies)}
	for i, at := range settable {
		if err := b.MemPoolSetAttribute(d.pool, at, vals[i]); err != nil {
			return fail(fmt.Errorf("asyncpool: setting %s of device %d's pool: %w", at, dev, err))
		}
	}
	for _, p := range o.PeerAccess {
		if p == dev {
			continue
		}
		if err := b.MemPoolSetAccess(d.pool, p, gpumem.AccessReadWrite); err != nil {
			return fail(fmt.Errorf("asyncpool: granting device %d access to device %d's pool: %w", p, dev, err))
		}
	}
	return d, nil
}

var settable = [4]gpumem.PoolAttribute{
	gpumem.PoolReleaseThreshold,
	gpumem.PoolReuseFollowEventDependencies,
	gpumem.PoolReuseAllowOpportunistic,
	gpumem.PoolReuseAllowInternalDependencies,
}

func flag(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// restore puts the default pool's attributes back as they were.
func (d *device) restore() error {
	var errs []error
	for i, at := range settable {
		if err := d.b.MemPoolSetAttribute(d.pool, at, d.orig[i]); err != nil {
			errs = append(errs, fmt.Errorf("asyncpool: restoring %s of device %d's default pool: %w", at, d.id, err))
		}
	}
	return errors.Join(errs...)
}

// untracked reports whether, with CaptureCheckTracked, the backend knows of
// no open capture, so that no stream needs asking.
func (d *device) untracked() bool { return d.tracked && !d.guarded.CapturesOpen() }

// captureInfo reports whether s is being captured, as CaptureCheck says.
func (d *device) captureInfo(s gpumem.Stream) (gpumem.CaptureInfo, error) {
	if s.IsDefault() {
		return gpumem.CaptureInfo{}, nil
	}
	if d.a.opts.CaptureCheck == CaptureCheckHooks && d.hookCaps.Load() == 0 {
		return gpumem.CaptureInfo{}, nil
	}
	if d.untracked() {
		return gpumem.CaptureInfo{}, nil
	}
	ci, err := d.b.StreamCaptureInfo(s)
	if err != nil {
		return ci, fmt.Errorf("asyncpool: capture status of %v: %w", s, err)
	}
	return ci, nil
}

// housekeep does the cheap deferred work of an allocation outside capture:
// process destroyed graphs, free what they released, and learn which
// pending frees have completed. Failures are left for a later call.
func (d *device) housekeep() {
	if d.idle() {
		return
	}
	if d.unheld.Load() > 0 {
		d.retainLater()
	}
	if d.relFlag.Load() {
		d.processReleased()
	}
	if d.hasWork.Load() {
		_ = d.flushGraphFrees()
	}
	if d.queued.Load() > 0 && d.freeMu.TryLock() {
		d.pollLocked()
		d.freeMu.Unlock()
	}
}

// pollLocked retires the completed entries of the fifo, oldest first: an
// entry is complete when its event, or the event of a later entry, has
// completed (the fifo is in free-stream order). freeMu must be held.
func (d *device) pollLocked() {
	done := 0
	for i, e := range d.fifo {
		if e.ev == (gpumem.Event{}) {
			continue
		}
		ok, err := d.b.EventQuery(e.ev)
		if err != nil || !ok {
			break
		}
		done = i + 1
	}
	if done == 0 {
		return
	}
	d.retireLocked(done)
}

// retireLocked drops the first n entries of the fifo as complete.
// freeMu must be held.
func (d *device) retireLocked(n int) {
	var bytes int64
	d.mu.Lock()
	for _, e := range d.fifo[:n] {
		bytes += int64(e.size)
		d.noteReleasedLocked(e.size)
		d.hist.Add(gpumem.ActionFreeComplete, d.id, d.freeStream.Handle, e.p, e.size)
	}
	d.mu.Unlock()
	for _, e := range d.fifo[:n] {
		if e.ev != (gpumem.Event{}) {
			d.putEvent(e.ev)
		}
	}
	m := copy(d.fifo, d.fifo[n:])
	clear(d.fifo[m:])
	d.fifo = d.fifo[:m]
	d.queued.Store(int32(m))
	d.pending.Add(-bytes)
}

// syncFreeLocked waits for the free stream and retires every entry.
// freeMu must be held.
func (d *device) syncFreeLocked() error {
	if !d.hasStream {
		return nil
	}
	if err := d.b.StreamSynchronize(d.freeStream); err != nil {
		return fmt.Errorf("asyncpool: synchronizing device %d's free stream: %w", d.id, err)
	}
	d.retireLocked(len(d.fifo))
	return nil
}

// throttle joins the free stream into s when (allocated + pending release
// + size) / capacity would exceed the throttle ratio and frees were enqueued
// on the free stream since s last joined it.
func (d *device) throttle(s gpumem.Stream, size uint64) error {
	if !d.overThrottle(size) {
		return nil
	}
	d.freeMu.Lock()
	defer d.freeMu.Unlock()
	if !d.hasStream || d.joined[s.Handle] == d.freeSeq {
		return nil
	}
	if err := d.join(d.freeStream, s); err != nil {
		return fmt.Errorf("asyncpool: throttling %v behind device %d's free stream: %w", s, d.id, err)
	}
	d.joined[s.Handle] = d.freeSeq
	d.mu.Lock()
	d.ctr.ThrottleJoins++
	d.mu.Unlock()
	return nil
}

// overThrottle reports whether an allocation of size would take the device
// over the throttle ratio while frees are pending release.
func (d *device) overThrottle(size uint64) bool {
	if !d.throttles() {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.overThrottleLocked(size)
}

// overThrottleLocked is overThrottle with mu held.
func (d *device) overThrottleLocked(size uint64) bool {
	if !d.throttles() {
		return false
	}
	used := float64(d.allocatedLocked()+d.pending.Load()) + float64(size)
	return used > d.ratio*float64(d.total)
}

// allocatedLocked is the bytes handed out, and charged by allocations
// under way. mu must be held.
func (d *device) allocatedLocked() int64 {
	return d.tally.rows[gpumem.StatAll].liveBytes + d.inflight.Load()
}

// allocatedBytes is allocatedLocked, taking mu.
func (d *device) allocatedBytes() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.allocatedLocked()
}

// throttles reports whether the throttle can apply at all: a ratio below
// one, and frees pending release.
func (d *device) throttles() bool { return d.ratio < 1 && d.pending.Load() > 0 }

// idle reports that housekeep has nothing to do: no graph to retain or
// process, no graph frees to flush, no free on the free stream to poll.
func (d *device) idle() bool {
	return d.unheld.Load() == 0 && !d.relFlag.Load() && !d.hasWork.Load() && d.queued.Load() == 0
}

// charge counts size as under way, ahead of the pool's call on the full
// path (the throttle reads it); uncharge takes it back, when the call
// failed or its record is made.
func (d *device) charge(size uint64)   { d.inflight.Add(int64(size)) }
func (d *device) uncharge(size uint64) { d.inflight.Add(-int64(size)) }

// allocUncaptured is Allocate's fast path: the capture check and the
// allocation in one backend call (guarded), made under mu with the record
// and the statistics, so that one lock covers the whole pair of steps and
// Close, which sets closed under mu, cannot overtake it. ok false with no
// error: the allocation would take the device over the throttle ratio, the
// stream is being captured, or the pool is exhausted; nothing was
// allocated and the caller takes the full path, which asks again.
func (d *device) allocUncaptured(size uint64, s gpumem.Stream) (p gpumem.Ptr, ok bool, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return 0, false, errClosed
	}
	if d.overThrottleLocked(size) {
		return 0, false, nil
	}
	var st gpumem.CaptureStatus
	if d.untracked() {
		p, err = d.b.MallocFromPoolAsync(size, d.pool, s)
	} else {
		p, st, err = d.guarded.MallocFromPoolAsyncUncaptured(size, d.pool, s)
	}
	if err != nil || st != gpumem.CaptureNone {
		if err != nil && !errors.Is(err, gpumem.ErrOutOfMemory) {
			return 0, false, fmt.Errorf("asyncpool: allocating %d bytes on %v: %w", size, s, err)
		}
		return 0, false, nil
	}
	p, err = d.insertLocked(p, size, s, nil)
	return p, err == nil, err
}

// insert records a new allocation p of the full path (of the capture gs,
// if not nil), whose size was charged, and counts it; a p that is still
// live is the backend's error.
func (d *device) insert(p gpumem.Ptr, size uint64, s gpumem.Stream, gs *graphState) (gpumem.Ptr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.uncharge(size)
	return d.insertLocked(p, size, s, gs)
}

// insertLocked is insert with mu held.
func (d *device) insertLocked(p gpumem.Ptr, size uint64, s gpumem.Stream, gs *graphState) (gpumem.Ptr, error) {
	rec := record{size: size, stream: s.Handle}
	if gs != nil {
		rec.x = &recExtra{graph: gs}
	}
	if !d.recs.add(p, rec) {
		d.tally.devAllocs++
		if p == 0 {
			return 0, fmt.Errorf("asyncpool: backend returned a nil address for %d bytes: %w", size, gpumem.ErrInvalidValue)
		}
		return 0, fmt.Errorf("asyncpool: backend returned address %#x, which is still live: %w", uintptr(p), gpumem.ErrInvalidValue)
	}
	if gs != nil {
		gs.allocs[p] = struct{}{}
	}
	d.noteAllocLocked(p, size, s)
	return p, nil
}

// holds reports whether d has a record of p.
func (d *device) holds(p gpumem.Ptr) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.recs.has(p)
}

// join makes waiter wait for the work queued so far on from (an event
// recorded on from, waited on by waiter). The event is of from's device.
func (d *device) join(from, waiter gpumem.Stream) error {
	src := d
	if from.Device != d.id {
		var err error
		if src, err = d.a.device(from.Device); err != nil {
			return err
		}
	}
	ev, err := src.getEvent()
	if err != nil {
		return err
	}
	defer src.putEvent(ev) // a wait binds to the record made before it
	if err := d.b.EventRecord(ev, from); err != nil {
		return err
	}
	return d.b.StreamWaitEvent(waiter, ev)
}

func (d *device) getEvent() (gpumem.Event, error) {
	d.evMu.Lock()
	if n := len(d.events); n > 0 {
		ev := d.events[n-1]
		d.events = d.events[:n-1]
		d.evMu.Unlock()
		return ev, nil
	}
	d.evMu.Unlock()
	ev, err := d.b.EventCreate(d.id, gpumem.EventDisableTiming)
	if err != nil {
		return ev, fmt.Errorf("asyncpool: creating an event on device %d: %w", d.id, err)
	}
	return ev, nil
}

func (d *device) putEvent(ev gpumem.Event) {
	d.evMu.Lock()
	d.events = append(d.events, ev)
	d.evMu.Unlock()
}

// ensureFreeStreamLocked creates the free stream. freeMu must be held.
func (d *device) ensureFreeStreamLocked() error {
	if d.hasStream {
		return nil
	}
	s, err := d.b.StreamCreate(d.id, gpumem.StreamNonBlocking, 0)
	if err != nil {
		return fmt.Errorf("asyncpool: creating device %d's free stream: %w", d.id, err)
	}
	d.freeStream, d.hasStream = s, true
	return nil
}

// malloc reserves size bytes of the allocated count and asks the pool, with
// the OOM path on failure.
func (d *device) malloc(size uint64, s gpumem.Stream, capturing bool) (gpumem.Ptr, error) {
	d.charge(size)
	p, err := d.b.MallocFromPoolAsync(size, d.pool, s)
	if err == nil {
		return p, nil
	}
	d.uncharge(size)
	if !errors.Is(err, gpumem.ErrOutOfMemory) {
		return 0, fmt.Errorf("asyncpool: allocating %d bytes on %v: %w", size, s, err)
	}
	return d.oom(size, s, capturing, err)
}

// tryMalloc is one attempt of the OOM path.
func (d *device) tryMalloc(size uint64, s gpumem.Stream) (gpumem.Ptr, error) {
	d.charge(size)
	p, err := d.b.MallocFromPoolAsync(size, d.pool, s)
	if err != nil {
		d.uncharge(size)
		return 0, err
	}
	return p, nil
}

// noteAllocLocked updates stats and history for a new allocation. mu must
// be held.
func (d *device) noteAllocLocked(p gpumem.Ptr, size uint64, s gpumem.Stream) {
	d.tally.alloc(size)
	d.hist.Add(gpumem.ActionAlloc, d.id, s.Handle, p, size)
}

// noteFreeLocked updates stats and history for a user's free; pending says
// whether the bytes stay pending release. mu must be held.
func (d *device) noteFreeLocked(p gpumem.Ptr, size uint64, s gpumem.Stream, pending bool) {
	d.tally.free(size, pending)
	d.noteFreeHistoryLocked(p, size, s, pending)
}

// noteFreeHistoryLocked is noteFreeLocked's history part. mu must be held.
func (d *device) noteFreeHistoryLocked(p gpumem.Ptr, size uint64, s gpumem.Stream, pending bool) {
	if !d.hist.On() {
		return
	}
	t := clock.Now()
	d.hist.AddAt(t, gpumem.ActionFreeRequest, d.id, s.Handle, p, size)
	if !pending {
		d.hist.AddAt(t, gpumem.ActionFreeComplete, d.id, s.Handle, p, size)
	}
}

// unnoteFreeLocked undoes noteFreeLocked after a failed free (history keeps
// the request). mu must be held.
func (d *device) unnoteFreeLocked(size uint64, pending bool) { d.tally.unfree(size, pending) }

// noteReleasedLocked moves bytes pending release out of the active figures
// once the driver's free is known complete (or known unnecessary). mu must
// be held.
func (d *device) noteReleasedLocked(size uint64) { d.tally.released(size) }
