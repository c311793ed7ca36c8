package gpumem

import "sync/atomic"

// Optional capabilities: interfaces a Backend may implement beyond Backend
// when it knows vendor behaviour that allocators should follow. Allocators
// ask with a type assertion and fall back to the device attributes when a
// backend (or a wrapper around one) does not implement them.

// ManagedMigration is implemented by backends that know which device
// attribute says whether managed pages migrate on demand. On CUDA it is
// concurrent managed access; on HIP it is pageable memory access (XNACK on),
// since clr derives concurrent managed access from system SVM support.
type ManagedMigration interface {
	// ManagedPagesMigrate reports whether dev migrates managed pages on
	// demand.
	ManagedPagesMigrate(dev int) (bool, error)
}

// VirtualMemoryAdvisor is implemented by backends whose virtual memory API
// works but should not be used by default with the loaded library version
// (HIP before 7.0, where PyTorch turns expandable segments off because of VMM
// failures). Allocators keep VMM-backed features the user asked for
// explicitly, and turn off those that are merely on by default.
type VirtualMemoryAdvisor interface {
	// VirtualMemoryDefault reports whether VMM-backed features should be on
	// by default, and when not, why.
	VirtualMemoryDefault() (ok bool, reason string)
}

// MappingAliaser is implemented by backends that know whether one physical
// allocation (MemCreate) may be mapped at a second virtual address while it
// is mapped at a first. Expandable segments then move free memory by
// mapping it at its new place and leaving the old mapping for later (no
// unmap, no synchronization). An allocator over a backend without this
// capability tries, and stops at the first refusal.
type MappingAliaser interface {
	// MapsHandleTwice reports whether a handle may be mapped at two
	// addresses at once, and when not, why.
	MapsHandleTwice() (ok bool, reason string)
}

// StreamChecker is implemented by backends that can tell, in process, whether
// a stream handle is a live stream of its device and the backend still open.
// Allocators ask it on paths that otherwise make no call into the vendor
// library (a cache hit), so that a bogus or destroyed stream is refused, and
// a closed backend reported, at the cost of a lookup rather than a foreign
// call. A backend that cannot tell for a stream it did not create (one made
// by another library in the process) may ask the vendor library.
type StreamChecker interface {
	// CheckStream returns nil for a live stream (the default stream of an
	// existing device included), an error matching ErrInvalidValue for a
	// handle that is not one, and one matching ErrClosed after Close.
	CheckStream(s Stream) error
	// StreamEpoch returns a counter that the backend increments whenever
	// a stream may have stopped being live (a stream destroyed, the
	// backend closed): a stream that passed CheckStream while the counter
	// read n is live while it still reads n, so that a caller may keep its
	// answers for that long.
	StreamEpoch() *atomic.Uint64
}

// TargetNamer is implemented by backends that can name a device's compile
// target: what a run-time compiler takes for it ("sm_90" on CUDA, the
// gcnArchName such as "gfx90a:sramecc+:xnack-" on HIP, whose feature
// suffixes the compilers accept).
type TargetNamer interface {
	// DeviceTarget returns the compile target of device dev.
	DeviceTarget(dev int) (string, error)
}
