package adaptor

// See doc.go for an overview.

import (
	"fmt"
	"sync"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/nilcheck"
	"github.com/gpumem/gpumem/internal/oomhooks"
)

// Limit caps the bytes handed out through it on each device, after RMM's
// limiting_resource_adaptor.
//
// The cap counts the bytes asked for (not the upstream's rounded sizes), per
// device, over the allocations made through this Limit and not yet freed
// through it. An allocation that would take a device over its cap fails
// with an *gpumem.OutOfMemoryError whose Limit is the cap and whose Hint
// names it, without the upstream being asked; the OOM handler (when one is
// set) is first asked, as an allocator asks it, and the check is repeated
// after each "yes", at most oomhooks.MaxAttempts times. Such failures are
// counted in Stats' NumOOMs and told to the observers.
//
// The cap is not an allocator's own cap on reserved memory (caching's memory
// fraction, managed's MaxDeviceFraction): those bound what the allocator
// holds from the device, rounding, caching and fragmentation included, over
// every caller; a Limit bounds what one caller asks for through it, however
// the upstream serves it. Two Limits over one allocator cap two components
// separately while the allocator's own cap bounds them together.
//
// The device is the stream's (s.Device) for Allocate, and the device the
// allocation was made on for Deallocate. Deallocate and RecordStream accept
// only pointers handed out through this Limit (others: ErrInvalidValue,
// upstream not called). Stream ordering is the upstream's: Limit only
// counts. Stats are the upstream's, with the Limit's own failures added to
// NumOOMs. SetOOMHandler and AddOOMObserver apply to the Limit and are
// passed on to the upstream, so that its failures reach them too.
//
// Closing a Limit closes its upstream (the Limit owns it); a second Close
// returns nil. A Limit is safe for concurrent use.
type Limit struct {
	link
	hooks oomhooks.Hooks

	mu         sync.Mutex
	caps       map[int]uint64 // per device, when given as a fraction
	cap        uint64         // every device, when given in bytes
	devs       map[int]*limitDevice
	live       map[gpumem.Ptr]liveAlloc
	fractional bool   // the caps are per device (caps), not one (cap)
	hint       string // the OOM error's advice ("" for the default)
}

// LimitOption adjusts a Limit at construction.
type LimitOption func(*Limit)

// LimitHint sets the advice that the Limit's out-of-memory errors carry
// (for example, which configuration key set the limit).
func LimitHint(hint string) LimitOption { return func(l *Limit) { l.hint = hint } }

type limitDevice struct {
	used uint64 // bytes asked for by live allocations
	ooms int64  // failures at the cap
}

var _ gpumem.Adaptor = (*Limit)(nil)

// NewLimit returns a Limit of bytes per device over up.
func NewLimit(up gpumem.Allocator, bytes uint64, opts ...LimitOption) (*Limit, error) {
	if err := checkUpstream(up, "adaptor.Limit"); err != nil {
		return nil, err
	}
	if bytes == 0 {
		return nil, fmt.Errorf("adaptor.Limit: a limit of 0 bytes: %w", gpumem.ErrInvalidValue)
	}
	l := &Limit{link: link{up: up, name: "adaptor.Limit"}, cap: bytes, devs: map[int]*limitDevice{}, live: map[gpumem.Ptr]liveAlloc{}}
	for _, o := range opts {
		o(l)
	}
	return l, nil
}

// NewLimitFraction returns a Limit over up of fraction (in (0, 1]) of each
// device's total memory, as b.MemInfo reports it when NewLimitFraction is
// called, rounded down to a byte. b is the backend up allocates from (nil,
// or a nil pointer, is an error matching gpumem.ErrInvalidValue). A
// fraction so small that a device's cap rounds to 0 bytes refuses every
// allocation on it (it is a cap of 0, not no cap).
func NewLimitFraction(up gpumem.Allocator, b gpumem.Backend, fraction float64, opts ...LimitOption) (*Limit, error) {
	if err := checkUpstream(up, "adaptor.Limit"); err != nil {
		return nil, err
	}
	if nilcheck.Is(b) || !(fraction > 0 && fraction <= 1) {
		return nil, fmt.Errorf("adaptor.Limit: fraction %v (want (0, 1]) or nil backend: %w", fraction, gpumem.ErrInvalidValue)
	}
	n, err := b.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("adaptor.Limit: %w", err)
	}
	caps := make(map[int]uint64, n)
	for dev := 0; dev < n; dev++ {
		_, total, err := b.MemInfo(dev)
		if err != nil {
			return nil, fmt.Errorf("adaptor.Limit: device %d: %w", dev, err)
		}
		caps[dev] = uint64(float64(total) * fraction)
	}
	l := &Limit{link: link{up: up, name: "adaptor.Limit"}, caps: caps, fractional: true, devs: map[int]*limitDevice{}, live: map[gpumem.Ptr]liveAlloc{}}
	for _, o := range opts {
		o(l)
	}
	return l, nil
}

// Cap returns the limit of device dev in bytes (0 for a device a fractional
// Limit does not know: allocating on it fails with ErrInvalidValue).
func (l *Limit) Cap(dev int) uint64 {
	c, _ := l.capOf(dev)
	return c
}

// capOf returns the limit of device dev and whether the Limit knows dev.
func (l *Limit) capOf(dev int) (uint64, bool) {
	if l.fractional {
		c, ok := l.caps[dev]
		return c, ok
	}
	return l.cap, true
}

// Used returns the bytes asked for by the allocations live through l on
// device dev.
func (l *Limit) Used(dev int) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d := l.devs[dev]; d != nil {
		return d.used
	}
	return 0
}

// deviceLocked returns the state of device dev, made on first use. l.mu is
// held.
func (l *Limit) deviceLocked(dev int) *limitDevice {
	d := l.devs[dev]
	if d == nil {
		d = &limitDevice{}
		l.devs[dev] = d
	}
	return d
}

// Allocate takes size bytes from the upstream on s when the cap of
// s.Device leaves room for them, and fails with an *gpumem.OutOfMemoryError
// otherwise.
func (l *Limit) Allocate(size uint64, s gpumem.Stream) (gpumem.Ptr, error) {
	if l.closed.Load() {
		return 0, l.errClosed()
	}
	if size == 0 {
		return 0, l.errZero()
	}
	limit, known := l.capOf(s.Device)
	if !known {
		return 0, fmt.Errorf("adaptor.Limit: device %d: no such device: %w", s.Device, gpumem.ErrInvalidValue)
	}
	for attempt := 0; ; attempt++ {
		l.mu.Lock()
		d := l.deviceLocked(s.Device)
		if size <= limit && d.used <= limit-size {
			d.used += size
			l.mu.Unlock()
			break
		}
		used := d.used
		l.mu.Unlock()
		if l.hooks.Retry(s.Device, size, attempt) {
			continue
		}
		l.mu.Lock()
		d.ooms++
		l.mu.Unlock()
		hint := l.hint
		if hint == "" {
			hint = fmt.Sprintf("The adaptor.Limit of %s on device %d caps the bytes allocated through it; raise it or free memory allocated through it.",
				gpumem.FormatBytes(limit), s.Device)
		}
		oom := &gpumem.OutOfMemoryError{
			Allocator: l.name, Device: s.Device, Requested: size, Allocated: used, Limit: limit, Hint: hint,
		}
		st := l.Stats(s.Device)
		oom.Stats = &st
		l.hooks.Notify(func() *gpumem.OutOfMemoryError { return oom })
		return 0, oom
	}
	p, err := l.up.Allocate(size, s)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.devs[s.Device].used -= size
		return 0, err
	}
	l.live[p] = liveAlloc{dev: s.Device, size: size}
	return p, nil
}

// Deallocate frees p, allocated through l, through the upstream; s is the
// stream on which its last use is ordered.
func (l *Limit) Deallocate(p gpumem.Ptr, s gpumem.Stream) error {
	return l.deallocateLive(&l.mu, l.live, p, s, func(a liveAlloc) { l.devs[a.dev].used -= a.size })
}

// RecordStream marks p, allocated through l, as used on s (upstream).
func (l *Limit) RecordStream(p gpumem.Ptr, s gpumem.Stream) error {
	return l.recordLive(&l.mu, l.live, p, s)
}

// Stats returns the upstream's statistics of device dev, with the failures
// at the cap added to NumOOMs.
func (l *Limit) Stats(dev int) gpumem.MemoryStats {
	if l.closed.Load() {
		return gpumem.MemoryStats{}
	}
	st := l.up.Stats(dev)
	l.mu.Lock()
	if d := l.devs[dev]; d != nil {
		st.NumOOMs += d.ooms
	}
	l.mu.Unlock()
	return st
}

// ResetPeakStats resets the upstream's peaks of device dev (the Limit keeps
// none).
func (l *Limit) ResetPeakStats(dev int) {
	if !l.closed.Load() {
		l.up.ResetPeakStats(dev)
	}
}

// SetOOMHandler sets the handler asked before an allocation fails at the
// cap, and the upstream's.
func (l *Limit) SetOOMHandler(h gpumem.OOMHandler) {
	l.hooks.SetHandler(h)
	l.up.SetOOMHandler(h)
}

// AddOOMObserver adds an observer told of the failures at the cap, and of
// the upstream's.
func (l *Limit) AddOOMObserver(o gpumem.OOMObserver) {
	l.hooks.AddObserver(o)
	l.up.AddOOMObserver(o)
}

// Close closes the upstream, which releases everything allocated through
// l; every later call but Close and Stats fails with ErrClosed.
func (l *Limit) Close() error { return l.close() }
