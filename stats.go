package gpumem

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

	// UnreleasedBytes is physical memory the allocator gave up (it is no
	// longer in ReservedBytes) whose release the device refused: the device
	// still holds it, and the allocator tries again (the caching allocator:
	// at EmptyCache and Close) until it succeeds.
	UnreleasedBytes int64 `json:"unreleased_bytes"`

	// Sleep and wake (the caching allocator's Sleep and Wake). While a
	// device is asleep its reserved bytes keep their addresses, and
	// AsleepBytes of them have no physical memory behind them: the device
	// holds ReservedBytes - AsleepBytes.
	AsleepBytes          int64 `json:"asleep_bytes"`           // reserved bytes whose physical memory Sleep released
	AsleepSavedBytes     int64 `json:"asleep_saved_bytes"`     // bytes of kept allocations saved to pinned host memory
	AsleepDiscardedBytes int64 `json:"asleep_discarded_bytes"` // bytes of live allocations whose contents Sleep discarded
	NumSleeps            int64 `json:"num_sleeps"`             // completed Sleeps
	NumWakes             int64 `json:"num_wakes"`              // completed Wakes
}

// arrays lists the statistic arrays of s, in field order.
func (s *MemoryStats) arrays() [9]*StatArray {
	return [9]*StatArray{&s.Allocation, &s.Segment, &s.Active, &s.InactiveSplit,
		&s.AllocatedBytes, &s.ReservedBytes, &s.ActiveBytes, &s.InactiveSplitBytes, &s.RequestedBytes}
}

// ResetPeaks sets the peak of every statistic to its current value, as
// torch.cuda.reset_peak_memory_stats does.
func (s *MemoryStats) ResetPeaks() {
	for _, arr := range s.arrays() {
		for i := range arr {
			arr[i].ResetPeak()
		}
	}
}

// Add adds o's statistics to s, field by field: the sum of two allocators'
// (or two pools') statistics. Peaks are summed, which bounds the peak of the
// sum from above. The largest free block is the larger of the two, and the
// fragmentation is that of the side holding it.
func (s *MemoryStats) Add(o MemoryStats) {
	dst, src := s.arrays(), o.arrays()
	for k := range dst {
		for i := range dst[k] {
			d, q := &dst[k][i], src[k][i]
			d.Current += q.Current
			d.Peak += q.Peak
			d.Allocated += q.Allocated
			d.Freed += q.Freed
		}
	}
	s.NumAllocRetries += o.NumAllocRetries
	s.NumOOMs += o.NumOOMs
	s.NumSyncAllStreams += o.NumSyncAllStreams
	s.NumDeviceAlloc += o.NumDeviceAlloc
	s.NumDeviceFree += o.NumDeviceFree
	s.PendingReleaseBytes += o.PendingReleaseBytes
	s.CrossStreamReuses += o.CrossStreamReuses
	s.SegmentGrowths += o.SegmentGrowths
	s.UnreleasedBytes += o.UnreleasedBytes
	s.AsleepBytes += o.AsleepBytes
	s.AsleepSavedBytes += o.AsleepSavedBytes
	s.AsleepDiscardedBytes += o.AsleepDiscardedBytes
	s.NumSleeps += o.NumSleeps
	s.NumWakes += o.NumWakes
	if o.LargestFreeBlock > s.LargestFreeBlock {
		s.LargestFreeBlock = o.LargestFreeBlock
		s.Fragmentation = o.Fragmentation
	}
}
