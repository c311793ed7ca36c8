package metrics

import "github.com/gpumem/gpumem"

// valuesFunc emits the samples of one family from one device's statistics,
// each with its labels after device.
type valuesFunc func(st *gpumem.MemoryStats, emit func(labels []Label, v float64))

var pools = [3]string{gpumem.StatAll: "all", gpumem.StatSmall: "small", gpumem.StatLarge: "large"}

// poolLabels[p][k] are the pool and stat labels of pool p and statistic k
// (current, peak, allocated, freed), built once.
var poolLabels = func() (l [3][4][]Label) {
	for p, pool := range pools {
		for k, stat := range [4]string{"current", "peak", "allocated", "freed"} {
			l[p][k] = []Label{{Name: "pool", Value: pool}, {Name: "stat", Value: stat}}
		}
	}
	return l
}()

// statFamilies returns the two families of one StatArray: its gauges
// (current, peak) and its counters (allocated, freed).
func statFamilies(name, what string, get func(*gpumem.MemoryStats) *gpumem.StatArray) ([]Family, []valuesFunc) {
	fams := []Family{
		{Name: "gpumem_" + name, Type: "gauge", Help: what + ": current value and peak since the last reset, by pool."},
		{Name: "gpumem_" + name + "_total", Type: "counter", Help: what + ": total increments (stat=allocated) and decrements (stat=freed), by pool."},
	}
	vals := []valuesFunc{
		func(st *gpumem.MemoryStats, emit func([]Label, float64)) {
			a := get(st)
			for p := range pools {
				emit(poolLabels[p][0], float64(a[p].Current))
				emit(poolLabels[p][1], float64(a[p].Peak))
			}
		},
		func(st *gpumem.MemoryStats, emit func([]Label, float64)) {
			a := get(st)
			for p := range pools {
				emit(poolLabels[p][2], float64(a[p].Allocated))
				emit(poolLabels[p][3], float64(a[p].Freed))
			}
		},
	}
	return fams, vals
}

// allocatorFamilies and allocatorValues list the exposition of an
// allocator's statistics in its order; doc.go documents each.
var allocatorFamilies, allocatorValues = func() ([]Family, []valuesFunc) {
	var fs []Family
	var vs []valuesFunc
	pooled := func(name, what string, get func(*gpumem.MemoryStats) *gpumem.StatArray) {
		f, v := statFamilies(name, what, get)
		fs, vs = append(fs, f...), append(vs, v...)
	}
	one := func(name, typ, help string, get func(*gpumem.MemoryStats) float64) {
		fs = append(fs, Family{Name: name, Type: typ, Help: help})
		vs = append(vs, func(st *gpumem.MemoryStats, emit func([]Label, float64)) { emit(nil, get(st)) })
	}
	pooled("allocation", "Blocks handed out", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.Allocation })
	pooled("segment", "Device allocations held", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.Segment })
	pooled("active", "Blocks allocated or awaiting their streams", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.Active })
	pooled("inactive_split", "Free blocks split from a segment with live parts", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.InactiveSplit })
	pooled("allocated_bytes", "Bytes handed out (rounded)", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.AllocatedBytes })
	pooled("reserved_bytes", "Bytes held from the device", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.ReservedBytes })
	pooled("active_bytes", "Bytes in active blocks", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.ActiveBytes })
	pooled("inactive_split_bytes", "Bytes in inactive split blocks", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.InactiveSplitBytes })
	pooled("requested_bytes", "Bytes asked for (unrounded)", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.RequestedBytes })
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
	return fs, vs
}()
