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
// source and device. Gather returns the samples themselves, for exporters
// other than WritePrometheus.
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
// device (the device ordinal). PyTorch's pooled statistics ("<name>.<pool>.<stat>"
// in torch.cuda.memory_stats) become two families each, because a family has
// one type: a gauge gpumem_<name> with stat="current" or stat="peak", and a
// counter gpumem_<name>_total with stat="allocated" (total increments) or
// stat="freed" (total decrements); both also carry pool="all", "small" or
// "large". For example PyTorch's allocated_bytes.all.current is
//
//	gpumem_allocated_bytes{allocator="caching",device="0",pool="all",stat="current"}
//
// The pooled families, with PyTorch's name first:
//
//	allocation            gpumem_allocation, gpumem_allocation_total
//	                      blocks handed out by the allocator
//	segment               gpumem_segment, gpumem_segment_total
//	                      device allocations (segments) held
//	active                gpumem_active, gpumem_active_total
//	                      blocks allocated or freed but awaiting their streams
//	inactive_split        gpumem_inactive_split, gpumem_inactive_split_total
//	                      free blocks split from a segment that has live parts
//	allocated_bytes       gpumem_allocated_bytes, gpumem_allocated_bytes_total
//	                      bytes handed out, rounded to the allocator's sizes
//	reserved_bytes        gpumem_reserved_bytes, gpumem_reserved_bytes_total
//	                      bytes held from the device
//	active_bytes          gpumem_active_bytes, gpumem_active_bytes_total
//	                      bytes in active blocks
//	inactive_split_bytes  gpumem_inactive_split_bytes, gpumem_inactive_split_bytes_total
//	                      bytes in inactive split blocks
//	requested_bytes       gpumem_requested_bytes, gpumem_requested_bytes_total
//	                      bytes asked for by callers, before rounding
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
//	                      gpumem_deferrable_bytes (gauge, tier=..., stat="current"|"peak")
//	                      their bytes, and the peak
//	PinnedBytes           gpumem_deferrable_pinned_bytes (gauge, stat="current"|"peak")
//	                      page-locked memory the host tier holds
//	PinnedSlabs           gpumem_deferrable_pinned_slabs (gauge)
//	DeviceToHost, ...     gpumem_deferrable_moves_total (counter, from=..., to=...)
//	                      completed moves in each direction (device to host or
//	                      disk, host to disk, host or disk to device, disk to host)
//	                      gpumem_deferrable_moved_bytes_total (counter, from, to)
//	                      gpumem_deferrable_move_seconds_total (counter, from, to)
//	                      host time of the copies: bytes / seconds is the bandwidth
//	                      gpumem_deferrable_move_failures_total (counter, from, to)
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
