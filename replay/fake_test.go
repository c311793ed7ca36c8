package replay

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gpumem/gpumem"
)

// fakeGPU is the part of a backend a replay uses: one device of a fixed
// capacity whose Malloc fails like a GPU's when it is full. Methods a replay
// never calls are left to the embedded nil interface.
type fakeGPU struct {
	gpumem.Backend
	mu       sync.Mutex
	capacity uint64
	used     uint64
	next     gpumem.Ptr
	live     map[gpumem.Ptr]uint64
	streams  map[uintptr]bool
	nstream  uintptr
	mallocs  int
}

func newFakeGPU(capacity uint64) *fakeGPU {
	return &fakeGPU{capacity: capacity, next: 1 << 32, live: map[gpumem.Ptr]uint64{}, streams: map[uintptr]bool{}}
}

func (g *fakeGPU) Name() string                       { return "fake" }
func (g *fakeGPU) DeviceCount() (int, error)          { return 1, nil }
func (g *fakeGPU) DeviceName(dev int) (string, error) { return "Fake GPU", nil }
func (g *fakeGPU) MemInfo(dev int) (uint64, uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.capacity - g.used, g.capacity, nil
}

func (g *fakeGPU) StreamCreate(dev int, flags gpumem.StreamFlags, prio int) (gpumem.Stream, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if dev != 0 || flags != gpumem.StreamNonBlocking {
		return gpumem.Stream{}, fmt.Errorf("fake: bad stream request: %w", gpumem.ErrInvalidValue)
	}
	g.nstream++
	g.streams[g.nstream] = true
	return gpumem.Stream{Handle: g.nstream, Device: dev}, nil
}

func (g *fakeGPU) StreamDestroy(s gpumem.Stream) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.streams[s.Handle] {
		return fmt.Errorf("fake: unknown stream: %w", gpumem.ErrInvalidValue)
	}
	delete(g.streams, s.Handle)
	return nil
}

func (g *fakeGPU) StreamSynchronize(s gpumem.Stream) error { return nil }

func (g *fakeGPU) Malloc(dev int, size uint64) (gpumem.Ptr, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if size > g.capacity-g.used {
		return 0, &gpumem.Error{Backend: "fake", Op: "Malloc", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Err: gpumem.ErrOutOfMemory}
	}
	g.mallocs++
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
		return fmt.Errorf("fake: free of unknown pointer: %w", gpumem.ErrInvalidValue)
	}
	delete(g.live, p)
	g.used -= sz
	return nil
}

// passAlloc hands every request straight to the device: its reserved bytes
// are exactly the live requested bytes, so a replay's peak reserved must
// equal the trace's floor.
type passAlloc struct {
	b       gpumem.Backend
	mu      sync.Mutex
	stats   gpumem.MemoryStats
	live    map[gpumem.Ptr]uint64
	owner   map[gpumem.Ptr]gpumem.Stream
	records int
	closed  bool
	resets  bool
}

func newPassAlloc(b gpumem.Backend) *passAlloc {
	return &passAlloc{b: b, live: map[gpumem.Ptr]uint64{}, owner: map[gpumem.Ptr]gpumem.Stream{}, resets: true}
}

func (a *passAlloc) Allocate(size uint64, s gpumem.Stream) (gpumem.Ptr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return 0, gpumem.ErrClosed
	}
	p, err := a.b.Malloc(s.Device, size)
	if err != nil {
		a.stats.NumOOMs++
		return 0, &gpumem.OutOfMemoryError{Allocator: "pass", Requested: size, Err: err}
	}
	a.live[p] = size
	a.owner[p] = s
	a.stats.NumDeviceAlloc++
	a.stats.AllocatedBytes.Add(gpumem.StatLarge, int64(size))
	a.stats.ReservedBytes.Add(gpumem.StatLarge, int64(size))
	a.stats.RequestedBytes.Add(gpumem.StatLarge, int64(size))
	return p, nil
}

func (a *passAlloc) Deallocate(p gpumem.Ptr, s gpumem.Stream) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.freeLocked(p, s)
}

func (a *passAlloc) freeLocked(p gpumem.Ptr, s gpumem.Stream) error {
	size, ok := a.live[p]
	if !ok {
		return fmt.Errorf("pass: unknown pointer %#x: %w", p, gpumem.ErrInvalidValue)
	}
	if a.owner[p] != s {
		return fmt.Errorf("pass: freed on %v, allocated on %v: %w", s, a.owner[p], gpumem.ErrInvalidValue)
	}
	if err := a.b.Free(s.Device, p); err != nil {
		return err
	}
	delete(a.live, p)
	delete(a.owner, p)
	a.stats.NumDeviceFree++
	a.stats.AllocatedBytes.Add(gpumem.StatLarge, -int64(size))
	a.stats.ReservedBytes.Add(gpumem.StatLarge, -int64(size))
	a.stats.RequestedBytes.Add(gpumem.StatLarge, -int64(size))
	return nil
}

func (a *passAlloc) RecordStream(p gpumem.Ptr, s gpumem.Stream) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.live[p]; !ok {
		return fmt.Errorf("pass: record of unknown pointer: %w", gpumem.ErrInvalidValue)
	}
	a.records++
	return nil
}

func (a *passAlloc) Stats(dev int) gpumem.MemoryStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}

func (a *passAlloc) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return gpumem.ErrClosed
	}
	a.closed = true
	var errs []error
	for p, s := range a.owner {
		errs = append(errs, a.freeLocked(p, s))
	}
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
