package asyncpool

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/oomhooks"
	"github.com/gpumem/gpumem/internal/streamcheck"
)

// Allocator is the stream-ordered pool allocator. See doc.go for an overview.
// It implements gpumem.Allocator, with a memory history
// (gpumem.HistoryKeeper), snapshots (gpumem.Snapshotter) and devices set up
// lazily (gpumem.DeviceSetter), and is safe for concurrent use.
type Allocator struct {
	b    gpumem.Backend
	opts Options

	closed atomic.Bool
	devs   []atomic.Pointer[device] // lazily created, indexed by ordinal

	initMu sync.Mutex // serialises device creation only (never on the hot path)

	hooks oomhooks.Hooks // the OOM handler and observers
}

var (
	_ gpumem.Allocator     = (*Allocator)(nil)
	_ gpumem.HistoryKeeper = (*Allocator)(nil)
	_ gpumem.Snapshotter   = (*Allocator)(nil)
	_ gpumem.DeviceSetter  = (*Allocator)(nil)
)

// New makes an allocator over b's stream-ordered pools. Devices are set up
// lazily, on their first use.
func New(b gpumem.Backend, opts Options) (*Allocator, error) {
	if b == nil {
		return nil, fmt.Errorf("asyncpool: nil backend: %w", gpumem.ErrInvalidValue)
	}
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	n, err := b.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("asyncpool: counting devices: %w", err)
	}
	if n <= 0 {
		return nil, fmt.Errorf("asyncpool: backend %s reports no device: %w", b.Name(), gpumem.ErrNoDevice)
	}
	for _, p := range opts.PeerAccess {
		if p >= n {
			return nil, fmt.Errorf("asyncpool: peer device %d out of range (%d devices): %w", p, n, gpumem.ErrInvalidValue)
		}
	}
	return &Allocator{b: b, opts: opts, devs: make([]atomic.Pointer[device], n)}, nil
}

// Options returns the options in force (normalised).
func (a *Allocator) Options() Options {
	if a == nil {
		return Options{}
	}
	o := a.opts
	o.PeerAccess = append([]int(nil), o.PeerAccess...)
	return o
}

// errNil is the error of method op on a nil *Allocator (what a failed New
// returns).
func errNil(op string) error {
	return fmt.Errorf("asyncpool: %s on a nil allocator: %w", op, gpumem.ErrInvalidValue)
}

// device returns the state of device dev, creating it on first use.
func (a *Allocator) device(dev int) (*device, error) {
	if a.closed.Load() {
		return nil, errClosed
	}
	if dev < 0 || dev >= len(a.devs) {
		return nil, fmt.Errorf("asyncpool: device %d out of range (%d devices): %w", dev, len(a.devs), gpumem.ErrInvalidValue)
	}
	if d := a.devs[dev].Load(); d != nil {
		return d, nil
	}
	return a.initDevice(dev)
}

var errClosed = fmt.Errorf("asyncpool: allocator is closed: %w", gpumem.ErrClosed)

func (a *Allocator) initDevice(dev int) (*device, error) {
	a.initMu.Lock()
	defer a.initMu.Unlock()
	if a.closed.Load() {
		return nil, errClosed
	}
	if d := a.devs[dev].Load(); d != nil {
		return d, nil
	}
	d, err := newDevice(a, dev)
	if err != nil {
		return nil, err
	}
	a.devs[dev].Store(d)
	return d, nil
}

// Setup sets device dev up now (its pool's attributes and peer access)
// instead of on its first allocation, which then costs no more than any
// other: for services that want their first request served at full speed,
// and for timed loops. Setting up a device twice does nothing.
func (a *Allocator) Setup(dev int) error {
	if a == nil {
		return errNil("Setup")
	}
	_, err := a.device(dev)
	return err
}

// existing returns the devices created so far.
func (a *Allocator) existing() []*device {
	var out []*device
	for i := range a.devs {
		if d := a.devs[i].Load(); d != nil {
			out = append(out, d)
		}
	}
	return out
}

// Allocate returns size bytes usable in stream order on s, from the pool of
// s's device: one MallocFromPoolAsync plus bookkeeping. Above the throttle
// ratio the free stream is first joined into s. On exhaustion it waits for
// the device, trims the pool and tries once more, then asks the OOM handler,
// and fails with an *gpumem.OutOfMemoryError.
func (a *Allocator) Allocate(size uint64, s gpumem.Stream) (gpumem.Ptr, error) {
	if a == nil {
		return 0, errNil("Allocate")
	}
	d, err := a.device(s.Device)
	if err != nil {
		return 0, err
	}
	if d.guarded != nil && !s.IsDefault() && size != 0 && size <= d.total && d.idle() {
		if p, ok, err := d.allocUncaptured(size, s); ok || err != nil {
			return p, err
		}
	}
	d.life.RLock()
	defer d.life.RUnlock()
	if d.closed {
		return 0, errClosed
	}
	if size == 0 {
		return 0, fmt.Errorf("asyncpool: allocation of 0 bytes: %w", gpumem.ErrInvalidValue)
	}
	if size > maxRequest {
		return 0, fmt.Errorf("asyncpool: allocation of %d bytes is impossibly large: %w", size, gpumem.ErrInvalidValue)
	}
	ci, err := d.captureInfo(s)
	if err != nil {
		return 0, err
	}
	capturing := ci.Status == gpumem.CaptureActive
	if size > d.total {
		return 0, d.tooLarge(size, s, capturing)
	}
	var gs *graphState
	if capturing {
		if gs, err = d.graphFor(ci, s); err != nil {
			return 0, err
		}
	} else {
		d.housekeep()
		if err := d.throttle(s, size); err != nil {
			return 0, err
		}
	}
	p, err := d.malloc(size, s, capturing)
	if err != nil {
		return 0, err
	}
	if gs != nil {
		if err := d.markLaunch(gs, s); err != nil {
			d.uncharge(size)
			ferr := a.b.FreeAsync(p, s)
			d.mu.Lock()
			d.tally.devAllocs++
			if ferr == nil {
				d.tally.devFrees++
			}
			d.mu.Unlock()
			if ferr != nil {
				err = errors.Join(err, ferr)
			}
			return 0, err
		}
	}
	return d.insert(p, size, s, gs)
}

// RecordStream marks p as used on s: when p is freed, its memory is not
// reused until the work queued on s up to the free has completed (the free
// then goes through the free stream, joined to every using stream).
//
// s may be a stream of any device; a stream that is not live is refused
// with ErrInvalidValue.
func (a *Allocator) RecordStream(p gpumem.Ptr, s gpumem.Stream) error {
	if a == nil {
		return errNil("RecordStream")
	}
	d, err := a.device(s.Device)
	if err != nil {
		return err
	}
	if !s.IsDefault() {
		if err := streamcheck.Check(a.b, s); err != nil {
			if a.closed.Load() {
				return errClosed
			}
			return fmt.Errorf("asyncpool: RecordStream on %v: %w", s, err)
		}
	}
	owner := a.owner(d, p)
	owner.life.RLock()
	defer owner.life.RUnlock()
	if owner.closed {
		return errClosed
	}
	owner.mu.Lock()
	defer owner.mu.Unlock()
	rec, ok := owner.recs.get(p)
	if !ok || rec.state() != stateLive {
		return fmt.Errorf("asyncpool: RecordStream of %#x: not allocated by this allocator or already freed: %w", uintptr(p), gpumem.ErrInvalidValue)
	}
	if s == rec.allocStream(owner.id) {
		return nil
	}
	for _, u := range rec.recorded() {
		if u == s {
			return nil
		}
	}
	x := rec.edit()
	x.streams = append(x.streams, s)
	owner.recs.set(p, rec)
	return nil
}

// owner finds the device holding p, looking at d first; d when none does.
func (a *Allocator) owner(d *device, p gpumem.Ptr) *device {
	if d.holds(p) {
		return d
	}
	if o := a.elsewhere(d, p); o != nil {
		return o
	}
	return d
}

// elsewhere returns the device other than d that holds p, or nil.
func (a *Allocator) elsewhere(d *device, p gpumem.Ptr) *device {
	for _, o := range a.existing() {
		if o != d && o.holds(p) {
			return o
		}
	}
	return nil
}

// Deallocate frees p, whose last use is ordered on s. With no recorded
// streams this is one FreeAsync on s. With recorded streams the allocation
// stream, s and every recorded stream are joined into the device's free
// stream by events and the memory is freed there. Frees that involve a graph
// capture follow the four cases of doc.go.
func (a *Allocator) Deallocate(p gpumem.Ptr, s gpumem.Stream) error {
	if a == nil {
		return errNil("Deallocate")
	}
	d, err := a.device(s.Device)
	if err != nil {
		return err
	}
	if p == 0 {
		return fmt.Errorf("asyncpool: Deallocate of a nil pointer: %w", gpumem.ErrInvalidValue)
	}
	return d.deallocate(p, s, true)
}

// SetOOMHandler installs the handler called (with no lock held) before an
// allocation fails for lack of memory; nil removes it.
func (a *Allocator) SetOOMHandler(h gpumem.OOMHandler) {
	if a == nil {
		return
	}
	a.hooks.SetHandler(h)
}

// AddOOMObserver adds an observer told of every out-of-memory failure.
func (a *Allocator) AddOOMObserver(o gpumem.OOMObserver) {
	if a == nil {
		return
	}
	a.hooks.AddObserver(o)
}

// EnablePeer grants device peer read-write access to the pool of device dev
// (MemPoolSetAccess), so that streams of peer may use its allocations.
func (a *Allocator) EnablePeer(dev, peer int) error {
	if a == nil {
		return errNil("EnablePeer")
	}
	d, err := a.device(dev)
	if err != nil {
		return err
	}
	if peer < 0 || peer >= len(a.devs) {
		return fmt.Errorf("asyncpool: peer device %d out of range: %w", peer, gpumem.ErrInvalidValue)
	}
	if peer == dev {
		return nil
	}
	d.life.RLock()
	defer d.life.RUnlock()
	if d.closed {
		return errClosed
	}
	if err := a.b.MemPoolSetAccess(d.pool, peer, gpumem.AccessReadWrite); err != nil {
		return fmt.Errorf("asyncpool: granting device %d access to device %d's pool: %w", peer, dev, err)
	}
	return nil
}

// EmptyCache trims every device's pool: it waits for the free streams,
// frees what graphs have released, and returns unused reserved memory to the
// device (MemPoolTrimTo 0). It is refused while a capture that the allocator
// has seen is open on the device, since trimming would synchronize.
func (a *Allocator) EmptyCache() error {
	if a == nil {
		return errNil("EmptyCache")
	}
	if a.closed.Load() {
		return errClosed
	}
	var errs []error
	for _, d := range a.existing() {
		if err := d.trim(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close frees every allocation still outstanding (user-held ones included),
// waits for the device, destroys the free streams, events and any pool of
// its own, and restores the default pool's attributes. Allocations owned by
// graphs that still exist cannot be freed safely: Close leaves them to the
// graph and says how many in its error. Every later call fails with
// ErrClosed. Close is idempotent. While a capture that the allocator has
// seen is open on a device, Close is refused with ErrCaptureActive and
// closes nothing: waiting for the device would end the capture
// (invalidate it), as EmptyCache's would.
func (a *Allocator) Close() error {
	if a == nil {
		return errNil("Close")
	}
	if !a.closed.Load() {
		for _, d := range a.existing() {
			if open, err := d.captureOpen(); err == nil && open {
				return fmt.Errorf("asyncpool: Close: a capture is open on device %d (end it first): %w: %w", d.id, ErrCaptureActive, gpumem.ErrInvalidValue)
			}
		}
	}
	a.initMu.Lock()
	if a.closed.Swap(true) {
		a.initMu.Unlock()
		return nil
	}
	a.initMu.Unlock()
	var errs []error
	for _, d := range a.existing() {
		if err := d.close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
