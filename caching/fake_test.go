package caching

import (
	"fmt"
	"sync"

	"github.com/gpumem/gpumem"
)

// fakeGPU is a minimal backend for the allocator's own tests and benchmarks:
// address-space bookkeeping and capacity only, events that complete at once.
// The simulator (package sim) is the full device; this keeps the core's
// tests independent of it.
type fakeGPU struct {
	gpumem.Backend // methods not implemented here panic if called

	mu       sync.Mutex
	capacity uint64
	used     uint64
	next     uint64
	allocs   map[gpumem.Ptr]uint64
	handles  map[uint64]uint64
	mapped   map[gpumem.Ptr]uint64
	nextH    uint64
	noVMM    bool
	calls    map[string]int
	faults   map[string]int // op -> fail when its call count reaches this
	events   int
}

func newFake(capacity uint64) *fakeGPU {
	return &fakeGPU{capacity: capacity, next: 1 << 40, allocs: map[gpumem.Ptr]uint64{},
		handles: map[uint64]uint64{}, mapped: map[gpumem.Ptr]uint64{}, calls: map[string]int{}}
}

func (f *fakeGPU) call(op string) { f.calls[op]++ }

// fail reports an injected failure of op (f.mu held).
func (f *fakeGPU) fail(op string) error {
	f.calls[op]++
	if n, ok := f.faults[op]; ok && f.calls[op] == n {
		return &gpumem.Error{Backend: "fake", Op: op, Code: 999, Name: "INJECTED"}
	}
	return nil
}

func (f *fakeGPU) Name() string              { return "fake" }
func (f *fakeGPU) DeviceCount() (int, error) { return 1, nil }
func (f *fakeGPU) MemInfo(dev int) (uint64, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.capacity - f.used, f.capacity, nil
}
func (f *fakeGPU) DeviceSynchronize(int) error {
	f.mu.Lock()
	f.call("DeviceSynchronize")
	f.mu.Unlock()
	return nil
}

func (f *fakeGPU) Malloc(dev int, size uint64) (gpumem.Ptr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail("Malloc"); err != nil {
		return 0, err
	}
	if f.used+size > f.capacity {
		return 0, &gpumem.Error{Backend: "fake", Op: "Malloc", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Err: gpumem.ErrOutOfMemory}
	}
	p := gpumem.Ptr(f.next)
	f.next += (size + (2<<20 - 1)) &^ (2<<20 - 1)
	f.used += size
	f.allocs[p] = size
	return p, nil
}

func (f *fakeGPU) Free(dev int, p gpumem.Ptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("Free")
	sz, ok := f.allocs[p]
	if !ok {
		return fmt.Errorf("fake: free of %#x: %w", uintptr(p), gpumem.ErrInvalidValue)
	}
	delete(f.allocs, p)
	f.used -= sz
	return nil
}

func (f *fakeGPU) EventCreate(dev int, _ gpumem.EventFlags) (gpumem.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("EventCreate")
	f.events++
	f.nextH++
	return gpumem.Event{Handle: uintptr(f.nextH), Device: dev}, nil
}
func (f *fakeGPU) EventDestroy(gpumem.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events--
	return nil
}
func (f *fakeGPU) EventRecord(gpumem.Event, gpumem.Stream) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fail("EventRecord")
}
func (f *fakeGPU) EventQuery(gpumem.Event) (bool, error)             { return true, nil }
func (f *fakeGPU) EventSynchronize(gpumem.Event) error               { return nil }
func (f *fakeGPU) StreamWaitEvent(gpumem.Stream, gpumem.Event) error { return nil }
func (f *fakeGPU) StreamSynchronize(gpumem.Stream) error             { return nil }
func (f *fakeGPU) StreamCaptureInfo(gpumem.Stream) (gpumem.CaptureInfo, error) {
	return gpumem.CaptureInfo{}, nil
}

func (f *fakeGPU) MemGranularity(int, bool) (uint64, error) {
	if f.noVMM {
		return 0, &gpumem.NotSupportedError{Backend: "fake", Op: "MemGranularity", Reason: "no VMM"}
	}
	return 2 << 20, nil
}
func (f *fakeGPU) MemAddressReserve(size, align uint64) (gpumem.Ptr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail("MemAddressReserve"); err != nil {
		return 0, err
	}
	p := gpumem.Ptr(f.next)
	f.next += (size + (2<<20 - 1)) &^ (2<<20 - 1)
	return p, nil
}
func (f *fakeGPU) MemAddressFree(gpumem.Ptr, uint64) error { return nil }
func (f *fakeGPU) MemCreate(dev int, size uint64) (gpumem.MemHandle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail("MemCreate"); err != nil {
		return gpumem.MemHandle{}, err
	}
	if f.used+size > f.capacity {
		return gpumem.MemHandle{}, &gpumem.Error{Backend: "fake", Op: "MemCreate", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Err: gpumem.ErrOutOfMemory}
	}
	f.used += size
	f.nextH++
	f.handles[f.nextH] = size
	return gpumem.MemHandle{Handle: f.nextH, Device: dev}, nil
}
func (f *fakeGPU) MemRelease(h gpumem.MemHandle) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.used -= f.handles[h.Handle]
	delete(f.handles, h.Handle)
	return nil
}
func (f *fakeGPU) MemMap(p gpumem.Ptr, size, off uint64, h gpumem.MemHandle) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail("MemMap"); err != nil {
		return err
	}
	f.mapped[p] = size
	return nil
}
func (f *fakeGPU) MemUnmap(p gpumem.Ptr, size uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	// One unmap may span several mappings, as in CUDA.
	for m := range f.mapped {
		if m >= p && uint64(m-p) < size {
			delete(f.mapped, m)
		}
	}
	return nil
}
func (f *fakeGPU) MemSetAccess(gpumem.Ptr, uint64, int, gpumem.Access) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fail("MemSetAccess")
}
