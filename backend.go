package gpumem

import "fmt"

// Ptr is an address in the unified virtual address space: device memory,
// pinned host memory or managed memory. Zero is never a valid allocation.
type Ptr uintptr

// Add returns p advanced by off bytes.
func (p Ptr) Add(off uint64) Ptr { return p + Ptr(off) }

// Stream is a stream of one device. The zero Handle is the device's default
// (legacy NULL) stream.
type Stream struct {
	Handle uintptr // vendor handle (CUstream / hipStream_t); 0 is the default stream
	Device int     // ordinal of the device the stream belongs to
}

// IsDefault reports whether s is its device's default stream.
func (s Stream) IsDefault() bool { return s.Handle == 0 }

// String formats the stream for messages.
func (s Stream) String() string { return fmt.Sprintf("stream(dev %d, %#x)", s.Device, s.Handle) }

// Event is an event of one device.
type Event struct {
	Handle uintptr
	Device int
}

// MemPool is a stream-ordered memory pool of one device.
type MemPool struct {
	Handle uintptr
	Device int
}

// Graph is a captured (not yet instantiated) graph.
type Graph struct {
	Handle uintptr
	Device int
}

// GraphExec is an instantiated graph that can be launched.
type GraphExec struct {
	Handle uintptr
	Device int
}

// MemHandle is a physical allocation of the virtual memory API (CUmemGenericAllocationHandle).
type MemHandle struct {
	Handle uint64
	Device int
}

// UserObject is a reference-counted object whose destructor runs a Go function
// once its last reference (held by the program or by graphs) is released.
type UserObject struct {
	Handle uintptr
	Device int
}

// LocationKind says where a Location is.
type LocationKind int

// Location kinds.
const (
	LocationInvalid LocationKind = iota
	LocationDevice
	LocationHost
)

// Location is a place memory can live or be advised towards: device N or the host.
type Location struct {
	Kind   LocationKind
	Device int // valid when Kind == LocationDevice
}

// HostLocation is the host.
func HostLocation() Location { return Location{Kind: LocationHost} }

// DeviceLocation is device dev.
func DeviceLocation(dev int) Location { return Location{Kind: LocationDevice, Device: dev} }

// String formats the location ("host", "device 1").
func (l Location) String() string {
	switch l.Kind {
	case LocationHost:
		return "host"
	case LocationDevice:
		return fmt.Sprintf("device %d", l.Device)
	}
	return "invalid location"
}

// Attribute is a device attribute in the project's own numbering; each backend
// translates it to its vendor's (CUDA and HIP number them differently).
type Attribute int

// Device attributes.
const (
	AttrComputeCapabilityMajor Attribute = iota
	AttrComputeCapabilityMinor
	AttrMultiprocessorCount
	AttrUnifiedAddressing
	AttrManagedMemory
	AttrConcurrentManagedAccess
	AttrPageableMemoryAccess
	AttrCanMapHostMemory
	AttrMemoryPoolsSupported
	AttrVirtualMemoryManagement
	AttrIntegrated
	AttrPCIBusID
	AttrPCIDeviceID
	AttrClockRateKHz
	AttrMemoryClockRateKHz
	AttrGlobalMemoryBusWidth
	AttrL2CacheSize
	AttrPCIDomainID
	attrCount
)

var attrNames = [...]string{
	"compute_capability_major", "compute_capability_minor", "multiprocessor_count",
	"unified_addressing", "managed_memory", "concurrent_managed_access",
	"pageable_memory_access", "can_map_host_memory", "memory_pools_supported",
	"virtual_memory_management", "integrated", "pci_bus_id", "pci_device_id",
	"clock_rate_khz", "memory_clock_rate_khz", "global_memory_bus_width", "l2_cache_size",
	"pci_domain_id",
}

// Attributes lists every attribute, for tools that print them all.
func Attributes() []Attribute {
	out := make([]Attribute, attrCount)
	for i := range out {
		out[i] = Attribute(i)
	}
	return out
}

// String names the attribute.
func (a Attribute) String() string {
	if a >= 0 && a < attrCount {
		return attrNames[a]
	}
	return fmt.Sprintf("attribute(%d)", int(a))
}

// Advice is a managed-memory usage hint (cuMemAdvise / hipMemAdvise).
type Advice int

// Advice values. The coarse-grain ones exist on HIP only; CUDA returns ErrNotSupported.
const (
	AdviseSetReadMostly Advice = iota + 1
	AdviseUnsetReadMostly
	AdviseSetPreferredLocation
	AdviseUnsetPreferredLocation
	AdviseSetAccessedBy
	AdviseUnsetAccessedBy
	AdviseSetCoarseGrain
	AdviseUnsetCoarseGrain
)

// String names the advice.
func (a Advice) String() string {
	switch a {
	case AdviseSetReadMostly:
		return "set_read_mostly"
	case AdviseUnsetReadMostly:
		return "unset_read_mostly"
	case AdviseSetPreferredLocation:
		return "set_preferred_location"
	case AdviseUnsetPreferredLocation:
		return "unset_preferred_location"
	case AdviseSetAccessedBy:
		return "set_accessed_by"
	case AdviseUnsetAccessedBy:
		return "unset_accessed_by"
	case AdviseSetCoarseGrain:
		return "set_coarse_grain"
	case AdviseUnsetCoarseGrain:
		return "unset_coarse_grain"
	}
	return fmt.Sprintf("advice(%d)", int(a))
}

// RangeAttribute is a managed-memory range attribute (cuMemRangeGetAttribute).
type RangeAttribute int

// Range attributes that resolve to a location.
const (
	RangePreferredLocation RangeAttribute = iota + 1
	RangeLastPrefetchLocation
)

// StreamFlags are stream creation flags.
type StreamFlags uint32

// Stream flags.
const (
	StreamDefault     StreamFlags = 0
	StreamNonBlocking StreamFlags = 1 // does not synchronize with the legacy default stream
)

// EventFlags are event creation flags.
type EventFlags uint32

// Event flags.
const (
	EventDefault       EventFlags = 0
	EventBlockingSync  EventFlags = 1
	EventDisableTiming EventFlags = 2
)

// CaptureMode is a stream capture mode.
type CaptureMode int

// Capture modes.
const (
	CaptureModeGlobal CaptureMode = iota
	CaptureModeThreadLocal
	CaptureModeRelaxed
)

// CaptureStatus is a stream's capture status.
type CaptureStatus int

// Capture statuses.
const (
	CaptureNone CaptureStatus = iota
	CaptureActive
	CaptureInvalidated
)

// String names the status.
func (c CaptureStatus) String() string {
	switch c {
	case CaptureNone:
		return "none"
	case CaptureActive:
		return "active"
	case CaptureInvalidated:
		return "invalidated"
	}
	return fmt.Sprintf("capture_status(%d)", int(c))
}

// CaptureInfo describes a stream's capture.
type CaptureInfo struct {
	Status CaptureStatus
	ID     uint64 // unique id of the capture sequence, when Status is CaptureActive
	Graph  Graph  // the graph being captured, when Status is CaptureActive
}

// PoolAttribute is a stream-ordered pool attribute.
type PoolAttribute int

// Pool attributes. The first four are settable; the last four are read-only
// except that a set of zero resets the high-water marks.
const (
	PoolReleaseThreshold PoolAttribute = iota + 1
	PoolReuseFollowEventDependencies
	PoolReuseAllowOpportunistic
	PoolReuseAllowInternalDependencies
	PoolReservedMemCurrent
	PoolReservedMemHigh
	PoolUsedMemCurrent
	PoolUsedMemHigh
)

// String names the attribute.
func (a PoolAttribute) String() string {
	switch a {
	case PoolReleaseThreshold:
		return "release_threshold"
	case PoolReuseFollowEventDependencies:
		return "reuse_follow_event_dependencies"
	case PoolReuseAllowOpportunistic:
		return "reuse_allow_opportunistic"
	case PoolReuseAllowInternalDependencies:
		return "reuse_allow_internal_dependencies"
	case PoolReservedMemCurrent:
		return "reserved_mem_current"
	case PoolReservedMemHigh:
		return "reserved_mem_high"
	case PoolUsedMemCurrent:
		return "used_mem_current"
	case PoolUsedMemHigh:
		return "used_mem_high"
	}
	return fmt.Sprintf("pool_attribute(%d)", int(a))
}

// PoolProps describe a pool to create. The pool's memory lives on Device.
type PoolProps struct {
	Device  int
	MaxSize uint64 // 0: no limit beyond the device's
}

// Access is an access right to memory granted to a device.
type Access int

// Access rights.
const (
	AccessNone Access = iota
	AccessRead
	AccessReadWrite
)

// Version holds the vendor library's versions (CUDA: 13000 for 13.0; HIP: its encoding).
type Version struct {
	Driver  int
	Runtime int // HIP runtime version; equal to Driver on CUDA
}

// Devices reports devices and their properties.
type Devices interface {
	DeviceCount() (int, error)
	DeviceName(dev int) (string, error)
	DeviceAttribute(dev int, a Attribute) (int, error)
	// MemInfo reports the device's free and total memory in bytes.
	MemInfo(dev int) (free, total uint64, err error)
	DeviceSynchronize(dev int) error
}

// Memory allocates and frees device, pinned host and managed memory.
type Memory interface {
	Malloc(dev int, size uint64) (Ptr, error)
	Free(dev int, p Ptr) error
	// MallocHost allocates page-locked host memory accessible to every device.
	MallocHost(size uint64) (Ptr, error)
	FreeHost(p Ptr) error
	// MallocManaged allocates unified memory attached globally.
	MallocManaged(dev int, size uint64) (Ptr, error)
	// Advise sets a usage hint on a managed range; loc is ignored by the
	// read-mostly and coarse-grain advice.
	Advise(p Ptr, size uint64, advice Advice, loc Location) error
	// Prefetch migrates a managed range to loc, ordered on s.
	Prefetch(p Ptr, size uint64, loc Location, s Stream) error
	// RangeLocation reads a location-valued range attribute of managed memory.
	RangeLocation(p Ptr, size uint64, attr RangeAttribute) (Location, error)
}

// Copier copies and sets memory. Addresses are unified: the direction is
// inferred from the pointers.
type Copier interface {
	Memcpy(dst, src Ptr, size uint64) error
	MemcpyAsync(dst, src Ptr, size uint64, s Stream) error
	MemcpyPeerAsync(dst Ptr, dstDev int, src Ptr, srcDev int, size uint64, s Stream) error
	Memset(p Ptr, value byte, size uint64) error
	MemsetAsync(p Ptr, value byte, size uint64, s Stream) error
	// CopyToDevice copies a Go slice to memory at dst and returns when done.
	CopyToDevice(dst Ptr, src []byte) error
	// CopyFromDevice copies memory at src into a Go slice and returns when done.
	CopyFromDevice(dst []byte, src Ptr) error
}

// Streams manages streams, events and host callbacks.
type Streams interface {
	StreamCreate(dev int, flags StreamFlags, priority int) (Stream, error)
	StreamDestroy(s Stream) error
	StreamSynchronize(s Stream) error
	// StreamQuery reports whether all work queued on s has completed.
	StreamQuery(s Stream) (bool, error)
	StreamWaitEvent(s Stream, e Event) error
	// StreamPriorityRange returns the least and greatest priority (greatest is numerically lowest).
	StreamPriorityRange(dev int) (least, greatest int, err error)
	EventCreate(dev int, flags EventFlags) (Event, error)
	EventDestroy(e Event) error
	EventRecord(e Event, s Stream) error
	// EventQuery reports whether the work captured by the event's last record has completed.
	EventQuery(e Event) (bool, error)
	EventSynchronize(e Event) error
	// EventElapsed returns the milliseconds between two completed timing events.
	EventElapsed(start, end Event) (float32, error)
	// LaunchHostFunc runs fn on a backend thread when s reaches this point.
	// fn must not call the backend. During capture it becomes a graph node.
	LaunchHostFunc(s Stream, fn func()) error
}

// Pools manages stream-ordered memory pools.
type Pools interface {
	DefaultMemPool(dev int) (MemPool, error)
	MemPoolCreate(props PoolProps) (MemPool, error)
	MemPoolDestroy(p MemPool) error
	MemPoolSetAttribute(p MemPool, a PoolAttribute, v uint64) error
	MemPoolGetAttribute(p MemPool, a PoolAttribute) (uint64, error)
	// MemPoolTrimTo releases unused memory until the pool holds at most keep bytes.
	MemPoolTrimTo(p MemPool, keep uint64) error
	// MemPoolSetAccess grants device dev access to the pool's memory.
	MemPoolSetAccess(p MemPool, dev int, a Access) error
	MemPoolGetAccess(p MemPool, dev int) (Access, error)
	// MallocAsync allocates from the stream's device's current pool, ordered on s.
	MallocAsync(size uint64, s Stream) (Ptr, error)
	MallocFromPoolAsync(size uint64, p MemPool, s Stream) (Ptr, error)
	// FreeAsync frees stream-ordered memory once s reaches this point.
	FreeAsync(p Ptr, s Stream) error
}

// Graphs captures streams into graphs and runs them.
type Graphs interface {
	// StreamBeginCapture begins capturing s. A capture in CaptureModeGlobal
	// or CaptureModeThreadLocal must end on the OS thread that began it
	// (the vendors' rule): the backends keep the calling goroutine on its
	// thread (runtime.LockOSThread) until it ends the capture, so end it
	// from the goroutine that began it. A relaxed capture may end anywhere.
	StreamBeginCapture(s Stream, mode CaptureMode) error
	// StreamEndCapture ends the capture of s and returns its graph. From
	// another goroutine than the one that began a global or thread-local
	// capture it fails with STREAM_CAPTURE_WRONG_THREAD and the vendor drops
	// the capture (no graph); the goroutine that began it is released from
	// its thread by its own StreamEndCapture, which then fails too.
	StreamEndCapture(s Stream) (Graph, error)
	StreamCaptureInfo(s Stream) (CaptureInfo, error)
	GraphInstantiate(g Graph) (GraphExec, error)
	GraphLaunch(ge GraphExec, s Stream) error
	GraphExecDestroy(ge GraphExec) error
	GraphDestroy(g Graph) error
	// UserObjectCreate makes an object holding one reference whose destructor
	// runs fn (on a backend thread; fn must not call the backend) when the last
	// reference is released.
	UserObjectCreate(dev int, fn func()) (UserObject, error)
	UserObjectRelease(o UserObject, count uint32) error
	// GraphRetainUserObject gives the graph count references to o; with move
	// the references are taken from the caller's.
	GraphRetainUserObject(g Graph, o UserObject, count uint32, move bool) error
}

// VirtualMemory is the low-level virtual memory API (cuMem*/hipMem* VMM).
type VirtualMemory interface {
	// MemGranularity is the allocation granularity of physical memory on dev
	// (minimum, or the recommended one).
	MemGranularity(dev int, recommended bool) (uint64, error)
	MemAddressReserve(size, alignment uint64) (Ptr, error)
	MemAddressFree(p Ptr, size uint64) error
	MemCreate(dev int, size uint64) (MemHandle, error)
	MemRelease(h MemHandle) error
	MemMap(p Ptr, size, offset uint64, h MemHandle) error
	MemUnmap(p Ptr, size uint64) error
	MemSetAccess(p Ptr, size uint64, dev int, a Access) error
}

// Peers manages peer access between devices.
type Peers interface {
	CanAccessPeer(dev, peer int) (bool, error)
	// EnablePeerAccess lets dev access peer's memory; enabling twice is not an error.
	EnablePeerAccess(dev, peer int) error
	DisablePeerAccess(dev, peer int) error
}

// Backend is one vendor library (or the simulator) behind the project's interface.
// Every method is safe from any goroutine. Operations that the vendor or its
// version lacks return an error matching ErrNotSupported; after Close every
// method returns an error matching ErrClosed. Close does not wait for calls
// already under way on other goroutines (counting them would put shared
// atomic writes on every call's path): a program closes a backend once its
// own calls have returned, as it would a file.
type Backend interface {
	// Name is "cuda", "hip" or "sim".
	Name() string
	// Library is the path of the loaded library ("" for the simulator).
	Library() string
	Version() (Version, error)
	// ErrorName returns the vendor's name for a status code, from the library.
	ErrorName(code int) string
	Close() error

	Devices
	Memory
	Copier
	Streams
	Pools
	Graphs
	VirtualMemory
	Peers
	Kernels
}
