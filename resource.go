package gpumem

import "time"

// Resource is the allocator contract, after RMM's device_memory_resource.
//
// Allocate returns size bytes (size > 0) of device memory usable in stream
// order on s: work queued on s after Allocate returns may use it at once, and
// work on other streams must first be ordered after s (or the caller records
// the use with RecordStream). Deallocate returns memory obtained from this
// resource; s is the stream on which the last use is ordered. Memory is never
// handed out again while work on another stream may still be using it.
//
// Errors: a zero or impossibly large size, a pointer this resource did not hand
// out, or a second Deallocate match ErrInvalidValue; exhaustion matches
// ErrOutOfMemory (an *OutOfMemoryError); any call after Close matches ErrClosed.
// Implementations are safe for concurrent use.
type Resource interface {
	Allocate(size uint64, s Stream) (Ptr, error)
	Deallocate(p Ptr, s Stream) error
}

// StreamRecorder is implemented by resources that track cross-stream use.
// RecordStream marks p as used on s: when p is freed, its memory is not reused
// until the work queued on s up to the free has completed.
type StreamRecorder interface {
	RecordStream(p Ptr, s Stream) error
}

// OOMHandler is called by an allocator, with no lock held, when it is about to
// fail an allocation for lack of memory. It may free memory (spill, drop
// caches) and returns true to ask for one more attempt. attempt counts from 0.
type OOMHandler func(dev int, requested uint64, attempt int) (retry bool)

// OOMObserver is told of every out-of-memory failure, after the allocator's
// lock is released.
type OOMObserver func(err *OutOfMemoryError)

// Stat is one statistic in PyTorch's form.
type Stat struct {
	Current   int64 `json:"current"`
	Peak      int64 `json:"peak"`
	Allocated int64 `json:"allocated"` // total increments
	Freed     int64 `json:"freed"`     // total decrements
}

// Add changes the statistic by n (negative to decrease).
func (s *Stat) Add(n int64) {
	if n == 0 {
		return
	}
	s.Current += n
	if n > 0 {
		s.Allocated += n
		if s.Current > s.Peak {
			s.Peak = s.Current
		}
	} else {
		s.Freed -= n
	}
}

// ResetPeak sets the peak to the current value.
func (s *Stat) ResetPeak() { s.Peak = s.Current }

// Pool kinds indexing a StatArray, as PyTorch's StatType.
const (
	StatAll   = 0
	StatSmall = 1
	StatLarge = 2
)

// StatArray is a statistic for all, small and large pools.
type StatArray [3]Stat

// Add changes the aggregate and the given pool's statistic.
func (a *StatArray) Add(pool int, n int64) {
	a[StatAll].Add(n)
	if pool != StatAll {
		a[pool].Add(n)
	}
}

// MemoryStats are an allocator's statistics for one device, with PyTorch's
// names and meanings, plus figures PyTorch lacks.
type MemoryStats struct {
	Allocation         StatArray `json:"allocation"`           // blocks handed out
	Segment            StatArray `json:"segment"`              // device allocations held
	Active             StatArray `json:"active"`               // blocks allocated or awaiting their streams
	InactiveSplit      StatArray `json:"inactive_split"`       // free blocks split from a segment with live parts
	AllocatedBytes     StatArray `json:"allocated_bytes"`      // bytes handed out (rounded)
	ReservedBytes      StatArray `json:"reserved_bytes"`       // bytes held from the device
	ActiveBytes        StatArray `json:"active_bytes"`         // bytes in active blocks
	InactiveSplitBytes StatArray `json:"inactive_split_bytes"` // bytes in inactive split blocks
	RequestedBytes     StatArray `json:"requested_bytes"`      // bytes asked for (unrounded)

	NumAllocRetries   int64 `json:"num_alloc_retries"`
	NumOOMs           int64 `json:"num_ooms"`
	NumSyncAllStreams int64 `json:"num_sync_all_streams"`
	NumDeviceAlloc    int64 `json:"num_device_alloc"`
	NumDeviceFree     int64 `json:"num_device_free"`

	// Beyond PyTorch.
	LargestFreeBlock    uint64  `json:"largest_free_block"`    // largest block handed out without a new segment
	Fragmentation       float64 `json:"fragmentation"`         // 1 - largest free / free (0 when nothing is free)
	PendingReleaseBytes int64   `json:"pending_release_bytes"` // bytes freed but awaiting other streams
	CrossStreamReuses   int64   `json:"cross_stream_reuses"`   // free blocks reused on another stream after a wait
	SegmentGrowths      int64   `json:"segment_growths"`       // wholly free segments grown in place instead of replaced
}

// HistoryAction names what a history entry records.
type HistoryAction string

// History actions, as in PyTorch's memory history.
const (
	ActionAlloc        HistoryAction = "alloc"
	ActionFreeRequest  HistoryAction = "free_requested"
	ActionFreeComplete HistoryAction = "free_completed"
	ActionSegmentAlloc HistoryAction = "segment_alloc"
	ActionSegmentFree  HistoryAction = "segment_free"
	ActionSegmentMap   HistoryAction = "segment_map"
	ActionSegmentUnmap HistoryAction = "segment_unmap"
	ActionOOM          HistoryAction = "oom"
	ActionSpill        HistoryAction = "spill"
	ActionUnspill      HistoryAction = "unspill"
)

// HistoryEntry is one event of an allocator's memory history.
type HistoryEntry struct {
	Time   time.Time     `json:"time"`
	Action HistoryAction `json:"action"`
	Device int           `json:"device"`
	Stream uintptr       `json:"stream"`
	Addr   Ptr           `json:"addr"`
	Size   uint64        `json:"size"`
}

// BlockInfo is one block of a segment in a snapshot.
type BlockInfo struct {
	Addr          Ptr    `json:"addr"`
	Size          uint64 `json:"size"`
	RequestedSize uint64 `json:"requested_size"`
	State         string `json:"state"` // "active_allocated", "active_pending_free", "inactive"
}

// SegmentInfo is one segment (device allocation) in a snapshot.
type SegmentInfo struct {
	Device        int         `json:"device"`
	Stream        uintptr     `json:"stream"`
	Addr          Ptr         `json:"address"`
	TotalSize     uint64      `json:"total_size"`
	AllocatedSize uint64      `json:"allocated_size"`
	ActiveSize    uint64      `json:"active_size"`
	RequestedSize uint64      `json:"requested_size"`
	SegmentType   string      `json:"segment_type"` // "small" or "large"
	Expandable    bool        `json:"is_expandable"`
	PrivatePool   uint64      `json:"private_pool,omitempty"`
	Blocks        []BlockInfo `json:"blocks"`
}

// Snapshot is the state of an allocator's memory, as PyTorch's memory snapshot.
type Snapshot struct {
	Segments []SegmentInfo       `json:"segments"`
	History  []HistoryEntry      `json:"history,omitempty"`
	Stats    map[int]MemoryStats `json:"stats,omitempty"` // per device
}
