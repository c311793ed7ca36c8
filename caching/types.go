// The allocator's types: blocks, segments, pools, devices, and New.
//
// See doc.go for an overview.

package caching

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/history"
	"github.com/gpumem/gpumem/internal/oomhooks"
	"github.com/gpumem/gpumem/internal/ptrmap"
	"github.com/gpumem/gpumem/internal/streamcheck"
)

// PoolID names a private memory pool used by graph captures. Captures that
// pass the same PoolID share one pool.
type PoolID uint64

// block is a range of a segment: allocated, pending (freed, awaiting
// events of other streams) or free (in its pool's tree for its stream).
type block struct {
	addr      gpumem.Ptr
	size      uint64
	requested uint64
	stream    gpumem.Stream // the stream whose pool the block returns to
	pool      *pool
	tree      *tree // the tree of pool and stream that the block is cached in when free
	seg       *segment
	prev      *block // neighbours in address order within the segment
	next      *block

	allocated bool
	inTree    bool
	keep      bool // KeepOnSleep: Sleep saves the contents while allocated
	counted   bool // counted in inactive_split while in the tree
	events    int  // outstanding stream-use events
	uses      []gpumem.Stream
	gcBase    uint64 // pool.calls when the block was cached

	left, right *block // treap links
	prio        uint32
}

func (b *block) isSplit() bool { return b.prev != nil || b.next != nil }

// segment is one regular device allocation, or one expandable virtual range.
type segment struct {
	addr   gpumem.Ptr
	size   uint64
	pool   *pool
	stream gpumem.Stream
	head   *block
	exp    *expandable // non-nil for an expandable segment
	grow   *growable   // non-nil for a growable segment
}

// pool is a set of free blocks of one kind (small or large), per stream.
type pool struct {
	small   bool
	st      int          // gpumem.StatSmall or gpumem.StatLarge
	private *privatePool // nil for the device's default pools
	trees   map[uintptr]*tree
	exp     map[uintptr]*segment // expandable segment per stream
	calls   uint64               // free-block searches, the clock of garbage collection

	lastStream uintptr
	lastTree   *tree
}

func newPool(small bool, pp *privatePool) *pool {
	st := gpumem.StatLarge
	if small {
		st = gpumem.StatSmall
	}
	return &pool{small: small, st: st, private: pp, trees: map[uintptr]*tree{}, exp: map[uintptr]*segment{}}
}

func (p *pool) statType() int { return p.st }

// treeFor returns the stream's tree, creating it when create is set.
func (p *pool) treeFor(stream uintptr, create bool) *tree {
	if p.lastTree != nil && p.lastStream == stream {
		return p.lastTree
	}
	t := p.trees[stream]
	if t == nil {
		if !create {
			return nil
		}
		t = &tree{}
		p.trees[stream] = t
	}
	p.lastStream, p.lastTree = stream, t
	return t
}

// privatePool holds the memory of graph captures (PyTorch's graph pools).
type privatePool struct {
	id       PoolID
	small    *pool
	large    *pool
	users    int  // captures and graphs holding the pool
	segments int  // live segments
	released bool // ReleasePool called for every user: free segments as they empty
}

type pendingEvent struct {
	ev gpumem.Event
	b  *block
}

type capture struct {
	stream gpumem.Stream
	id     uint64 // backend capture id; 0 until known
	pool   *privatePool
}

// device is the per-device state, guarded by mu.
type device struct {
	mu     sync.Mutex
	a      *Allocator
	id     int
	total  uint64 // device capacity
	limit  uint64 // memory fraction cap (when capped)
	capped bool   // a memory fraction applies: limit caps, even at 0 bytes

	small, large *pool
	private      map[PoolID]*privatePool
	live         ptrmap.Map[*block] // allocated and pending blocks, by address
	segments     map[*segment]struct{}
	// okStream is the last stream of this device that passed its check,
	// while the backend's stream epoch read okEpoch-1 (0: none): the hot
	// path's check, two compares under the lock it takes anyway.
	okStream gpumem.Stream
	okEpoch  uint64
	stats    gpumem.MemoryStats
	spare    []*block

	pending      map[uintptr][]pendingEvent // per use stream, in record order
	npending     int
	deferred     []*block // freed during capture; events recorded once captures end
	events       []gpumem.Event
	streamEvents map[uintptr]gpumem.Event // for cross-stream reuse
	captures     []capture

	expOn        bool
	expReason    string
	growOn       bool // growable segments on
	gran         uint64
	keepChunk    uint64             // while a mapping runs: the chunk size whose unmapped handles it reuses
	handleChunks uint64             // the most chunks of an expandable segment one physical allocation covers (at least 1)
	kept         []gpumem.MemHandle // handles unmapped for that mapping, not yet reused
	// orphans are physical allocations and virtual ranges whose release
	// the device refused: retried by EmptyCache and Close (orphans.go).
	orphans      []physical
	orphanRanges []orphanRange
	noGhosts     bool     // the backend refused to map a handle twice: moves unmap (ghost.go)
	scratch      []bool   // freeChunks' table, reused
	scratchN     []uint64 // cheapestWindowLocked's counts, reused

	history history.Ring // the most recent events (Options.HistorySize)

	highWater uint64 // reserved bytes' high-water mark for release before growth (ResetPeakStats leaves it)
	allocHigh uint64 // allocated bytes' high-water mark (ResetPeakStats leaves it)

	gc       bool   // garbage collection on: count free-block searches
	maxSplit uint64 // Options.MaxSplitSize
	closed   bool

	asleep bool       // Sleep released the physical memory (sleep.go)
	sleep  sleepState // what Wake restores, and the buffers Sleep uses
}

// Allocator is a caching allocator with PyTorch's semantics over any
// gpumem.Backend. See the package documentation for the design.
type Allocator struct {
	b        gpumem.Backend
	opts     Options
	table    [numIntervals]int
	upstream Upstream
	devs     []*device
	closed   atomic.Bool
	checked  streamcheck.Cache // checks streams, remembering those that passed
	epoch    *atomic.Uint64    // the backend's stream epoch (gpumem.StreamChecker), or nil

	hooks    oomhooks.Hooks
	nextPool atomic.Uint64
}

// backendUpstream is the default Upstream: the backend's Malloc and Free.
type backendUpstream struct{ b gpumem.Backend }

// Alloc takes size bytes of device dev with the backend's Malloc.
func (u backendUpstream) Alloc(dev int, size uint64) (gpumem.Ptr, error) {
	return u.b.Malloc(dev, size)
}

// Free returns p with the backend's Free.
func (u backendUpstream) Free(dev int, p gpumem.Ptr) error { return u.b.Free(dev, p) }

// New returns an allocator over b configured by opts. It asks b for its
// devices and their capacities; it allocates nothing until asked.
func New(b gpumem.Backend, opts Options) (*Allocator, error) {
	if b == nil {
		return nil, fmt.Errorf("caching: nil backend: %w", gpumem.ErrInvalidValue)
	}
	table, err := opts.validate()
	if err != nil {
		return nil, err
	}
	n, err := b.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("caching: counting devices: %w", err)
	}
	a := &Allocator{b: b, opts: opts, table: table, upstream: opts.Upstream}
	a.checked.Init(b)
	if sc, ok := b.(gpumem.StreamChecker); ok {
		a.epoch = sc.StreamEpoch()
	}
	if a.upstream == nil {
		a.upstream = backendUpstream{b}
	}
	for i := 0; i < n; i++ {
		_, total, err := b.MemInfo(i)
		if err != nil {
			return nil, fmt.Errorf("caching: device %d memory info: %w", i, err)
		}
		d := &device{
			a: a, id: i, total: total,
			small: newPool(true, nil), large: newPool(false, nil),
			private:  map[PoolID]*privatePool{},
			segments: map[*segment]struct{}{}, pending: map[uintptr][]pendingEvent{},
			streamEvents: map[uintptr]gpumem.Event{},
		}
		if opts.PerProcessMemoryFraction > 0 {
			// A fraction whose cap rounds to 0 bytes is a cap of 0:
			// every allocation is out of memory (not no cap at all).
			d.limit, d.capped = uint64(opts.PerProcessMemoryFraction*float64(total)), true
		}
		d.gc = opts.GarbageCollectionThreshold > 0
		d.maxSplit = opts.MaxSplitSize
		d.history = history.New(opts.HistorySize)
		if opts.ExpandableSegments {
			d.initExpandable()
		}
		if opts.GrowSegments && opts.Upstream == nil {
			if ok, why := vmmDefault(b); ok {
				d.initGrowable()
			} else {
				a.logf("caching: growable segments are off on device %d: %s", i, why)
			}
		}
		a.devs = append(a.devs, d)
	}
	return a, nil
}

func (a *Allocator) logf(format string, args ...any) {
	if a.opts.Logf != nil {
		a.opts.Logf(format, args...)
	}
}

func (a *Allocator) device(dev int) (*device, error) {
	if a.closed.Load() {
		return nil, fmt.Errorf("caching: allocator closed: %w", gpumem.ErrClosed)
	}
	if dev < 0 || dev >= len(a.devs) {
		return nil, fmt.Errorf("caching: device %d out of range (%d devices): %w", dev, len(a.devs), gpumem.ErrInvalidValue)
	}
	return a.devs[dev], nil
}

func errClosed() error { return fmt.Errorf("caching: allocator closed: %w", gpumem.ErrClosed) }

// errNil is the error of method op on a nil *Allocator (what a failed New
// returns).
func errNil(op string) error {
	return fmt.Errorf("caching: %s on a nil allocator: %w", op, gpumem.ErrInvalidValue)
}

// checkStream makes sure s is a live stream of a device and the backend
// open, so that a bogus or destroyed stream is refused with ErrInvalidValue
// before anything changes, and a closed backend with ErrClosed, even where a
// cached block needs no call to the backend. A backend that is a
// gpumem.StreamChecker answers in process (the native backends and the
// simulator are); any other is asked the stream's capture status, the
// cheapest question of the vendor library. A stream already checked is
// answered from memory (streamcheck.Cache).
func (a *Allocator) checkStream(s gpumem.Stream) error {
	if err := a.checked.Check(s); err != nil {
		return fmt.Errorf("caching: %v: %w", s, err)
	}
	return nil
}

// vmmDefault reports whether features that use the backend's virtual memory
// API by default (growable segments) are on: the backend's advice where it
// gives one (HIP before 7.0 says no). Expandable segments, which the user
// asks for explicitly, are not affected.
func vmmDefault(b gpumem.Backend) (bool, string) {
	if v, ok := b.(gpumem.VirtualMemoryAdvisor); ok {
		return v.VirtualMemoryDefault()
	}
	return true, ""
}

// streamKnownLocked reports whether s passed its check since the backend's
// stream epoch last moved (no stream destroyed, the backend not closed).
// d.mu must be held; s is a stream of d.
func (d *device) streamKnownLocked(s gpumem.Stream) bool {
	e := d.a.epoch
	return e != nil && d.okEpoch != 0 && d.okStream == s && d.okEpoch == e.Load()+1
}

// checkStreamUnlocked checks s as checkStream does, with d.mu released for
// the check, and on success remembers s for streamKnownLocked. d.mu must be
// held; it is held again on return.
func (d *device) checkStreamUnlocked(s gpumem.Stream) error {
	var e uint64
	if d.a.epoch != nil {
		e = d.a.epoch.Load() + 1
	}
	d.mu.Unlock()
	err := d.a.checkStream(s)
	d.mu.Lock()
	if err == nil && e != 0 {
		d.okStream, d.okEpoch = s, e
	}
	return err
}
