package metrics

import "github.com/gpumem/gpumem"

// valuesFunc emits the samples of one family from one device's statistics,
// each with its labels after device.
type valuesFunc func(st *gpumem.MemoryStats, emit func(labels []Label, v float64))

// pools are the pool labels of the pooled families: small and large only,
// whose sum is the total (PyTorch's "all" pool is not a label value, so that
// summing over pool does not count twice).
var pools = [2]struct {
	index int
	label []Label
}{
	{gpumem.StatSmall, []Label{{Name: "pool", Value: "small"}}},
	{gpumem.StatLarge, []Label{{Name: "pool", Value: "large"}}},
}

// otherPool labels what a total holds beyond its small and large pools.
var otherPool = []Label{{Name: "pool", Value: "other"}}

// statFamilies returns the four families of one StatArray, named from base
// and unit ("bytes" or ""): the current value by pool (gauge
// gpumem_<base>[_<unit>]), the peak of the total (gauge
// gpumem_<base>_peak[_<unit>], no pool label: the pools' peaks do not add
// up to it), and the total increments and decrements by pool (counters
// gpumem_<base>_added[_<unit>]_total and gpumem_<base>_removed[_<unit>]_total).
// No family is another's name plus "_total", so the exposition reads as
// OpenMetrics too.
func statFamilies(base, unit, what string, get func(*gpumem.MemoryStats) *gpumem.StatArray) ([]Family, []valuesFunc) {
	name := func(mid string) string {
		n := "gpumem_" + base + mid
		if unit != "" {
			n += "_" + unit
		}
		return n
	}
	fams := []Family{
		{Name: name(""), Type: "gauge", Help: what + ": current value, by pool (the pools add up to the total)."},
		{Name: name("_peak"), Type: "gauge", Help: what + ": peak of the total since the last reset."},
		{Name: name("_added") + "_total", Type: "counter", Help: what + ": total increments, by pool."},
		{Name: name("_removed") + "_total", Type: "counter", Help: what + ": total decrements, by pool."},
	}
	byPool := func(field func(*gpumem.Stat) int64) valuesFunc {
		return func(st *gpumem.MemoryStats, emit func([]Label, float64)) {
			a := get(st)
			rest := field(&a[gpumem.StatAll])
			for _, p := range pools {
				v := field(&a[p.index])
				rest -= v
				emit(p.label, float64(v))
			}
			if rest != 0 {
				// A source that keeps a total without its pools (a sum
				// of sources, a function): the remainder keeps the sum.
				emit(otherPool, float64(rest))
			}
		}
	}
	vals := []valuesFunc{
		byPool(func(s *gpumem.Stat) int64 { return s.Current }),
		func(st *gpumem.MemoryStats, emit func([]Label, float64)) {
			emit(nil, float64(get(st)[gpumem.StatAll].Peak))
		},
		byPool(func(s *gpumem.Stat) int64 { return s.Allocated }),
		byPool(func(s *gpumem.Stat) int64 { return s.Freed }),
	}
	return fams, vals
}

// allocatorFamilies and allocatorValues list the exposition of an
// allocator's statistics in its order; doc.go documents each.
var allocatorFamilies, allocatorValues = func() ([]Family, []valuesFunc) {
	var fs []Family
	var vs []valuesFunc
	pooled := func(base, unit, what string, get func(*gpumem.MemoryStats) *gpumem.StatArray) {
		f, v := statFamilies(base, unit, what, get)
		fs, vs = append(fs, f...), append(vs, v...)
	}
	one := func(name, typ, help string, get func(*gpumem.MemoryStats) float64) {
		fs = append(fs, Family{Name: name, Type: typ, Help: help})
		vs = append(vs, func(st *gpumem.MemoryStats, emit func([]Label, float64)) { emit(nil, get(st)) })
	}
	pooled("allocations", "", "Blocks handed out", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.Allocation })
	pooled("segments", "", "Device allocations held", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.Segment })
	pooled("active_blocks", "", "Blocks allocated or awaiting their streams", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.Active })
	pooled("inactive_split_blocks", "", "Free blocks split from a segment with live parts", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.InactiveSplit })
	pooled("allocated", "bytes", "Bytes handed out (rounded)", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.AllocatedBytes })
	pooled("reserved", "bytes", "Bytes held from the device", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.ReservedBytes })
	pooled("active", "bytes", "Bytes in active blocks", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.ActiveBytes })
	pooled("inactive_split", "bytes", "Bytes in inactive split blocks", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.InactiveSplitBytes })
	pooled("requested", "bytes", "Bytes asked for (unrounded)", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.RequestedBytes })
	one("gpumem_num_alloc_retries_total", "counter", "Allocations retried after freeing cached memory.",
		func(s *gpumem.MemoryStats) float64 { return float64(s.NumAllocRetries) })
	one("gpumem_num_ooms_total", "counter", "Allocations failed for lack of memory.",
		func(s *gpumem.MemoryStats) float64 { return float64(s.NumOOMs) })
	one("gpumem_num_sync_all_streams_total", "counter", "Waits for every stream's pending frees.",
		func(s *gpumem.MemoryStats) float64 { return float64(s.NumSyncAllStreams) })
	one("gpumem_num_device_alloc_total", "counter", "Device allocation calls.",
		func(s *gpumem.MemoryStats) float64 { return float64(s.NumDeviceAlloc) })
	one("gpumem_num_device_free_total", "counter", "Device free calls.",
		func(s *gpumem.MemoryStats) float64 { return float64(s.NumDeviceFree) })
	one("gpumem_largest_free_block_bytes", "gauge", "Largest block that can be handed out without a new segment.",
		func(s *gpumem.MemoryStats) float64 { return float64(s.LargestFreeBlock) })
	one("gpumem_fragmentation_ratio", "gauge", "1 - largest free block / free bytes (0 when nothing is free).",
		func(s *gpumem.MemoryStats) float64 { return s.Fragmentation })
	one("gpumem_pending_release_bytes", "gauge", "Bytes freed but awaiting other streams.",
		func(s *gpumem.MemoryStats) float64 { return float64(s.PendingReleaseBytes) })
	one("gpumem_cross_stream_reuses_total", "counter", "Free blocks reused on another stream after a wait.",
		func(s *gpumem.MemoryStats) float64 { return float64(s.CrossStreamReuses) })
	one("gpumem_segment_growths_total", "counter", "Wholly free segments grown in place instead of replaced by a new one.",
		func(s *gpumem.MemoryStats) float64 { return float64(s.SegmentGrowths) })
	one("gpumem_unreleased_bytes", "gauge", "Physical memory given up whose release the device refused (tried again).",
		func(s *gpumem.MemoryStats) float64 { return float64(s.UnreleasedBytes) })
	one("gpumem_asleep_bytes", "gauge", "Reserved bytes whose physical memory Sleep released.",
		func(s *gpumem.MemoryStats) float64 { return float64(s.AsleepBytes) })
	one("gpumem_asleep_saved_bytes", "gauge", "Bytes of kept allocations saved to pinned host memory while asleep.",
		func(s *gpumem.MemoryStats) float64 { return float64(s.AsleepSavedBytes) })
	one("gpumem_asleep_discarded_bytes", "gauge", "Bytes of live allocations whose contents Sleep discarded.",
		func(s *gpumem.MemoryStats) float64 { return float64(s.AsleepDiscardedBytes) })
	one("gpumem_sleeps_total", "counter", "Completed Sleeps.",
		func(s *gpumem.MemoryStats) float64 { return float64(s.NumSleeps) })
	one("gpumem_wakes_total", "counter", "Completed Wakes.",
		func(s *gpumem.MemoryStats) float64 { return float64(s.NumWakes) })
	return fs, vs
}()
