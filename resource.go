package gpumem

// Resource is the allocator contract, after RMM's device_memory_resource.
//
// Allocate returns size bytes (size > 0) of device memory usable in stream
// order on s: work queued on s after Allocate returns may use it at once, and
// work on other streams must first be ordered after s (or the caller records
// the use with RecordStream). Deallocate returns memory obtained from this
// resource; s is the stream on which the last use is ordered. Memory is never
// handed out again while work on another stream may still be using it.
//
// Errors: a zero size, a pointer this resource did not hand out, or a second
// Deallocate match ErrInvalidValue; exhaustion matches ErrOutOfMemory (an
// *OutOfMemoryError). A size larger than the device is exhaustion like any
// other (an *OutOfMemoryError, counted in NumOOMs and told to the OOM
// observers); only an absurd size, above 2^62 bytes, may instead be
// ErrInvalidValue. Any call after Close, or after the backend was closed,
// matches ErrClosed.
//
// Streams: s must be the default stream or a live stream of a device; a
// stream never created or already destroyed matches ErrInvalidValue, and
// the call changes nothing. A stream that p was used on (RecordStream) and
// that was destroyed before Deallocate has no work left to wait for: the
// free succeeds and the memory is reusable at once.
// Implementations are safe for concurrent use.
type Resource interface {
	Allocate(size uint64, s Stream) (Ptr, error)
	Deallocate(p Ptr, s Stream) error
}

// StreamRecorder is implemented by resources that track cross-stream use.
// RecordStream marks p as used on s: when p is freed, its memory is not reused
// until the work queued on s up to the free has completed.
// s may be a stream of any device, not only p's; a stream that is not live
// matches ErrInvalidValue and records nothing.
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

// Allocator is what every allocator of the project is, and what every
// adaptor wraps and is: a Resource that tracks cross-stream use, keeps
// PyTorch's statistics per device, hands its cached memory back on request,
// lets a caller free memory when it runs out, and can be closed.
//
// Stats and ResetPeakStats take a device ordinal; a device the allocator has
// not used reports zero statistics, and resetting it does nothing. EmptyCache
// returns to the device whatever the allocator holds that no allocation
// uses (it does not wait for other streams' work). The OOM handler is called
// with no lock held before an allocation fails for lack of memory, and may
// ask for another attempt, at most eight times for one allocation (attempt
// 0 to 7: a handler that frees nothing cannot hold the caller); observers
// are told of every failure that is returned. Close releases everything the
// allocator holds, whatever is still allocated; every call after it matches
// ErrClosed, except Close (nil) and Stats (zero).
//
// Optional abilities are small interfaces of their own (HistoryKeeper,
// Snapshotter, DeviceSetter); find them through adaptors with HistoryOf,
// SnapshotOf and SetupOf rather than a type assertion.
type Allocator interface {
	Resource
	StreamRecorder
	// Stats returns the allocator's statistics for device dev.
	Stats(dev int) MemoryStats
	// ResetPeakStats sets every peak of device dev to its current value.
	ResetPeakStats(dev int)
	// EmptyCache returns unused cached memory to the device.
	EmptyCache() error
	// SetOOMHandler sets the function called before an allocation fails for
	// lack of memory (nil: none).
	SetOOMHandler(h OOMHandler)
	// AddOOMObserver adds a function told of every out-of-memory failure.
	AddOOMObserver(o OOMObserver)
	// Close releases everything the allocator holds.
	Close() error
}

// HistoryKeeper is an allocator that keeps a memory history (see
// HistoryEntry): the most recent events, oldest first.
type HistoryKeeper interface {
	History() []HistoryEntry
}

// Snapshotter is an allocator that can describe its memory as PyTorch's
// memory snapshot does.
type Snapshotter interface {
	Snapshot() Snapshot
}

// DeviceSetter is an allocator that sets a device up lazily (a pool, its
// attributes, its streams): Setup does it now, so that a measurement or a
// latency-sensitive first allocation does not pay for it.
type DeviceSetter interface {
	Setup(dev int) error
}

// Adaptor is an Allocator that wraps another, after RMM's resource adaptors:
// Upstream returns the wrapped allocator.
type Adaptor interface {
	Allocator
	Upstream() Allocator
}

// find walks a chain of adaptors from a and returns the first allocator that
// is a T.
func find[T any](a Allocator) (T, bool) {
	for a != nil {
		if t, ok := a.(T); ok {
			return t, true
		}
		ad, ok := a.(Adaptor)
		if !ok {
			break
		}
		a = ad.Upstream()
	}
	var zero T
	return zero, false
}

// HistoryOf returns the memory history of a, or of the first allocator
// beneath a chain of adaptors that keeps one; false when none does.
func HistoryOf(a Allocator) ([]HistoryEntry, bool) {
	h, ok := find[HistoryKeeper](a)
	if !ok {
		return nil, false
	}
	return h.History(), true
}

// SnapshotOf returns the snapshot of a, or of the first allocator beneath a
// chain of adaptors that can take one; false when none can.
func SnapshotOf(a Allocator) (Snapshot, bool) {
	s, ok := find[Snapshotter](a)
	if !ok {
		return Snapshot{}, false
	}
	return s.Snapshot(), true
}

// SetupOf sets device dev up on a, or on the first allocator beneath a chain
// of adaptors that sets devices up lazily. It does nothing (and returns nil)
// when none does.
func SetupOf(a Allocator, dev int) error {
	s, ok := find[DeviceSetter](a)
	if !ok {
		return nil
	}
	return s.Setup(dev)
}
