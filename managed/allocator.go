package managed

// See doc.go for an overview.

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/internal/history"
	"github.com/gpumem/gpumem/internal/oomhooks"
	"github.com/gpumem/gpumem/internal/streamcheck"
)

// ErrNotEnabled is returned by New when unified memory is not enabled and
// Options.Force is not set. It matches gpumem.ErrNotSupported.
var ErrNotEnabled = fmt.Errorf("managed: unified memory is not enabled (call managed.Enable(true) or set %s=1, or set Options.Force): %w", EnvEnable, gpumem.ErrNotSupported)

// nshards is the number of buffer-table shards; a power of two.
const nshards = 64

// shard is one lock's worth of the live-buffer table.
type shard struct {
	mu sync.Mutex
	m  map[gpumem.Ptr]*Buffer
}

// Allocator is the caching managed-memory allocator: one allocator for host
// and device requests, over two caching pools of managed memory with the
// seed's initial hints. See the package documentation for the design. It
// implements gpumem.Allocator, with a memory history (gpumem.HistoryKeeper)
// and snapshots (gpumem.Snapshotter), and is safe for concurrent use.
type Allocator struct {
	b       gpumem.Backend
	opts    Options
	ndev    int
	streams streamcheck.Cache // checks streams, remembering those that passed

	dev, host     *caching.Allocator // device-preferred and host-preferred pools
	devUp, hostUp *upstream

	migrates []bool   // per device: pages migrate (concurrent managed access)
	totals   []uint64 // per device: total memory
	limit    uint64   // the guard's cap on managed bytes (when capped)
	capped   bool     // the guard applies (no AllowOversubscription), even at 0 bytes
	reserved atomic.Uint64
	resident []atomic.Int64 // bytes of live buffers believed resident: [0] host, [1+d] device d

	// dirty is set when restoring a moved buffer's hints failed: from then
	// on every block handed out gets its hints again.
	dirty   atomic.Bool
	closed  atomic.Bool
	closeMu sync.Mutex // serializes Close, so that a retry never races the first

	shards [nshards]shard

	// hooks keeps the OOM handler and observers. The pools' handler is
	// hooks.Retry, which asks ours within the bound every allocator shares.
	hooks oomhooks.Hooks
}

var (
	_ gpumem.Allocator     = (*Allocator)(nil)
	_ gpumem.HistoryKeeper = (*Allocator)(nil)
	_ gpumem.Snapshotter   = (*Allocator)(nil)
)

// New returns a managed allocator over b. It fails with ErrNotEnabled unless
// unified memory is enabled or opts.Force is set, with ErrNotSupported when
// a device has no managed memory or CoarseGrain is asked of a backend other
// than HIP, and with ErrInvalidValue for bad options. It allocates nothing
// until asked.
func New(b gpumem.Backend, opts Options) (*Allocator, error) {
	if b == nil {
		return nil, fmt.Errorf("managed: nil backend: %w", gpumem.ErrInvalidValue)
	}
	if !opts.Force && !Enabled() {
		return nil, ErrNotEnabled
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.MaxDeviceFraction == 0 {
		opts.MaxDeviceFraction = DefaultMaxDeviceFraction
	}
	if opts.PageSize == 0 {
		opts.PageSize = DefaultPageSize
	}
	if opts.SegmentSize == 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	if opts.CoarseGrain && b.Name() != "hip" {
		return nil, fmt.Errorf("managed: coarse-grain advice is HIP's; backend %q has none: %w", b.Name(), gpumem.ErrNotSupported)
	}
	n, err := b.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("managed: counting devices: %w", err)
	}
	if n == 0 {
		return nil, fmt.Errorf("managed: no device: %w", gpumem.ErrNoDevice)
	}
	a := &Allocator{b: b, opts: opts, ndev: n, migrates: make([]bool, n), totals: make([]uint64, n),
		resident: make([]atomic.Int64, n+1)}
	a.streams.Init(b)
	for i := range a.shards {
		a.shards[i].m = map[gpumem.Ptr]*Buffer{}
	}
	var smallest uint64
	for d := 0; d < n; d++ {
		has, err := b.DeviceAttribute(d, gpumem.AttrManagedMemory)
		if err != nil {
			return nil, fmt.Errorf("managed: device %d managed-memory attribute: %w", d, err)
		}
		if has == 0 {
			return nil, fmt.Errorf("managed: device %d has no managed memory: %w", d, gpumem.ErrNotSupported)
		}
		a.migrates[d] = migrates(b, d)
		if !a.migrates[d] {
			a.logf("managed: device %d cannot migrate managed pages (on HIP: XNACK off): memory stays in host memory; moves update advice only", d)
		}
		_, total, err := b.MemInfo(d)
		if err != nil {
			return nil, fmt.Errorf("managed: device %d memory info: %w", d, err)
		}
		a.totals[d] = total
		if d == 0 || total < smallest {
			smallest = total
		}
	}
	if !opts.AllowOversubscription {
		// A guard that rounds to 0 bytes refuses every allocation.
		a.limit, a.capped = uint64(opts.MaxDeviceFraction*float64(smallest)), true
	}
	a.devUp, a.hostUp = newUpstream(a, false, n), newUpstream(a, true, n)
	co := opts.Caching
	co.Upstream = a.devUp
	if a.dev, err = caching.New(b, co); err != nil {
		return nil, fmt.Errorf("managed: device pool: %w", err)
	}
	co.Upstream = a.hostUp
	if a.host, err = caching.New(b, co); err != nil {
		_ = a.dev.Close()
		return nil, fmt.Errorf("managed: host pool: %w", err)
	}
	for _, p := range []*caching.Allocator{a.dev, a.host} {
		p.SetOOMHandler(a.hooks.Retry)
		p.AddOOMObserver(a.observe)
	}
	return a, nil
}

func (a *Allocator) logf(format string, args ...any) {
	if a.opts.Caching.Logf != nil {
		a.opts.Caching.Logf(format, args...)
	}
}

// Backend returns the backend the allocator takes memory from.
func (a *Allocator) Backend() gpumem.Backend {
	if a == nil {
		return nil
	}
	return a.b
}

// Limit returns the oversubscription guard's cap on the managed bytes the
// allocator holds, and whether there is one. ok is false when
// oversubscription is allowed; a cap of 0 bytes (a fraction of the device
// that rounds down to nothing) is (0, true), and refuses every allocation.
func (a *Allocator) Limit() (limit uint64, ok bool) {
	if a == nil {
		return 0, false
	}
	return a.limit, a.capped
}

// Reserved returns the managed bytes the allocator holds from the backend.
func (a *Allocator) Reserved() uint64 {
	if a == nil {
		return 0
	}
	return a.reserved.Load()
}

// CanMigrate reports whether device dev migrates managed pages (its
// concurrent-managed-access attribute is set). Where it does not, managed
// memory stays in host memory and moves only change advice.
func (a *Allocator) CanMigrate(dev int) bool {
	if a == nil {
		return false
	}
	return dev >= 0 && dev < a.ndev && a.migrates[dev]
}

// reserve counts size more managed bytes against the guard.
func (a *Allocator) reserve(dev int, size uint64) error {
	for {
		cur := a.reserved.Load()
		if a.capped && (cur+size > a.limit || cur+size < cur) {
			return a.guardError(dev, size, cur)
		}
		if a.reserved.CompareAndSwap(cur, cur+size) {
			return nil
		}
	}
}

func (a *Allocator) unreserve(size uint64) { a.reserved.Add(-size) }

// guardError is the oversubscription guard's refusal.
func (a *Allocator) guardError(dev int, size, cur uint64) *gpumem.OutOfMemoryError {
	free, total, err := a.b.MemInfo(dev)
	if err != nil {
		free, total = 0, a.totals[dev]
	}
	e := &gpumem.OutOfMemoryError{
		Allocator: "managed", Device: dev, Requested: size, Capacity: total, Free: free,
		Reserved: cur, Limit: a.limit,
		Hint: fmt.Sprintf("The oversubscription guard holds managed memory to %s (Options.MaxDeviceFraction %.2f of the smallest device): raise MaxDeviceFraction, or set Options.AllowOversubscription to oversubscribe explicitly",
			gpumem.FormatBytes(a.limit), a.opts.MaxDeviceFraction),
	}
	// No NoteOtherProcesses here: the guard refuses inside a pool's
	// Upstream call, under the pool's device lock, and the pool's own
	// out-of-memory error (which Alloc returns) asks the hook once that
	// lock is released.
	return e
}

// initialHints applies the seed's hints to a new segment: device memory
// prefers its device with no accessed-by; host memory prefers the host and
// is accessed by the device it was allocated for. With CoarseGrain, HIP's
// coarse-grain advice too.
func (a *Allocator) initialHints(p gpumem.Ptr, size uint64, host bool, dev int) error {
	pref := gpumem.DeviceLocation(dev)
	if host {
		pref = gpumem.HostLocation()
	}
	if err := a.b.Advise(p, size, gpumem.AdviseSetPreferredLocation, pref); err != nil {
		return fmt.Errorf("managed: advising %s preferred: %w", pref, err)
	}
	if host {
		if err := a.b.Advise(p, size, gpumem.AdviseSetAccessedBy, gpumem.DeviceLocation(dev)); err != nil {
			return fmt.Errorf("managed: advising accessed by device %d: %w", dev, err)
		}
	}
	if a.opts.CoarseGrain {
		if err := a.b.Advise(p, size, gpumem.AdviseSetCoarseGrain, pref); err != nil {
			return fmt.Errorf("managed: coarse-grain advice: %w", err)
		}
	}
	return nil
}

func (a *Allocator) shardOf(p gpumem.Ptr) *shard {
	h := (uint64(p) >> 9) * 0x9E3779B97F4A7C15
	return &a.shards[h>>(64-6)]
}

// errNil is the error of method op on a nil *Allocator (what a failed New
// returns).
func errNil(op string) error {
	return fmt.Errorf("managed: %s on a nil allocator: %w", op, gpumem.ErrInvalidValue)
}

func (a *Allocator) checkOpen() error {
	if a.closed.Load() {
		return fmt.Errorf("managed: allocator closed: %w", gpumem.ErrClosed)
	}
	return nil
}

func (a *Allocator) checkLocation(loc gpumem.Location) error {
	switch loc.Kind {
	case gpumem.LocationHost:
		return nil
	case gpumem.LocationDevice:
		if loc.Device >= 0 && loc.Device < a.ndev {
			return nil
		}
		return fmt.Errorf("managed: no device %d (%d devices): %w", loc.Device, a.ndev, gpumem.ErrInvalidValue)
	}
	return fmt.Errorf("managed: invalid location: %w", gpumem.ErrInvalidValue)
}

// residentIndex is the residency slot of a location: where the pages of a
// buffer advised to loc are believed to be.
func (a *Allocator) residentIndex(loc gpumem.Location) int {
	if loc.Kind == gpumem.LocationDevice && a.migrates[loc.Device] {
		return 1 + loc.Device
	}
	return 0
}

// Alloc returns a managed buffer of size bytes placed at loc, usable in
// stream order on s. A device buffer comes from the device-preferred pool of
// loc.Device (s must be a stream of that device); a host buffer from the
// host-preferred pool of s's device, which the buffer is advised to be
// accessed by.
func (a *Allocator) Alloc(size uint64, loc gpumem.Location, s gpumem.Stream) (*Buffer, error) {
	if a == nil {
		return nil, errNil("Alloc")
	}
	if err := a.checkOpen(); err != nil {
		return nil, err
	}
	if err := a.checkLocation(loc); err != nil {
		return nil, err
	}
	if s.Device < 0 || s.Device >= a.ndev {
		return nil, fmt.Errorf("managed: %v: no such device: %w", s, gpumem.ErrInvalidValue)
	}
	host := loc.Kind == gpumem.LocationHost
	if !host && s.Device != loc.Device {
		return nil, fmt.Errorf("managed: memory for device %d on %v of another device: %w", loc.Device, s, gpumem.ErrInvalidValue)
	}
	pool := a.dev
	if host {
		pool = a.host
	}
	p, err := pool.Allocate(size, s)
	if err != nil {
		return nil, a.translate(err)
	}
	buf := &Buffer{Ptr: p, Size: size, a: a, pool: pool, host: host, dev: s.Device, stream: s, loc: loc, accessedBy: -1, pref: loc, prefKnown: true}
	if host {
		buf.accessedBy = s.Device
	}
	if a.dirty.Load() {
		if err := a.initialHints(p, size, host, s.Device); err != nil {
			_ = pool.Deallocate(p, s)
			return nil, err
		}
	}
	if a.opts.PrefetchOnAllocate && !host && a.migrates[loc.Device] {
		if err := a.b.Prefetch(p, size, loc, s); err != nil {
			_ = pool.Deallocate(p, s)
			return nil, fmt.Errorf("managed: prefetching a new block to %s: %w", loc, err)
		}
		buf.prefetched = true
	}
	sh := a.shardOf(p)
	sh.mu.Lock()
	sh.m[p] = buf
	sh.mu.Unlock()
	a.resident[a.residentIndex(loc)].Add(int64(size))
	return buf, nil
}

// translate makes an out-of-memory error of a pool the managed allocator's:
// when the guard refused, its hint and limit; the cause is kept.
func (a *Allocator) translate(err error) error {
	var oom *gpumem.OutOfMemoryError
	if !errors.As(err, &oom) {
		return fmt.Errorf("managed: %w", err)
	}
	return a.translateOOM(oom)
}

func (a *Allocator) translateOOM(oom *gpumem.OutOfMemoryError) *gpumem.OutOfMemoryError {
	out := *oom
	out.Allocator = "managed"
	var guard *gpumem.OutOfMemoryError
	if oom.Err != nil && errors.As(oom.Err, &guard) && guard.Allocator == "managed" {
		out.Hint, out.Limit = guard.Hint, guard.Limit
	}
	return &out
}

func (a *Allocator) observe(oom *gpumem.OutOfMemoryError) {
	a.hooks.Notify(func() *gpumem.OutOfMemoryError { return a.translateOOM(oom) })
}

// Buffer returns the live buffer that starts at p, or nil.
func (a *Allocator) Buffer(p gpumem.Ptr) *Buffer {
	if a == nil {
		return nil
	}
	sh := a.shardOf(p)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.m[p]
}

// IsManaged reports whether p is the start of a live managed buffer handed
// out by this allocator (the seed's Tensor.is_managed).
func (a *Allocator) IsManaged(p gpumem.Ptr) bool { return a.Buffer(p) != nil }

// Allocate implements gpumem.Resource: size bytes of managed memory that
// prefer s's device, usable in stream order on s.
func (a *Allocator) Allocate(size uint64, s gpumem.Stream) (gpumem.Ptr, error) {
	if a == nil {
		return 0, errNil("Allocate")
	}
	if s.Device < 0 || s.Device >= a.ndev {
		if err := a.checkOpen(); err != nil {
			return 0, err
		}
		return 0, fmt.Errorf("managed: %v: no such device: %w", s, gpumem.ErrInvalidValue)
	}
	buf, err := a.Alloc(size, gpumem.DeviceLocation(s.Device), s)
	if err != nil {
		return 0, err
	}
	return buf.Ptr, nil
}

// Deallocate implements gpumem.Resource: it frees the buffer at p (from
// Allocate, Alloc, Manage or a copying To), its last use ordered on s.
//
// s must be a live stream: anything else is refused with ErrInvalidValue
// and p stays allocated. A stream p was used on that has since been
// destroyed has no work left to wait for and does not delay the reuse.
func (a *Allocator) Deallocate(p gpumem.Ptr, s gpumem.Stream) error {
	if a == nil {
		return errNil("Deallocate")
	}
	if err := a.checkOpen(); err != nil {
		return err
	}
	if err := a.checkStream(s); err != nil {
		return err
	}
	buf := a.Buffer(p)
	if buf == nil {
		return fmt.Errorf("managed: %#x is not a live buffer of this allocator (double free or foreign pointer): %w", uintptr(p), gpumem.ErrInvalidValue)
	}
	return buf.free(&s)
}

// RecordStream implements gpumem.StreamRecorder: the memory of p is not
// reused until the work queued on s up to its free has completed.
// s may be a stream of any device; a stream that is not live is refused
// with ErrInvalidValue.
func (a *Allocator) RecordStream(p gpumem.Ptr, s gpumem.Stream) error {
	if a == nil {
		return errNil("RecordStream")
	}
	if err := a.checkOpen(); err != nil {
		return err
	}
	if err := a.checkStream(s); err != nil {
		return err
	}
	buf := a.Buffer(p)
	if buf == nil {
		return fmt.Errorf("managed: %#x is not a live buffer of this allocator: %w", uintptr(p), gpumem.ErrInvalidValue)
	}
	return buf.recordUse(s)
}

// Stats returns the statistics of device dev: the sum of its
// device-preferred and host-preferred pools (peaks are the sum of the two
// pools' peaks, an upper bound of the combined peak). After Close they are
// zero: a closed allocator holds nothing.
func (a *Allocator) Stats(dev int) gpumem.MemoryStats {
	if a == nil {
		return gpumem.MemoryStats{}
	}
	if a.closed.Load() {
		return gpumem.MemoryStats{}
	}
	st := a.dev.Stats(dev)
	st.Add(a.host.Stats(dev))
	return st
}

// PoolStats returns the statistics of one pool of device dev: the
// host-preferred one when host is set, else the device-preferred one.
func (a *Allocator) PoolStats(dev int, host bool) gpumem.MemoryStats {
	if a == nil {
		return gpumem.MemoryStats{}
	}
	if host {
		return a.host.Stats(dev)
	}
	return a.dev.Stats(dev)
}

// ResetPeakStats sets every peak of device dev to its current value.
func (a *Allocator) ResetPeakStats(dev int) {
	if a == nil {
		return
	}
	a.dev.ResetPeakStats(dev)
	a.host.ResetPeakStats(dev)
}

// Snapshot returns the segments of both pools (host-preferred segments have
// segment_type "host_small" or "host_large"), the merged history and the
// statistics per device.
func (a *Allocator) Snapshot() gpumem.Snapshot {
	if a == nil {
		return gpumem.Snapshot{}
	}
	d, h := a.dev.Snapshot(), a.host.Snapshot()
	out := gpumem.Snapshot{Segments: d.Segments, Stats: map[int]gpumem.MemoryStats{}}
	for _, s := range h.Segments {
		s.SegmentType = "host_" + s.SegmentType
		out.Segments = append(out.Segments, s)
	}
	out.History = history.Merge(d.History, h.History)
	for dev := 0; dev < a.ndev; dev++ {
		out.Stats[dev] = a.Stats(dev)
	}
	return out
}

// History returns both pools' memory history, oldest first.
func (a *Allocator) History() []gpumem.HistoryEntry {
	if a == nil {
		return nil
	}
	return history.Merge(a.dev.History(), a.host.History())
}

// EmptyCache returns every wholly free cached segment of both pools to the
// backend.
func (a *Allocator) EmptyCache() error {
	if a == nil {
		return errNil("EmptyCache")
	}
	if err := a.checkOpen(); err != nil {
		return err
	}
	return errors.Join(a.dev.EmptyCache(), a.host.EmptyCache())
}

// SetOOMHandler installs h (nil removes it). Both pools ask it, with no
// lock held, before an allocation fails for lack of memory; an allocation
// retries at most oomhooks.MaxAttempts times at its request.
func (a *Allocator) SetOOMHandler(h gpumem.OOMHandler) {
	if a == nil {
		return
	}
	a.hooks.SetHandler(h)
}

// AddOOMObserver adds an observer told of every out-of-memory failure,
// with the managed allocator's description.
func (a *Allocator) AddOOMObserver(o gpumem.OOMObserver) {
	if a == nil {
		return
	}
	a.hooks.AddObserver(o)
}

// Close waits for the devices, returns all managed memory (buffers not yet
// freed included) and invalidates every buffer. Later calls fail with
// ErrClosed. A second Close returns nil, unless the backend refused to free
// some memory before: it then tries that memory again and reports what it
// still cannot free, so that a failed Close can be retried.
func (a *Allocator) Close() error {
	if a == nil {
		return errNil("Close")
	}
	a.closeMu.Lock()
	defer a.closeMu.Unlock()
	if a.closed.Swap(true) {
		return errors.Join(a.devUp.leftovers(), a.hostUp.leftovers())
	}
	errs := []error{a.dev.Close(), a.host.Close(), a.devUp.leftovers(), a.hostUp.leftovers()}
	// Buffer, then shard is the lock order (a Free holds its buffer's lock
	// while it takes its shard's): the buffers are taken out of each shard
	// first and invalidated with no shard lock held.
	var bufs []*Buffer
	for i := range a.shards {
		sh := &a.shards[i]
		sh.mu.Lock()
		for p, buf := range sh.m {
			bufs = append(bufs, buf)
			delete(sh.m, p)
		}
		sh.mu.Unlock()
	}
	for _, buf := range bufs {
		buf.mu.Lock()
		buf.freed = true
		buf.mu.Unlock()
	}
	for i := range a.resident {
		a.resident[i].Store(0)
	}
	return errors.Join(errs...)
}

// migrates reports whether device d migrates managed pages on demand: the
// backend's own answer where it has one (HIP ties it to XNACK, which
// pageable memory access reports), else concurrent managed access.
func migrates(b gpumem.Backend, d int) bool {
	if m, ok := b.(gpumem.ManagedMigration); ok {
		v, err := m.ManagedPagesMigrate(d)
		return err == nil && v
	}
	cma, err := b.DeviceAttribute(d, gpumem.AttrConcurrentManagedAccess)
	return err == nil && cma != 0
}

// checkStream asks the backend about s, so that a stream that is not a
// live stream of a device is refused (ErrInvalidValue) before anything
// changes, and a closed backend is ErrClosed. A stream already checked is
// answered from memory (streamcheck.Cache), as caching's are.
func (a *Allocator) checkStream(s gpumem.Stream) error {
	if err := a.streams.Check(s); err != nil {
		return fmt.Errorf("managed: %v: %w", s, err)
	}
	return nil
}

// streamGone reports whether s is no longer a stream the backend knows
// (destroyed): it then has no work left that a free must wait for.
func (a *Allocator) streamGone(s gpumem.Stream) bool { return streamcheck.Gone(a.b, s) }
