package main

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gpumem/gpumem"
)

// fakeGPU is the part of a backend that info and replay use, for tests that
// must not depend on the simulator. Methods they never call are left to the
// embedded nil interface.
type fakeGPU struct {
	gpumem.Backend
	mu       sync.Mutex
	devices  int
	capacity uint64
	used     uint64
	next     gpumem.Ptr
	live     map[gpumem.Ptr]uint64
	nstream  uintptr
	closed   bool

	askedDevices  int // what the command asked the simulator for
	askedCapacity uint64
}

func newFakeGPU(devices int, capacity uint64) *fakeGPU {
	return &fakeGPU{devices: devices, capacity: capacity, next: 1 << 32, live: map[gpumem.Ptr]uint64{}}
}

func (g *fakeGPU) Name() string    { return "sim" }
func (g *fakeGPU) Library() string { return "" }
func (g *fakeGPU) Version() (gpumem.Version, error) {
	return gpumem.Version{Driver: 13000, Runtime: 13000}, nil
}
func (g *fakeGPU) DeviceCount() (int, error)            { return g.devices, nil }
func (g *fakeGPU) DeviceName(dev int) (string, error)   { return fmt.Sprintf("Fake %d", dev), nil }
func (g *fakeGPU) CanAccessPeer(a, b int) (bool, error) { return a != b, nil }
func (g *fakeGPU) Close() error                         { g.closed = true; return nil }
func (g *fakeGPU) DeviceAttribute(dev int, a gpumem.Attribute) (int, error) {
	switch a {
	case gpumem.AttrComputeCapabilityMajor:
		return 9, nil
	case gpumem.AttrManagedMemory, gpumem.AttrMemoryPoolsSupported:
		return 1, nil
	}
	return 0, gpumem.ErrNotSupported
}
func (g *fakeGPU) MemInfo(dev int) (uint64, uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.capacity - g.used, g.capacity, nil
}
func (g *fakeGPU) StreamCreate(dev int, f gpumem.StreamFlags, p int) (gpumem.Stream, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.nstream++
	return gpumem.Stream{Handle: g.nstream, Device: dev}, nil
}
func (g *fakeGPU) StreamDestroy(s gpumem.Stream) error { return nil }
func (g *fakeGPU) DeviceSynchronize(dev int) error     { return nil }
func (g *fakeGPU) DefaultMemPool(dev int) (gpumem.MemPool, error) {
	return gpumem.MemPool{}, &gpumem.NotSupportedError{Backend: "fake", Op: "DefaultMemPool", Reason: "no pools"}
}
func (g *fakeGPU) StreamSynchronize(s gpumem.Stream) error { return nil }
func (g *fakeGPU) Malloc(dev int, size uint64) (gpumem.Ptr, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if size > g.capacity-g.used {
		return 0, &gpumem.Error{Backend: "sim", Op: "Malloc", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Err: gpumem.ErrOutOfMemory}
	}
	p := g.next
	g.next += gpumem.Ptr((size + 511) &^ 511)
	g.used += size
	g.live[p] = size
	return p, nil
}
func (g *fakeGPU) Free(dev int, p gpumem.Ptr) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	sz, ok := g.live[p]
	if !ok {
		return gpumem.ErrInvalidValue
	}
	delete(g.live, p)
	g.used -= sz
	return nil
}

// passAlloc hands each request to the device.
type passAlloc struct {
	b     gpumem.Backend
	mu    sync.Mutex
	stats gpumem.MemoryStats
	live  map[gpumem.Ptr]uint64
}

func (a *passAlloc) Allocate(size uint64, s gpumem.Stream) (gpumem.Ptr, error) {
	p, err := a.b.Malloc(s.Device, size)
	if err != nil {
		return 0, &gpumem.OutOfMemoryError{Allocator: "test-pass", Requested: size, Err: err}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.live[p] = size
	a.stats.NumDeviceAlloc++
	a.stats.ReservedBytes.Add(gpumem.StatLarge, int64(size))
	a.stats.AllocatedBytes.Add(gpumem.StatLarge, int64(size))
	return p, nil
}
func (a *passAlloc) Deallocate(p gpumem.Ptr, s gpumem.Stream) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	size, ok := a.live[p]
	if !ok {
		return gpumem.ErrInvalidValue
	}
	delete(a.live, p)
	a.stats.NumDeviceFree++
	a.stats.ReservedBytes.Add(gpumem.StatLarge, -int64(size))
	a.stats.AllocatedBytes.Add(gpumem.StatLarge, -int64(size))
	return a.b.Free(s.Device, p)
}
func (a *passAlloc) RecordStream(p gpumem.Ptr, s gpumem.Stream) error { return nil }
func (a *passAlloc) Stats(dev int) gpumem.MemoryStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}
func (a *passAlloc) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for p := range a.live {
		errs = append(errs, a.b.Free(0, p))
	}
	a.live = nil
	return errors.Join(errs...)
}

func (a *passAlloc) ResetPeakStats(dev int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stats.ResetPeaks()
}
func (a *passAlloc) EmptyCache() error                 { return nil }
func (a *passAlloc) SetOOMHandler(gpumem.OOMHandler)   {}
func (a *passAlloc) AddOOMObserver(gpumem.OOMObserver) {}

func init() {
	gpumem.RegisterAllocator(gpumem.AllocatorInfo{Name: "test-pass", New: func(b gpumem.Backend, conf string) (gpumem.Allocator, error) {
		return &passAlloc{b: b, live: map[gpumem.Ptr]uint64{}}, nil
	}})
}
