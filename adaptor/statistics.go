package adaptor

// See doc.go for an overview.

import (
	"errors"
	"sync"

	"github.com/gpumem/gpumem"
)

// SmallSize is the largest request that Statistics counts in the small pool
// (gpumem.StatSmall), as PyTorch's caching allocator sorts requests; larger
// ones count in the large pool.
const SmallSize = 1 << 20

// Statistics keeps statistics of the traffic that passes through it, per
// device, after RMM's statistics_resource_adaptor: a user sees what one
// component allocates even when the allocator beneath is shared.
//
// Stats returns the Statistics' own figures, in PyTorch's form: Allocation,
// Active, AllocatedBytes, ActiveBytes and RequestedBytes count the live
// allocations made through it and their bytes as asked for (an adaptor sees
// no rounding, so the three byte figures agree), sorted into the small and
// large pools by SmallSize; NumOOMs counts the allocations the upstream
// refused for lack of memory. The figures an adaptor cannot see (segments,
// reserved bytes, device calls, retries, fragmentation) are zero: read
// them from Upstream().Stats. ResetPeakStats resets the Statistics' own
// peaks only, never the upstream's, which other components may be
// measuring.
//
// The device is the stream's (s.Device) for Allocate, and the device the
// allocation was made on for Deallocate. Deallocate and RecordStream accept
// only pointers handed out through this Statistics (others:
// ErrInvalidValue, upstream not called). Stream ordering is the
// upstream's. SetOOMHandler and AddOOMObserver are the upstream's.
//
// Closing a Statistics closes its upstream (it owns it); a second Close
// returns nil, and Stats is zero from then on. A Statistics is safe for
// concurrent use.
type Statistics struct {
	link

	mu    sync.Mutex
	stats map[int]*gpumem.MemoryStats
	live  map[gpumem.Ptr]liveAlloc
}

var _ gpumem.Adaptor = (*Statistics)(nil)

// NewStatistics returns a Statistics over up, with every figure zero.
func NewStatistics(up gpumem.Allocator) (*Statistics, error) {
	if err := checkUpstream(up, "adaptor.Statistics"); err != nil {
		return nil, err
	}
	return &Statistics{link: link{up: up, name: "adaptor.Statistics"}, stats: map[int]*gpumem.MemoryStats{}, live: map[gpumem.Ptr]liveAlloc{}}, nil
}

// statsLocked returns the statistics of device dev, made on first use.
// s.mu is held.
func (s *Statistics) statsLocked(dev int) *gpumem.MemoryStats {
	st := s.stats[dev]
	if st == nil {
		st = &gpumem.MemoryStats{}
		s.stats[dev] = st
	}
	return st
}

// countLocked adds n allocations of size bytes to st. s.mu is held.
func countLocked(st *gpumem.MemoryStats, size uint64, n int64) {
	pool := gpumem.StatLarge
	if size <= SmallSize {
		pool = gpumem.StatSmall
	}
	b := n * int64(size)
	st.Allocation.Add(pool, n)
	st.Active.Add(pool, n)
	st.AllocatedBytes.Add(pool, b)
	st.ActiveBytes.Add(pool, b)
	st.RequestedBytes.Add(pool, b)
}

// Allocate takes size bytes from the upstream on s and counts them.
func (s *Statistics) Allocate(size uint64, st gpumem.Stream) (gpumem.Ptr, error) {
	if s.closed.Load() {
		return 0, s.errClosed()
	}
	if size == 0 {
		return 0, s.errZero()
	}
	p, err := s.up.Allocate(size, st)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if errors.Is(err, gpumem.ErrOutOfMemory) {
			s.statsLocked(st.Device).NumOOMs++
		}
		return 0, err
	}
	s.live[p] = liveAlloc{dev: st.Device, size: size}
	countLocked(s.statsLocked(st.Device), size, 1)
	return p, nil
}

// Deallocate frees p, allocated through s, through the upstream, and
// uncounts it; st is the stream on which its last use is ordered.
func (s *Statistics) Deallocate(p gpumem.Ptr, st gpumem.Stream) error {
	return s.deallocateLive(&s.mu, s.live, p, st, func(a liveAlloc) { countLocked(s.statsLocked(a.dev), a.size, -1) })
}

// RecordStream marks p, allocated through s, as used on st (upstream).
func (s *Statistics) RecordStream(p gpumem.Ptr, st gpumem.Stream) error {
	return s.recordLive(&s.mu, s.live, p, st)
}

// Stats returns the statistics of the traffic through s on device dev.
func (s *Statistics) Stats(dev int) gpumem.MemoryStats {
	if s.closed.Load() {
		return gpumem.MemoryStats{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.stats[dev]; st != nil {
		return *st
	}
	return gpumem.MemoryStats{}
}

// ResetPeakStats sets every peak of s's own statistics of device dev to its
// current value; the upstream's peaks are left alone.
func (s *Statistics) ResetPeakStats(dev int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.stats[dev]; st != nil {
		st.ResetPeaks()
	}
}

// SetOOMHandler sets the upstream's OOM handler.
func (s *Statistics) SetOOMHandler(h gpumem.OOMHandler) { s.up.SetOOMHandler(h) }

// AddOOMObserver adds an observer to the upstream.
func (s *Statistics) AddOOMObserver(o gpumem.OOMObserver) { s.up.AddOOMObserver(o) }

// Close closes the upstream, which releases everything allocated through
// s; every later call but Close and Stats fails with ErrClosed.
func (s *Statistics) Close() error { return s.close() }
