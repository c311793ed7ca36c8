package deferrable

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/oomhooks"
)

// DeviceResource is the plainest gpumem.Resource: every Allocate is a device
// allocation (Backend.Malloc) and every Deallocate a free, with no cache. It is
// the Manager's default upstream and a handy resource for tests. When the
// device is out of memory it calls the handler set with SetOOMHandler (with no
// lock held) and retries while the handler asks for it, at most
// oomhooks.MaxAttempts times (eight), the bound every allocator of gpumem
// shares.
//
// Deallocate synchronizes the given stream before freeing, so the memory is
// never freed under work still queued on it; work on other streams must be
// complete.
type DeviceResource struct {
	b gpumem.Backend

	hooks oomhooks.Hooks // the OOM handler

	mu     sync.Mutex
	live   map[gpumem.Ptr]devAlloc
	closed bool
}

type devAlloc struct {
	dev  int
	size uint64
}

// NewDeviceResource returns a resource over b's device allocations.
func NewDeviceResource(b gpumem.Backend) *DeviceResource {
	return &DeviceResource{b: b, live: make(map[gpumem.Ptr]devAlloc)}
}

var _ gpumem.Resource = (*DeviceResource)(nil)

// SetOOMHandler installs h (nil removes it).
func (r *DeviceResource) SetOOMHandler(h gpumem.OOMHandler) {
	r.hooks.SetHandler(h)
}

// Allocate allocates size bytes on s.Device.
func (r *DeviceResource) Allocate(size uint64, s gpumem.Stream) (gpumem.Ptr, error) {
	if size == 0 {
		return 0, fmt.Errorf("deferrable: device resource: allocate 0 bytes: %w", gpumem.ErrInvalidValue)
	}
	for attempt := 0; ; attempt++ {
		r.mu.Lock()
		closed := r.closed
		r.mu.Unlock()
		if closed {
			return 0, fmt.Errorf("deferrable: device resource: allocate: %w", gpumem.ErrClosed)
		}
		p, err := r.b.Malloc(s.Device, size)
		if err == nil {
			r.mu.Lock()
			r.live[p] = devAlloc{s.Device, size}
			r.mu.Unlock()
			return p, nil
		}
		if !errors.Is(err, gpumem.ErrOutOfMemory) {
			return 0, fmt.Errorf("deferrable: device resource: allocate %s: %w", gpumem.FormatBytes(size), err)
		}
		if r.hooks.Retry(s.Device, size, attempt) {
			continue
		}
		oom := &gpumem.OutOfMemoryError{Allocator: "deferrable.DeviceResource", Device: s.Device, Requested: size, Err: err,
			Hint: "spill deferrable buffers (give the resource a Manager's OOMHandler) or free memory"}
		if free, total, e := r.b.MemInfo(s.Device); e == nil {
			oom.Free, oom.Capacity = free, total
		}
		oom.NoteOtherProcesses(r.b)
		r.mu.Lock()
		for _, a := range r.live {
			if a.dev == s.Device {
				oom.Allocated += a.size
			}
		}
		r.mu.Unlock()
		oom.Reserved = oom.Allocated
		return 0, oom
	}
}

// Deallocate frees p once s has finished its queued work.
func (r *DeviceResource) Deallocate(p gpumem.Ptr, s gpumem.Stream) error {
	r.mu.Lock()
	a, ok := r.live[p]
	if ok {
		delete(r.live, p)
	}
	r.mu.Unlock()
	if !ok {
		return fmt.Errorf("deferrable: device resource: deallocate %#x: not allocated here (or freed twice): %w", uintptr(p), gpumem.ErrInvalidValue)
	}
	err := r.b.StreamSynchronize(s)
	if err == nil {
		err = r.b.Free(a.dev, p)
	}
	if err != nil {
		// Not freed: kept, so that Close frees it (taken out first, so
		// that no other Deallocate of p frees it meanwhile).
		r.mu.Lock()
		if r.live != nil {
			r.live[p] = a
		}
		r.mu.Unlock()
		return fmt.Errorf("deferrable: device resource: deallocate %#x: %w", uintptr(p), err)
	}
	return nil
}

// Close frees whatever is still allocated; later calls fail with ErrClosed.
func (r *DeviceResource) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return fmt.Errorf("deferrable: device resource: close: %w", gpumem.ErrClosed)
	}
	r.closed = true
	live := r.live
	r.live = nil
	r.mu.Unlock()
	var errs []error
	for p, a := range live {
		if err := r.b.Free(a.dev, p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
