// Package fakegpu is the fake GPU of the project's unit tests: a minimal
// gpumem.Backend that keeps the books of a device's address space and
// nothing else, so that an allocator's tests run without the simulator
// (package sim, the full device) and say exactly which backend calls a
// path makes.
//
// What it does:
//
//   - Devices: any number (WithDevices), each with its capacity (New's
//     capacity, or WithCapacities). MemInfo reports capacity minus what
//     Malloc and MemCreate hold on the device.
//   - Memory: Malloc and Free hand out addresses from one counter, each
//     allocation aligned to WithAlign (default 2 MiB) from WithBase
//     (default 1<<40). Malloc fails with gpumem.ErrOutOfMemory when the
//     device is full; Free of an unknown pointer matches
//     gpumem.ErrInvalidValue.
//   - Streams: StreamCreate hands out handles and StreamDestroy takes them
//     back (an unknown handle matches gpumem.ErrInvalidValue); Streams
//     counts those alive. WithStreamFlags makes StreamCreate accept only
//     the given flags. Stream and event calls complete at once: every
//     event has completed when it is queried, nothing waits.
//   - Virtual memory (on unless WithoutVMM): reserve, create, map, unmap,
//     release with the books of each (Handles, Mappings); MemCreate counts
//     against the device's capacity.
//   - Faults: FailCall(op, n) makes the n-th call of op fail with an
//     injected *gpumem.Error (once).
//   - Counting: every call is counted by operation name (Calls,
//     TotalCalls); Mallocs counts successful Malloc calls.
//   - Opening: Open is a function of the shape of a simulator opener
//     (devices, capacity) that returns the GPU and remembers what it was
//     asked for (Asked).
//   - Allocating: Pass is a pass-through gpumem.Allocator (one Malloc per
//     Allocate) for tests that replay or drive an allocator without the
//     allocator under test.
//
// Operations beyond these (copies, pools, graphs, managed memory) belong
// to the embedded nil gpumem.Backend and panic if called: a test that
// needs them wants the simulator. A GPU is safe for concurrent use.
package fakegpu

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/gpumem/gpumem"
)

// GPU is a fake backend. Build it with New.
type GPU struct {
	gpumem.Backend // operations not faked here: nil, they panic

	mu          sync.Mutex
	name        string
	capacity    []uint64 // per device
	used        []uint64 // per device: Malloc and MemCreate bytes held
	next        uint64   // next address handed out
	align       uint64
	vmm         bool
	streamFlags *gpumem.StreamFlags

	allocs  map[gpumem.Ptr]alloc
	handles map[uint64]alloc
	mapped  map[gpumem.Ptr]uint64
	streams map[uintptr]int // live stream handles -> device
	nextH   uint64          // next handle (events, memory handles, streams)
	events  int             // live events
	mallocs int
	calls   map[string]int
	faults  map[string]int // op -> the call count at which it fails
	closed  bool
	shut    atomic.Bool   // closed, read without the lock (CheckStream)
	epoch   atomic.Uint64 // StreamEpoch: destroyed streams and Close

	askedDevices  int
	askedCapacity uint64
}

type alloc struct {
	dev  int
	size uint64
}

// Option configures a GPU.
type Option func(*GPU)

// WithDevices gives the GPU n devices, each of New's capacity (default 1).
func WithDevices(n int) Option {
	return func(g *GPU) {
		c := g.capacity[0]
		g.capacity = make([]uint64, n)
		for i := range g.capacity {
			g.capacity[i] = c
		}
	}
}

// WithCapacities gives the GPU one device per capacity given.
func WithCapacities(caps ...uint64) Option {
	return func(g *GPU) { g.capacity = append([]uint64(nil), caps...) }
}

// WithName sets what Name returns and the backend named in errors
// (default "fake").
func WithName(name string) Option { return func(g *GPU) { g.name = name } }

// WithBase sets the first address handed out (default 1<<40).
func WithBase(p gpumem.Ptr) Option { return func(g *GPU) { g.next = uint64(p) } }

// WithAlign sets the alignment of each allocation and reservation, a power
// of two (default 2 MiB).
func WithAlign(n uint64) Option { return func(g *GPU) { g.align = n } }

// WithoutVMM turns the virtual memory API off: MemGranularity returns a
// *gpumem.NotSupportedError, as on a device without it.
func WithoutVMM() Option { return func(g *GPU) { g.vmm = false } }

// WithStreamFlags makes StreamCreate reject flags other than f (matching
// gpumem.ErrInvalidValue), for tests that check which streams are asked for.
func WithStreamFlags(f gpumem.StreamFlags) Option {
	return func(g *GPU) { g.streamFlags = &f }
}

// New returns a GPU of one device of capacity bytes, configured by opts.
func New(capacity uint64, opts ...Option) *GPU {
	g := &GPU{
		name: "fake", capacity: []uint64{capacity}, next: 1 << 40, align: 2 << 20, vmm: true,
		allocs: map[gpumem.Ptr]alloc{}, handles: map[uint64]alloc{}, mapped: map[gpumem.Ptr]uint64{},
		streams: map[uintptr]int{}, calls: map[string]int{}, faults: map[string]int{},
	}
	for _, o := range opts {
		o(g)
	}
	g.used = make([]uint64, len(g.capacity))
	return g
}

// Open returns g, remembering devices and capacity (see Asked): it has the
// shape of a function that opens a simulator of that many devices of that
// capacity, so that a test can put it in the simulator's place.
func (g *GPU) Open(devices int, capacity uint64) (gpumem.Backend, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.askedDevices, g.askedCapacity = devices, capacity
	return g, nil
}

// Asked returns what the last call of Open asked for.
func (g *GPU) Asked() (devices int, capacity uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.askedDevices, g.askedCapacity
}

// FailCall makes the n-th call of op (a method name: "Malloc",
// "EventRecord", "MemMap"...) fail with an injected *gpumem.Error; calls
// count from 1 and from the GPU's creation. Only that call fails.
func (g *GPU) FailCall(op string, n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.faults[op] = n
}

// Calls returns the number of calls of op made so far.
func (g *GPU) Calls(op string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls[op]
}

// TotalCalls returns the number of calls of every operation made so far.
func (g *GPU) TotalCalls() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, c := range g.calls {
		n += c
	}
	return n
}

// Ops lists the operations called so far, sorted.
func (g *GPU) Ops() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	ops := make([]string, 0, len(g.calls))
	for op := range g.calls {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	return ops
}

// Mallocs returns the number of successful Malloc calls.
func (g *GPU) Mallocs() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mallocs
}

// Used returns the bytes held on device dev (Malloc and MemCreate).
func (g *GPU) Used(dev int) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if dev < 0 || dev >= len(g.used) {
		return 0
	}
	return g.used[dev]
}

// Allocations returns the number of Malloc allocations not yet freed.
func (g *GPU) Allocations() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.allocs)
}

// Handles returns the number of physical memory handles not yet released.
func (g *GPU) Handles() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.handles)
}

// Mappings returns the number of mappings not yet unmapped.
func (g *GPU) Mappings() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.mapped)
}

// Events returns the number of events not yet destroyed.
func (g *GPU) Events() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.events
}

// Streams returns the number of streams not yet destroyed.
func (g *GPU) Streams() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.streams)
}

// Closed reports whether Close was called.
func (g *GPU) Closed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// callLocked counts a call of op and returns the injected failure of this
// call, if any. g.mu must be held.
func (g *GPU) callLocked(op string) error {
	g.calls[op]++
	if n, ok := g.faults[op]; ok && g.calls[op] == n {
		return &gpumem.Error{Backend: g.name, Op: op, Code: 999, Name: "INJECTED"}
	}
	return nil
}

func (g *GPU) call(op string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.callLocked(op)
}

// deviceLocked checks a device ordinal. g.mu must be held.
func (g *GPU) deviceLocked(op string, dev int) error {
	if dev < 0 || dev >= len(g.capacity) {
		return fmt.Errorf("%s: %s: device %d out of range: %w", g.name, op, dev, gpumem.ErrInvalidValue)
	}
	return nil
}

func (g *GPU) oom(op string) error {
	return &gpumem.Error{Backend: g.name, Op: op, Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Err: gpumem.ErrOutOfMemory}
}

// takeLocked hands out the next aligned range of size bytes. g.mu must be
// held.
func (g *GPU) takeLocked(size uint64) gpumem.Ptr {
	p := gpumem.Ptr(g.next)
	g.next += (size + g.align - 1) &^ (g.align - 1)
	return p
}

// Name returns the name given with WithName ("fake").
func (g *GPU) Name() string { return g.name }

// Library returns "": the fake loads no library.
func (g *GPU) Library() string { return "" }

// Version returns CUDA 13.0's.
func (g *GPU) Version() (gpumem.Version, error) {
	return gpumem.Version{Driver: 13000, Runtime: 13000}, nil
}

// Close marks the GPU closed (see Closed); the fake keeps working.
func (g *GPU) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	g.shut.Store(true)
	g.epoch.Add(1)
	return nil
}

// DeviceCount returns the number of devices.
func (g *GPU) DeviceCount() (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.capacity), nil
}

// DeviceName returns "Fake GPU <dev>".
func (g *GPU) DeviceName(dev int) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.deviceLocked("DeviceName", dev); err != nil {
		return "", err
	}
	return fmt.Sprintf("Fake GPU %d", dev), nil
}

// DeviceAttribute answers compute capability 9.0, managed memory and
// memory pools supported; other attributes match gpumem.ErrNotSupported.
func (g *GPU) DeviceAttribute(dev int, a gpumem.Attribute) (int, error) {
	switch a {
	case gpumem.AttrComputeCapabilityMajor:
		return 9, nil
	case gpumem.AttrManagedMemory, gpumem.AttrMemoryPoolsSupported:
		return 1, nil
	}
	return 0, gpumem.ErrNotSupported
}

// MemInfo returns the device's free and total bytes.
func (g *GPU) MemInfo(dev int) (free, total uint64, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.deviceLocked("MemInfo", dev); err != nil {
		return 0, 0, err
	}
	return g.capacity[dev] - g.used[dev], g.capacity[dev], nil
}

// DeviceSynchronize returns at once.
func (g *GPU) DeviceSynchronize(dev int) error { return g.call("DeviceSynchronize") }

// CanAccessPeer reports true for two different devices.
func (g *GPU) CanAccessPeer(dev, peer int) (bool, error) { return dev != peer, nil }

// Malloc takes size bytes of device dev, failing with an error matching
// gpumem.ErrOutOfMemory when the device is full.
func (g *GPU) Malloc(dev int, size uint64) (gpumem.Ptr, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.callLocked("Malloc"); err != nil {
		return 0, err
	}
	if err := g.deviceLocked("Malloc", dev); err != nil {
		return 0, err
	}
	if size > g.capacity[dev]-g.used[dev] {
		return 0, g.oom("Malloc")
	}
	g.mallocs++
	p := g.takeLocked(size)
	g.used[dev] += size
	g.allocs[p] = alloc{dev, size}
	return p, nil
}

// Free returns an allocation of Malloc.
func (g *GPU) Free(dev int, p gpumem.Ptr) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.callLocked("Free"); err != nil {
		return err
	}
	a, ok := g.allocs[p]
	if !ok {
		return fmt.Errorf("%s: free of %#x: %w", g.name, uintptr(p), gpumem.ErrInvalidValue)
	}
	delete(g.allocs, p)
	g.used[a.dev] -= a.size
	return nil
}

// StreamCreate returns a new stream of device dev.
func (g *GPU) StreamCreate(dev int, flags gpumem.StreamFlags, priority int) (gpumem.Stream, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.callLocked("StreamCreate"); err != nil {
		return gpumem.Stream{}, err
	}
	if err := g.deviceLocked("StreamCreate", dev); err != nil {
		return gpumem.Stream{}, err
	}
	if g.streamFlags != nil && flags != *g.streamFlags {
		return gpumem.Stream{}, fmt.Errorf("%s: stream flags %v, want %v: %w", g.name, flags, *g.streamFlags, gpumem.ErrInvalidValue)
	}
	g.nextH++
	h := uintptr(g.nextH)
	g.streams[h] = dev
	return gpumem.Stream{Handle: h, Device: dev}, nil
}

// StreamDestroy destroys a stream of StreamCreate.
func (g *GPU) StreamDestroy(s gpumem.Stream) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.callLocked("StreamDestroy"); err != nil {
		return err
	}
	if _, ok := g.streams[s.Handle]; !ok {
		return fmt.Errorf("%s: destroying unknown stream %#x: %w", g.name, s.Handle, gpumem.ErrInvalidValue)
	}
	delete(g.streams, s.Handle)
	g.epoch.Add(1)
	return nil
}

// StreamSynchronize returns at once.
func (g *GPU) StreamSynchronize(s gpumem.Stream) error { return g.call("StreamSynchronize") }

// StreamQuery reports the stream idle.
func (g *GPU) StreamQuery(s gpumem.Stream) (bool, error) { return true, g.call("StreamQuery") }

// StreamWaitEvent returns at once.
func (g *GPU) StreamWaitEvent(s gpumem.Stream, e gpumem.Event) error {
	return g.call("StreamWaitEvent")
}

// StreamCaptureInfo reports no capture.
func (g *GPU) StreamCaptureInfo(s gpumem.Stream) (gpumem.CaptureInfo, error) {
	return gpumem.CaptureInfo{}, g.call("StreamCaptureInfo")
}

// EventCreate returns a new event of device dev.
func (g *GPU) EventCreate(dev int, flags gpumem.EventFlags) (gpumem.Event, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.callLocked("EventCreate"); err != nil {
		return gpumem.Event{}, err
	}
	g.events++
	g.nextH++
	return gpumem.Event{Handle: uintptr(g.nextH), Device: dev}, nil
}

// EventDestroy destroys an event.
func (g *GPU) EventDestroy(e gpumem.Event) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.callLocked("EventDestroy"); err != nil {
		return err
	}
	g.events--
	return nil
}

// EventRecord returns at once: the event has completed.
func (g *GPU) EventRecord(e gpumem.Event, s gpumem.Stream) error { return g.call("EventRecord") }

// EventQuery reports every event completed.
func (g *GPU) EventQuery(e gpumem.Event) (bool, error) {
	if err := g.call("EventQuery"); err != nil {
		return false, err
	}
	return true, nil
}

// EventSynchronize returns at once.
func (g *GPU) EventSynchronize(e gpumem.Event) error { return g.call("EventSynchronize") }

// DefaultMemPool is not supported: the fake has no memory pools.
func (g *GPU) DefaultMemPool(dev int) (gpumem.MemPool, error) {
	return gpumem.MemPool{}, &gpumem.NotSupportedError{Backend: g.name, Op: "DefaultMemPool", Reason: "the fake GPU has no memory pools"}
}

// MemGranularity returns 2 MiB, or a *gpumem.NotSupportedError under
// WithoutVMM.
func (g *GPU) MemGranularity(dev int, recommended bool) (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.callLocked("MemGranularity"); err != nil {
		return 0, err
	}
	if !g.vmm {
		return 0, &gpumem.NotSupportedError{Backend: g.name, Op: "MemGranularity", Reason: "no virtual memory management"}
	}
	return 2 << 20, nil
}

// MemAddressReserve reserves a virtual range of size bytes.
func (g *GPU) MemAddressReserve(size, alignment uint64) (gpumem.Ptr, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.callLocked("MemAddressReserve"); err != nil {
		return 0, err
	}
	return g.takeLocked(size), nil
}

// MemAddressFree returns at once.
func (g *GPU) MemAddressFree(p gpumem.Ptr, size uint64) error { return g.call("MemAddressFree") }

// MemCreate creates size bytes of physical memory on device dev, failing
// with an error matching gpumem.ErrOutOfMemory when the device is full.
func (g *GPU) MemCreate(dev int, size uint64) (gpumem.MemHandle, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.callLocked("MemCreate"); err != nil {
		return gpumem.MemHandle{}, err
	}
	if err := g.deviceLocked("MemCreate", dev); err != nil {
		return gpumem.MemHandle{}, err
	}
	if size > g.capacity[dev]-g.used[dev] {
		return gpumem.MemHandle{}, g.oom("MemCreate")
	}
	g.used[dev] += size
	g.nextH++
	g.handles[g.nextH] = alloc{dev, size}
	return gpumem.MemHandle{Handle: g.nextH, Device: dev}, nil
}

// MemRelease releases physical memory of MemCreate.
func (g *GPU) MemRelease(h gpumem.MemHandle) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.callLocked("MemRelease"); err != nil {
		return err
	}
	a, ok := g.handles[h.Handle]
	if !ok {
		return fmt.Errorf("%s: releasing unknown handle %d: %w", g.name, h.Handle, gpumem.ErrInvalidValue)
	}
	g.used[a.dev] -= a.size
	delete(g.handles, h.Handle)
	return nil
}

// MemMap records a mapping at p.
func (g *GPU) MemMap(p gpumem.Ptr, size, offset uint64, h gpumem.MemHandle) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.callLocked("MemMap"); err != nil {
		return err
	}
	g.mapped[p] = size
	return nil
}

// MemUnmap removes every mapping that starts within [p, p+size): one unmap
// may span several mappings, as in CUDA.
func (g *GPU) MemUnmap(p gpumem.Ptr, size uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.callLocked("MemUnmap"); err != nil {
		return err
	}
	for m := range g.mapped {
		if m >= p && uint64(m-p) < size {
			delete(g.mapped, m)
		}
	}
	return nil
}

// MemSetAccess returns at once.
func (g *GPU) MemSetAccess(p gpumem.Ptr, size uint64, dev int, a gpumem.Access) error {
	return g.call("MemSetAccess")
}

// CheckStream implements gpumem.StreamChecker as leniently as the fake's
// StreamCaptureInfo (any handle is a stream), but without counting a call:
// ErrClosed after Close, nil otherwise.
func (g *GPU) CheckStream(s gpumem.Stream) error {
	if g.shut.Load() {
		return fmt.Errorf("fakegpu: closed: %w", gpumem.ErrClosed)
	}
	return nil
}

// StreamEpoch implements gpumem.StreamChecker: incremented by StreamDestroy
// and Close.
func (g *GPU) StreamEpoch() *atomic.Uint64 { return &g.epoch }
