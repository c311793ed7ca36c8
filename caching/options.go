package caching

import (
	"fmt"
	"math/bits"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/config"
	"github.com/gpumem/gpumem/internal/history"
)

// Size constants of the allocator, PyTorch's.
const (
	MinBlockSize    = 512      // every block is a multiple of this
	SmallSize       = 1 << 20  // requests up to this size come from the small pool
	SmallBuffer     = 2 << 20  // size of a small-pool segment
	LargeBuffer     = 20 << 20 // segment for large requests under MinLargeAlloc; the oversize reuse bound
	MinLargeAlloc   = 10 << 20 // requests from this size get a segment of their own size
	RoundLarge      = 2 << 20  // large segments are multiples of this
	maxRequest      = 1 << 62  // larger requests are invalid
	maxChunk        = 1 << 40  // the largest expandable chunk: 1 TiB
	maxHandleChunks = config.MaxHandleChunks
	maxDivisions    = 1 << 20          // the most roundup divisions of an interval (config's bound)
	mb              = 1 << 20          // one MiB
	numIntervals    = config.Intervals // power-of-two intervals of roundup_power2_divisions, from 1 MiB
)

// Upstream is where the allocator takes device memory for its regular
// (non-expandable) segments. The default is the backend's Malloc and Free; a
// managed-memory allocator plugs in MallocManaged here and reuses every pool
// rule of this package.
type Upstream interface {
	Alloc(dev int, size uint64) (gpumem.Ptr, error)
	Free(dev int, p gpumem.Ptr) error
}

// Division is one interval of roundup_power2_divisions, as config parses
// it: sizes in the power-of-two interval starting at UpToMB MiB (PyTorch's
// keys) are rounded to one of Divisions steps between two powers of two.
// UpToMB 0 is the catch-all (">"), covering the last listed interval and
// every one after it, as in PyTorch; a single Division with UpToMB 0 applies
// to all sizes.
type Division = config.Division

// Options configure an Allocator. The zero value is PyTorch's default
// configuration with every extension off; DefaultOptions turns the
// project's extensions on. On the simulator the zero value reserves exactly
// the bytes PyTorch 2.11's allocator reserves on an H200, natively and with
// ExpandableSegments alone, on the fifty-four workloads of testdata/phase
// (TestPyTorchFootprintsOnPhaseWorkloads), so a configuration can be
// compared with PyTorch's on any trace without a GPU (BenchmarkAgainstPyTorch).
type Options struct {
	// MaxSplitSize: blocks of this size or more are never split, and an
	// oversize request reuses an oversize cached block only when the block is
	// smaller than the request plus LargeBuffer. 0 means unlimited.
	MaxSplitSize uint64
	// RoundupPower2Divisions rounds requests to power-of-two divisions
	// (PyTorch's roundup_power2_divisions). Empty: round to 512 bytes.
	RoundupPower2Divisions []Division
	// GarbageCollectionThreshold in (0, 1): when reserved memory exceeds this
	// fraction of the allowed memory (the memory fraction's cap, or the
	// device's capacity), cached blocks not reused recently are freed, oldest
	// first, before the device is asked for more. 0 disables.
	GarbageCollectionThreshold float64
	// ExpandableSegments maps physical memory on demand into one large virtual
	// range per stream and pool (the backend's virtual memory API). Falls back
	// to regular segments, with a message through Logf, where the device has
	// no virtual memory management.
	ExpandableSegments bool
	// ExpandableBestFit places every request of an expandable segment at
	// the best fit by size, as PyTorch does, and maps or moves free chunks
	// there when the block lacks mapped memory. Without it (configuration
	// key expandable_placement:mapped_first) a request that the best fit
	// would have to map chunks for is first served from a mapped run
	// elsewhere (the rule caching/doc.go describes): fewer device calls on
	// workloads that alternate phases, but a larger footprint where
	// requests sit just under a chunk (beam search: 1.100 of the floor
	// against PyTorch expandable's 1.063 on an H200). DefaultOptions set it;
	// with ExpandableSlack it keeps the ten recorded traces at or under the
	// best of PyTorch native, PyTorch expandable and the driver pool, at
	// 0.32-0.94 of PyTorch expandable's host time per pair
	// (docs/gpu-results.md). No effect without ExpandableSegments.
	ExpandableBestFit bool
	// ExpandableSlack, with ReleaseBeforeGrow, lets expandable segments map
	// new physical memory instead of moving free chunks while reserved
	// memory stays within this fraction over the allocated high-water mark
	// (or under the reserved high-water mark, if higher). A move unmaps a
	// free chunk and maps it again where it is needed, an unmap, a map and
	// an access grant of tens of microseconds each; mapping new memory
	// costs a create and the same grant but no unmap, and leaves the free
	// chunk mapped for the next request that fits there. So a small slack
	// saves most of the moves that keep reserved memory at its high-water
	// mark early in a run, while the allocated high-water mark still rises,
	// and bounds what it costs in footprint. 0: move whenever a mapping
	// would raise reserved memory past its high-water mark.
	// Configuration key expandable_slack.
	ExpandableSlack float64
	// ExpandableHandleChunks is the most chunks that one physical allocation
	// of an expandable segment covers: a mapping that needs a run of
	// consecutive unmapped chunks creates one allocation for up to this many
	// of them, maps it with one call and grants access to it with one.
	// What a mapping costs on a GPU is counted in allocations, not bytes
	// (on an H200 a create, map and access grant of one allocation take
	// about 60 µs from 2 MiB to 200 MiB, and each more allocation in the
	// same grant about 40 µs more), so larger allocations make fewer and
	// cheaper mappings. The price: an allocation is unmapped whole, so a
	// free chunk gives its memory back only with the rest of its
	// allocation, and only a chunk that is an allocation of its own moves
	// (caching/doc.go, "Allocations of several chunks"). 0 or 1: one
	// allocation a chunk, as PyTorch. Configuration key
	// expandable_handle_chunks.
	ExpandableHandleChunks int
	// ExpandableSmallChunk and ExpandableLargeChunk are the mapping units of the
	// small and large pools' expandable segments, rounded up to the device's
	// granularity. 0: 2 MiB and 20 MiB, as PyTorch.
	ExpandableSmallChunk, ExpandableLargeChunk uint64
	// SmallSegment is the size of a small-pool segment (a multiple of 2 MiB);
	// 0: 2 MiB, as PyTorch. Larger segments mean fewer device allocations
	// while the small pool grows.
	SmallSegment uint64
	// MinLargeSegment is the least size of a large-pool segment (a multiple
	// of 2 MiB); 0: PyTorch's sizes (20 MiB for requests under 10 MiB, else
	// the request rounded to 2 MiB). Larger segments mean fewer device
	// allocations while memory grows; their free remainders serve later
	// requests.
	MinLargeSegment uint64
	// SegmentDivisor, when positive, caps the enlargement by MinLargeSegment
	// at a SegmentDivisor-th of the memory the device already holds (but not
	// under 20 MiB): segments grow with the workload, so a small one is not
	// rounded up to segments sized for a large one. 0: MinLargeSegment as is.
	SegmentDivisor int
	// GrowSegments backs large regular segments with the backend's virtual
	// memory API: physical memory mapped into a virtual range reserved with
	// room beyond it. A wholly free segment then grows in place to serve a
	// larger request (one create, map and access call for the difference)
	// instead of being freed, which synchronizes the device and costs
	// hundreds of microseconds for a large segment, and replaced. Off where
	// the device has no virtual memory management, with Upstream set, for
	// capture pools and while a capture is underway.
	GrowSegments bool

	// PerProcessMemoryFraction in (0, 1] caps reserved memory at this fraction
	// of the device's capacity. 0: no cap.
	PerProcessMemoryFraction float64
	// CrossStreamReuse lets a request reuse a free block cached on another
	// stream, after making the requesting stream wait for the owner stream,
	// instead of growing the device's footprint. PyTorch never does this.
	CrossStreamReuse bool
	// ReleaseBeforeGrow frees (or, for expandable segments, unmaps) wholly free
	// cached memory before asking the device for more whenever the request
	// would otherwise raise the reserved high-water mark. PyTorch frees cached
	// memory only when the device is out of memory.
	ReleaseBeforeGrow bool
	// GrowthSlack, with ReleaseBeforeGrow, lets reserved memory grow by new
	// regular segments without releasing cached memory while it stays within
	// this fraction over the allocated high-water mark: fewer synchronizing
	// frees, at a bounded cost in footprint. 0: release whenever reserved
	// memory would pass its own high-water mark. Expandable segments have
	// their own, ExpandableSlack.
	GrowthSlack float64
	// KeepSleepBuffer keeps the pinned host memory that Sleep saves
	// KeepOnSleep allocations to after Wake, for the next Sleep (Close
	// frees it): a cycle of Sleep and Wake then pins host memory once.
	// Otherwise Wake frees it.
	KeepSleepBuffer bool
	// HistorySize is the number of memory history entries kept per device
	// (a ring); 0 records none.
	HistorySize int
	// Upstream supplies regular segments; nil: the backend's Malloc and Free.
	Upstream Upstream
	// OnNewSegment, if set, is called for each new regular segment with the
	// device's lock held (it may call the backend, never the allocator). An
	// error fails the segment, which is returned to Upstream.
	OnNewSegment func(dev int, p gpumem.Ptr, size uint64) error
	// Logf receives one-off diagnostics (such as the expandable-segments
	// fallback); nil discards them.
	Logf func(format string, args ...any)

	// bestFitOnly turns off the search for the window that needs the
	// fewest chunks mapped (cheapestWindowLocked), for the tests that
	// measure what it saves.
	bestFitOnly bool
}

// Segment sizes of DefaultOptions.
const (
	DefaultSmallSegment    = 16 << 20
	DefaultMinLargeSegment = 256 << 20
)

// DefaultSegmentDivisor is DefaultOptions' SegmentDivisor: a new large
// segment is at most an eighth of what the device holds.
const DefaultSegmentDivisor = 8

// DefaultGrowthSlack is DefaultOptions' GrowthSlack: reserved memory may
// grow to three sixteenths over the allocated high-water mark before cached
// segments are released to make room. Over seven recorded traces it is the
// largest slack that raises no footprint, and it saves every free that an
// eighth made on three of them (docs/gpu-results.md).
const DefaultGrowthSlack = 0.1875

// DefaultExpandableSlack is DefaultOptions' ExpandableSlack: expandable
// segments may reserve up to 3 % over the allocated high-water mark before
// they move free chunks instead of mapping new memory. A move costs about
// 75 µs of host time on an H200. On the ten recorded traces, with best-fit
// placement, no slack keeps every footprint under the best anchor but
// takes up to 1.64 times PyTorch expandable's time (the U-Net's moves);
// 2 % leaves two traces over PyTorch's time, 3 % none, and 4 % puts two
// over the driver pool's footprint (1.032 of the floor on gpt2 and the KV
// cache server). The driver pool itself reserves more than 3 % over the
// floor on 85 % of 454 generated workloads measured there
// (docs/gpu-results.md has the figures).
const DefaultExpandableSlack = 0.03

// DefaultOptions are PyTorch's defaults plus the project's extensions:
// cross-stream reuse, release before growth with DefaultGrowthSlack,
// growable segments, and segments of at least DefaultSmallSegment (small
// pool) and DefaultMinLargeSegment (large pool, but no more than a
// DefaultSegmentDivisor-th of what the device holds). Together they make
// fewer than half of PyTorch's device calls on the recorded traces (each
// allocation tens of microseconds on a GPU, each free of a large segment
// hundreds) while the footprint stays below PyTorch's there;
// docs/gpu-results.md has the figures they were chosen on. Regular segments
// cannot be defragmented, though: on generated workloads that no default
// was chosen on (BenchmarkAgainstPyTorch), the footprint is below PyTorch's
// on 97-98 % of them and up to 1.19 times PyTorch's on the rest, and on
// one of four traces recorded after the defaults were set (beam search,
// whose caches grow a little every token) it is 1.05 times PyTorch's;
// expandable segments are the configuration that stays under it. For
// expandable segments (off by default, as in PyTorch) they add best-fit
// placement and DefaultExpandableSlack.
func DefaultOptions() Options {
	return Options{CrossStreamReuse: true, ReleaseBeforeGrow: true, GrowthSlack: DefaultGrowthSlack,
		ExpandableBestFit: true, ExpandableSlack: DefaultExpandableSlack,
		GrowSegments: true, SegmentDivisor: DefaultSegmentDivisor,
		SmallSegment: DefaultSmallSegment, MinLargeSegment: DefaultMinLargeSegment}
}

// validate checks the options and builds the division table.
func (o *Options) validate() (table [numIntervals]int, err error) {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("caching: %s: %s: %w", key, fmt.Sprintf(format, args...), gpumem.ErrInvalidValue)
	}
	if o.MaxSplitSize != 0 && o.MaxSplitSize <= LargeBuffer {
		// PyTorch requires more than 20 MiB: smaller values would keep blocks
		// that new 20 MiB segments are carved into from ever being split.
		return table, bad("max_split_size_mb", "%d bytes must be more than %d MiB", o.MaxSplitSize, LargeBuffer/mb)
	}
	if g := o.GarbageCollectionThreshold; g < 0 || g >= 1 || g != g {
		return table, bad("garbage_collection_threshold", "%v must be in [0, 1)", g)
	}
	if f := o.PerProcessMemoryFraction; f < 0 || f > 1 || f != f {
		return table, bad("per_process_memory_fraction", "%v must be in [0, 1]", f)
	}
	if f := o.GrowthSlack; f < 0 || f > 16 || f != f {
		return table, bad("growth slack", "%v must be in [0, 16]", f)
	}
	if f := o.ExpandableSlack; f < 0 || f > 1 || f != f {
		return table, bad("expandable_slack", "%v must be in [0, 1]", f)
	}
	if n := o.ExpandableHandleChunks; n < 0 || n > maxHandleChunks {
		return table, bad("expandable_handle_chunks", "%d is not in [0, %d]", n, maxHandleChunks)
	}
	if o.SegmentDivisor < 0 {
		return table, bad("segment divisor", "%d is negative", o.SegmentDivisor)
	}
	if o.HistorySize < 0 || o.HistorySize > history.MaxSize {
		return table, bad("history_size", "%d is not in [0, %d]", o.HistorySize, history.MaxSize)
	}
	for _, c := range []uint64{o.SmallSegment, o.MinLargeSegment} {
		if c%RoundLarge != 0 || c > maxRequest {
			return table, bad("segment size", "%d is not a multiple of %d", c, RoundLarge)
		}
	}
	for _, c := range []uint64{o.ExpandableSmallChunk, o.ExpandableLargeChunk} {
		if c != 0 && c%MinBlockSize != 0 {
			return table, bad("expandable_segments", "chunk size %d is not a multiple of %d", c, MinBlockSize)
		}
		if c > maxChunk {
			return table, bad("expandable_segments", "chunk size %d is over %d", c, uint64(maxChunk))
		}
	}
	table, err = divisionTable(o.RoundupPower2Divisions)
	if err != nil {
		return table, err
	}
	return table, nil
}

// divisionTable builds PyTorch's 16-entry table: entry i covers sizes in
// [2^i MiB, 2^(i+1) MiB), entry 0 also everything below 1 MiB and entry 15
// everything from 32 GiB. The first listed interval also covers every
// interval before it; ">" covers every interval after the last listed one.
func divisionTable(divs []Division) (table [numIntervals]int, err error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("caching: roundup_power2_divisions: %s: %w", fmt.Sprintf(format, args...), gpumem.ErrInvalidValue)
	}
	last := -1
	for _, dv := range divs {
		if d := dv.Divisions; d < 0 || (d != 0 && d&(d-1) != 0) {
			return table, bad("%d divisions is not a power of two", d)
		}
		if dv.Divisions > maxDivisions {
			return table, bad("%d divisions is over %d", dv.Divisions, maxDivisions)
		}
		if last == numIntervals {
			return table, bad("\">\" must be the last interval")
		}
		if dv.UpToMB == 0 {
			last = numIntervals
			continue
		}
		if dv.UpToMB&(dv.UpToMB-1) != 0 {
			return table, bad("interval %d MB is not a power of two", dv.UpToMB)
		}
		idx := min(bits.Len64(dv.UpToMB)-1, numIntervals-1)
		if idx <= last {
			return table, bad("interval %d MB is not in increasing order", dv.UpToMB)
		}
		last = idx
	}
	return config.DivisionTable(divs), nil
}

// divisionsFor returns the divisions configured for size.
func divisionsFor(table *[numIntervals]int, size uint64) int {
	logSize := bits.Len64(size) - 1
	idx := 0
	if logSize > 20 {
		idx = logSize - 20
	}
	if idx >= numIntervals {
		idx = numIntervals - 1
	}
	return table[idx]
}

// roundSize is PyTorch's round_size: at least 512 bytes; with divisions > 1
// configured for the size (and size > 512 × divisions), the next of the
// divisions steps between two powers of two; otherwise a multiple of 512.
func roundSize(table *[numIntervals]int, size uint64) uint64 {
	if size < MinBlockSize {
		return MinBlockSize
	}
	if d := uint64(divisionsFor(table, size)); d > 1 && size > MinBlockSize*d {
		return roundPow2Division(size, d)
	}
	return (size + MinBlockSize - 1) &^ (MinBlockSize - 1)
}

func roundPow2Division(size, divisions uint64) uint64 {
	if size&(size-1) == 0 {
		return size
	}
	floor := uint64(1) << (bits.Len64(size) - 1)
	step := floor >> (bits.Len64(divisions) - 1)
	if step == 0 {
		return floor << 1
	}
	r := size &^ (step - 1)
	if r == size {
		return size
	}
	return r + step
}

// segmentSizeLocked is PyTorch's get_allocation_size.
func segmentSize(size uint64) uint64 {
	switch {
	case size <= SmallSize:
		return SmallBuffer
	case size < MinLargeAlloc:
		return LargeBuffer
	default:
		return (size + RoundLarge - 1) &^ (RoundLarge - 1)
	}
}
