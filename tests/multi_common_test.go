package tests

// Shared machinery of the many-device tests: every allocator behind one
// small interface, and a worker that allocates, writes, checks and frees on
// one device's stream.

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/deferrable"
	"github.com/gpumem/gpumem/managed"
)

// multiAlloc is one allocator serving every device of a backend.
type multiAlloc struct {
	name string
	// alloc returns memory of size bytes usable on s and the function that
	// frees it, its last use ordered on s.
	alloc func(size uint64, s gpumem.Stream) (gpumem.Ptr, func() error, error)
	// stats is the allocator's statistics of one device (nil: the allocator
	// keeps none in gpumem.MemoryStats form).
	stats func(dev int) gpumem.MemoryStats
	close func() error
}

// resourceAlloc wraps an allocator that is a gpumem.Resource.
func resourceAlloc(name string, r interface {
	gpumem.Resource
	Stats(dev int) gpumem.MemoryStats
	Close() error
}) *multiAlloc {
	return &multiAlloc{
		name: name,
		alloc: func(size uint64, s gpumem.Stream) (gpumem.Ptr, func() error, error) {
			p, err := r.Allocate(size, s)
			if err != nil {
				return 0, nil, err
			}
			return p, func() error { return r.Deallocate(p, s) }, nil
		},
		stats: r.Stats,
		close: r.Close,
	}
}

// multiAllocators returns a constructor for each allocator of the project,
// each serving every device of b. managedLimit caps the managed
// allocator's share of the smallest device (its guard).
func multiAllocators(managedFraction float64) []struct {
	name string
	open func(b gpumem.Backend, ndev int) (*multiAlloc, error)
} {
	return []struct {
		name string
		open func(b gpumem.Backend, ndev int) (*multiAlloc, error)
	}{
		{"caching", func(b gpumem.Backend, ndev int) (*multiAlloc, error) {
			a, err := caching.New(b, caching.Options{})
			if err != nil {
				return nil, err
			}
			return resourceAlloc("caching", a), nil
		}},
		{"asyncpool", func(b gpumem.Backend, ndev int) (*multiAlloc, error) {
			a, err := asyncpool.New(b, asyncpool.Options{})
			if err != nil {
				return nil, err
			}
			return resourceAlloc("asyncpool", a), nil
		}},
		{"managed", func(b gpumem.Backend, ndev int) (*multiAlloc, error) {
			a, err := managed.New(b, managed.Options{Force: true, MaxDeviceFraction: managedFraction})
			if err != nil {
				return nil, err
			}
			return resourceAlloc("managed", a), nil
		}},
		{"deferrable", func(b gpumem.Backend, ndev int) (*multiAlloc, error) {
			ms := make([]*deferrable.Manager, ndev)
			for d := range ms {
				m, err := deferrable.New(b, d, deferrable.Options{})
				if err != nil {
					for _, o := range ms[:d] {
						_ = o.Close()
					}
					return nil, err
				}
				ms[d] = m
			}
			return &multiAlloc{
				name: "deferrable",
				alloc: func(size uint64, s gpumem.Stream) (gpumem.Ptr, func() error, error) {
					if s.Device < 0 || s.Device >= len(ms) {
						return 0, nil, fmt.Errorf("no manager of device %d: %w", s.Device, gpumem.ErrInvalidValue)
					}
					buf, err := ms[s.Device].Alloc(size, s)
					if err != nil {
						return 0, nil, err
					}
					p, err := buf.Acquire(s)
					if err != nil {
						return 0, nil, errors.Join(err, buf.Free())
					}
					return p, func() error { return errors.Join(buf.Release(), buf.Free()) }, nil
				},
				close: func() error {
					var errs []error
					for _, m := range ms {
						errs = append(errs, m.Close())
					}
					return errors.Join(errs...)
				},
			}, nil
		}},
	}
}

// multiLoad is what one worker does.
type multiLoad struct {
	minSize, maxSize uint64
	sample           int            // bytes read back at each end of an allocation
	iterations       int            // 0: until the deadline
	deadline         time.Time      // with iterations 0
	hold             int            // allocations kept live at once (ring)
	counts           []atomic.Int64 // allocations made, per device
	bytes            []atomic.Int64 // bytes allocated, per device
}

// multiWorker allocates random sizes on s, writes a pattern with
// MemsetAsync, reads back a sample from both ends, checks it and frees,
// keeping up to load.hold allocations live. It returns the first failure.
func multiWorker(b gpumem.Backend, a *multiAlloc, s gpumem.Stream, seed int64, load *multiLoad) error {
	rng := rand.New(rand.NewSource(seed))
	type live struct {
		p    gpumem.Ptr
		size uint64
		val  byte
		free func() error
	}
	ring := make([]live, 0, load.hold)
	// Samples are read back on the block's own stream into pinned host
	// memory (the device's own context, as multi-device code must), then
	// copied out of the pinned buffer.
	host, err := b.MallocHost(uint64(2 * load.sample))
	if err != nil {
		return fmt.Errorf("%s: MallocHost: %w", a.name, err)
	}
	defer b.FreeHost(host)
	check := func(l live) error {
		n := min(uint64(load.sample), l.size)
		ends := []uint64{0, l.size - n}
		for i, off := range ends {
			if err := b.MemcpyAsync(host.Add(uint64(i)*n), l.p.Add(off), n, s); err != nil {
				return fmt.Errorf("%s: reading %d bytes at %#x+%d on %v: %w", a.name, n, uint64(l.p), off, s, err)
			}
		}
		if err := b.StreamSynchronize(s); err != nil {
			return err
		}
		buf := make([]byte, 2*n)
		if err := b.CopyFromDevice(buf, host); err != nil {
			return fmt.Errorf("%s: reading pinned memory: %w", a.name, err)
		}
		for i, v := range buf {
			if v != l.val {
				off := ends[i/int(n)] + uint64(i%int(n))
				return fmt.Errorf("%s: %v: byte %d of a %d-byte block is %#x, want %#x", a.name, s, off, l.size, v, l.val)
			}
		}
		return nil
	}
	release := func(l live) error {
		if err := check(l); err != nil {
			return err
		}
		if err := l.free(); err != nil {
			return fmt.Errorf("%s: free on %v: %w", a.name, s, err)
		}
		return nil
	}
	defer func() {
		for _, l := range ring {
			_ = l.free()
		}
	}()
	for i := 0; ; i++ {
		if load.iterations > 0 && i >= load.iterations {
			break
		}
		if load.iterations == 0 && time.Now().After(load.deadline) {
			break
		}
		// Log-uniform sizes: as many small blocks as large ones.
		lo, hi := float64(load.minSize), float64(load.maxSize)
		size := uint64(lo * math.Pow(hi/lo, rng.Float64()))
		p, free, err := a.alloc(size, s)
		if err != nil {
			return fmt.Errorf("%s: allocating %d bytes on %v: %w", a.name, size, s, err)
		}
		load.counts[s.Device].Add(1)
		load.bytes[s.Device].Add(int64(size))
		val := byte(rng.Intn(255) + 1)
		if err := b.MemsetAsync(p, val, size, s); err != nil {
			_ = free()
			return fmt.Errorf("%s: MemsetAsync on %v: %w", a.name, s, err)
		}
		ring = append(ring, live{p, size, val, free})
		if len(ring) >= load.hold {
			l := ring[0]
			ring = ring[1:]
			if err := release(l); err != nil {
				return err
			}
		}
	}
	for len(ring) > 0 {
		l := ring[0]
		ring = ring[1:]
		if err := release(l); err != nil {
			return err
		}
	}
	return nil
}

// multiStreams creates workers non-blocking streams spread round robin
// over ndev devices.
func multiStreams(b gpumem.Backend, ndev, workers int) ([]gpumem.Stream, error) {
	streams := make([]gpumem.Stream, 0, workers)
	for w := 0; w < workers; w++ {
		s, err := b.StreamCreate(w%ndev, gpumem.StreamNonBlocking, 0)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("StreamCreate on device %d: %w", w%ndev, err), multiDestroyStreams(b, streams))
		}
		streams = append(streams, s)
	}
	return streams, nil
}

// multiRun runs one worker goroutine on each stream and returns every
// failure.
func multiRun(b gpumem.Backend, a *multiAlloc, streams []gpumem.Stream, load *multiLoad) []error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for w, s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := multiWorker(b, a, s, int64(w)*7919+1, load); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errs
}

// multiDestroyStreams is called by the tests once the allocators are closed.
func multiDestroyStreams(b gpumem.Backend, ss []gpumem.Stream) error {
	var errs []error
	for _, s := range ss {
		errs = append(errs, b.StreamSynchronize(s), b.StreamDestroy(s))
	}
	return errors.Join(errs...)
}

// multiPattern is n bytes that differ from their neighbours and depend on seed.
func multiPattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*131+i>>8) ^ seed
	}
	return b
}
