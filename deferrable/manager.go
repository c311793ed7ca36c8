// The Manager: its options, construction and the checks every operation makes.
//
// See doc.go for an overview.

package deferrable

import (
	"fmt"
	"sync"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/history"
	"github.com/gpumem/gpumem/internal/streamcheck"
)

// ErrLocked is returned when an operation needs a buffer that nobody holds
// (Free, an explicit move down) and the buffer is held. It matches
// gpumem.ErrInvalidValue.
var ErrLocked = fmt.Errorf("deferrable: buffer is locked: %w", gpumem.ErrInvalidValue)

// Defaults for Options.
const (
	DefaultStagingBytes   = 8 << 20   // Options.StagingBytes: one staging buffer, 8 MiB
	DefaultStagingBuffers = 2         // Options.StagingBuffers: DMA of one chunk overlaps file I/O of the other
	DefaultHistorySize    = 4096      // Options.HistorySize: entries kept
	DefaultHostSlabBytes  = 256 << 20 // Options.HostSlabBytes: one pinned slab, 256 MiB
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

	closeMu sync.Mutex // serializes Close, and guards left
	left    closeLeft  // what Close has still to give back

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
	hist      history.Ring
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
	case opts.HistorySize > history.MaxSize:
		return nil, fmt.Errorf("deferrable: history size %d is over %d: %w", opts.HistorySize, history.MaxSize, gpumem.ErrInvalidValue)
	}
	m := &Manager{
		b: b, dev: dev, res: opts.Resource, policy: opts.Policy, cb: opts.Callbacks,
		devLim: opts.DeviceLimit, hostLm: opts.HostLimit,
		mv:    newMover(b, dev, opts.StagingBytes, opts.StagingBuffers),
		live:  make(map[*Buffer]struct{}),
		holds: make(map[gpumem.Stream]map[*Buffer]struct{}),
		hist:  history.New(opts.HistorySize),
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

// Device is the ordinal of the manager's device; -1 for a nil manager
// (what a failed New returns), which has none.
func (m *Manager) Device() int {
	if m == nil {
		return -1
	}
	return m.dev
}

func (m *Manager) checkStream(op string, s gpumem.Stream) error {
	if s.Device != m.dev {
		return fmt.Errorf("deferrable: %s: %v is not on device %d: %w", op, s, m.dev, gpumem.ErrInvalidValue)
	}
	if !s.IsDefault() {
		if err := streamcheck.Check(m.b, s); err != nil {
			return fmt.Errorf("deferrable: %s: %v is not a live stream: %w", op, s, err)
		}
	}
	return nil
}

// errNil is the error of method op on a nil *Manager (what a failed New
// returns).
func errNil(op string) error {
	return fmt.Errorf("deferrable: %s on a nil manager: %w", op, gpumem.ErrInvalidValue)
}

func (m *Manager) usable(op string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("deferrable: %s: %w", op, gpumem.ErrClosed)
	}
	return nil
}
