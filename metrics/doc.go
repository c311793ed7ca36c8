// Package metrics publishes allocators' statistics for a Go service to watch:
// through expvar (and so at /debug/vars) and in the Prometheus text
// exposition format, with nothing beyond the standard library.
//
// A Registry holds named collectors (Collector): an allocator's statistics
// (anything with Stats(dev int) gpumem.MemoryStats: every allocator and
// adaptor is one) watched on a list of devices with Add, or any other
// collector with AddCollector, such as a deferrable manager's. The package
// imports no allocator: each brings its own collector.
//
//	var reg metrics.Registry
//	_ = reg.Add("caching", cachingAllocator, []int{0, 1})
//	_ = reg.AddCollector("kv", deferrableManager.Collector())
//	_ = reg.Publish("gpumem")                // expvar: /debug/vars
//	http.Handle("/metrics", reg.Handler())   // Prometheus scrape target
//
// Each read calls every collector once (an allocator's Stats once per
// device), without the registry's lock held; the output is consistent per
// source and device.
//
// # Other exporters
//
// Gather returns every family with its type, help and samples (each sample's
// labels, allocator first, and value): what WritePrometheus writes, for
// other exporters to read. Two small modules, each with its own go.mod so
// that this module keeps its single dependency, build on it: the module
// github.com/gpumem/gpumem/metrics/prometheus (a prometheus.Collector for
// client_golang's registries) and the module
// github.com/gpumem/gpumem/metrics/otel (observable OpenTelemetry
// instruments on a metric.Meter, one callback reading the registry per
// collection).
//
// # expvar
//
// Publish registers one expvar.Func whose JSON value is each collector's
// ExpvarValue under its name: for an allocator, {device: MemoryStats}, so
// {allocator: {device: MemoryStats}} in all, with MemoryStats in its JSON form
// (PyTorch's names: "allocated_bytes": [{"current", "peak", "allocated",
// "freed"} for all, small, large], "num_ooms", ...). A fragmentation that is
// not a finite number is shown as 0.
//
// # Prometheus names
//
// Every sample carries the labels allocator (the name given to Add) and
// device (the device ordinal). PyTorch's pooled statistics
// ("<name>.<pool>.<stat>" in torch.cuda.memory_stats) become four families
// each, so that no label mixes values that must not be added up and no
// family is another's name plus "_total" (the exposition reads as
// OpenMetrics too):
//
//	gpumem_<base>[_bytes]                  gauge: current, pool="small"|"large"
//	gpumem_<base>_peak[_bytes]             gauge: peak of the total since the last reset (no pool)
//	gpumem_<base>_added[_bytes]_total      counter: total increments, by pool
//	gpumem_<base>_removed[_bytes]_total    counter: total decrements, by pool
//
// The pool label takes "small" and "large", whose sum is PyTorch's "all"
// (there is no pool="all" series); a source whose total exceeds its pools
// (a SourceFunc summing sources) adds pool="other" with the remainder. For
// example PyTorch's allocated_bytes.all.current is
//
//	sum by (allocator, device) (gpumem_allocated_bytes)
//
// and allocated_bytes.all.peak is gpumem_allocated_peak_bytes. The pooled
// families, with PyTorch's name first:
//
//	allocation            gpumem_allocations{,_peak,_added_total,_removed_total}
//	                      blocks handed out by the allocator
//	segment               gpumem_segments{,_peak,_added_total,_removed_total}
//	                      device allocations (segments) held
//	active                gpumem_active_blocks{,_peak,_added_total,_removed_total}
//	                      blocks allocated or freed but awaiting their streams
//	inactive_split        gpumem_inactive_split_blocks{,_peak,_added_total,_removed_total}
//	                      free blocks split from a segment that has live parts
//	allocated_bytes       gpumem_allocated{_bytes,_peak_bytes,_added_bytes_total,_removed_bytes_total}
//	                      bytes handed out, rounded to the allocator's sizes
//	reserved_bytes        gpumem_reserved{_bytes,_peak_bytes,_added_bytes_total,_removed_bytes_total}
//	                      bytes held from the device
//	active_bytes          gpumem_active{_bytes,_peak_bytes,_added_bytes_total,_removed_bytes_total}
//	                      bytes in active blocks
//	inactive_split_bytes  gpumem_inactive_split{_bytes,_peak_bytes,_added_bytes_total,_removed_bytes_total}
//	                      bytes in inactive split blocks
//	requested_bytes       gpumem_requested{_bytes,_peak_bytes,_added_bytes_total,_removed_bytes_total}
//	                      bytes asked for by callers, before rounding
//
// Before this layout, each pooled statistic was a gauge gpumem_<name> with
// stat="current"|"peak" and a counter gpumem_<name>_total with
// stat="allocated"|"freed", both with pool="all"|"small"|"large": a query
// over them must be rewritten (stat="current" is the gauge, summed over
// pool; stat="peak" the _peak gauge; stat="allocated" the _added counter;
// stat="freed" the _removed counter).
//
// The single-valued families, labelled allocator and device only:
//
//	num_alloc_retries     gpumem_num_alloc_retries_total (counter)
//	                      allocations retried after freeing cached memory
//	num_ooms              gpumem_num_ooms_total (counter)
//	                      allocations that failed for lack of memory
//	num_sync_all_streams  gpumem_num_sync_all_streams_total (counter)
//	                      waits for every stream's pending frees
//	num_device_alloc      gpumem_num_device_alloc_total (counter)
//	                      device allocation calls (cudaMalloc and kin)
//	num_device_free       gpumem_num_device_free_total (counter)
//	                      device free calls
//	(beyond PyTorch)      gpumem_largest_free_block_bytes (gauge)
//	                      largest block handed out without a new segment
//	(beyond PyTorch)      gpumem_fragmentation_ratio (gauge)
//	                      1 - largest free block / free bytes; 0 when nothing is free
//	(beyond PyTorch)      gpumem_pending_release_bytes (gauge)
//	                      bytes freed but awaiting work on other streams
//	(beyond PyTorch)      gpumem_cross_stream_reuses_total (counter)
//	                      free blocks reused on another stream after a wait
//	(beyond PyTorch)      gpumem_segment_growths_total (counter)
//	                      wholly free segments grown in place instead of replaced
//	(beyond PyTorch)      gpumem_unreleased_bytes (gauge)
//	                      physical memory given up whose release the device refused
//	(sleep and wake)      gpumem_asleep_bytes (gauge)
//	                      reserved bytes whose physical memory Sleep released
//	(sleep and wake)      gpumem_asleep_saved_bytes (gauge)
//	                      bytes of kept allocations saved to pinned host memory
//	(sleep and wake)      gpumem_asleep_discarded_bytes (gauge)
//	                      bytes of live allocations whose contents Sleep discarded
//	(sleep and wake)      gpumem_sleeps_total, gpumem_wakes_total (counters)
//	                      completed Sleeps and Wakes
//
// # Deferrable memory
//
// A deferrable.Manager (spillable buffers on one device) brings its own
// collector (its Collector method), added with AddCollector under a name,
// labelled allocator and device like the allocators.
// Its expvar value is the manager's deferrable.Stats in its JSON form
// ("device", "host", "disk", "device_to_host", ..., durations in
// nanoseconds); its Prometheus families, each with deferrable's field first:
//
//	Device, Host, Disk    gpumem_deferrable_buffers (gauge, tier="device"|"host"|"disk")
//	                      buffers resident in each tier
//	                      gpumem_deferrable_bytes (gauge, tier=...)
//	                      their bytes
//	                      gpumem_deferrable_peak_bytes (gauge, tier=...)
//	                      the peak of each tier's bytes
//	PinnedBytes           gpumem_deferrable_pinned_bytes (gauge)
//	                      page-locked memory the host tier holds
//	PinnedPeakBytes       gpumem_deferrable_pinned_peak_bytes (gauge)
//	PinnedSlabs           gpumem_deferrable_pinned_slabs (gauge)
//	DeviceToHost, ...     gpumem_deferrable_moves_total (counter, from=..., to=...)
//	                      completed moves in each direction (device to host or
//	                      disk, host to disk, host or disk to device, disk to host)
//	                      gpumem_deferrable_moved_bytes_total (counter, from, to)
//	                      gpumem_deferrable_move_seconds_total (counter, from, to)
//	                      host time of the copies: bytes / seconds is the bandwidth
//	                      gpumem_deferrable_move_failures_total (counter, from, to)
//	                      gpumem_deferrable_move_fallbacks_total (counter, from, to)
//	                      spills to the host that the pinned arena could not
//	                      place and that went to disk instead (Transfer.Fallbacks,
//	                      counted as moves to disk): not failures
//	SyncLocks, AsyncLocks, PendingReleases
//	                      gpumem_deferrable_holds (gauge, kind="sync"|"async"|"pending_release")
//	Allocs, Frees         gpumem_deferrable_allocs_total, gpumem_deferrable_frees_total (counters)
//	AllocRetries          gpumem_deferrable_alloc_retries_total (counter)
//	OOMHandlerCalls       gpumem_deferrable_oom_handler_calls_total (counter)
//	                      calls of the manager's OOMHandler by other allocators
//	OOMSpilledBytes       gpumem_deferrable_oom_spilled_bytes_total (counter)
//
// Names returns this list in the order of the exposition, the allocators'
// families first. Statistics that an
// allocator does not keep read 0.
// ResetPeakStats on an allocator lowers the peak gauges; the counters never
// decrease while the allocator lives.
package metrics
