package deferrable

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/gpumem/gpumem"
)

// hostBytesBackend is implemented by backends whose pinned host memory is not
// the process's own memory (the simulator) but can be viewed as a Go slice.
type hostBytesBackend interface {
	HostBytes(p gpumem.Ptr, n uint64) ([]byte, error)
}

// mover performs every copy between the device and the host side. It owns a
// non-blocking copy stream. Copies between the device and the pinned host
// arena are one DMA each (copyDirect). Copies between the device and the disk
// tier go through a ring of pinned staging buffers, created on first use; such
// a transfer is cut into chunks of one staging buffer each, so that the DMA of
// one chunk overlaps the file I/O of the previous one. One transfer runs at a
// time (mu): transfers are bound by the same copy engine anyway, and a caller
// never holds the manager's lock here.
type mover struct {
	b     gpumem.Backend
	dev   int
	chunk uint64
	n     int

	smu    sync.Mutex // guards the stream's creation and destruction
	hasStr bool
	stream gpumem.Stream

	mu     sync.Mutex // held for a whole transfer
	inited bool
	slots  []slot
	hasEv  bool
	syncEv gpumem.Event // recorded after a direct copy and waited for
}

// slot is one pinned staging buffer.
type slot struct {
	ptr    gpumem.Ptr
	mem    []byte // the pinned memory itself, or a Go copy when it is not addressable
	direct bool   // mem aliases the pinned memory
	ev     gpumem.Event
	busy   bool // ev was recorded after a copy that uses ptr and not yet waited for
	// for device-to-host: a chunk that has landed (once ev completes) but not been consumed
	has     bool
	off, sz uint64
}

func newMover(b gpumem.Backend, dev int, chunk uint64, n int) *mover {
	return &mover{b: b, dev: dev, chunk: chunk, n: n}
}

// pinnedView returns the pinned host memory at p as a slice, or nil when the
// backend does not let the process address it directly.
func pinnedView(b gpumem.Backend, p gpumem.Ptr, n uint64) []byte {
	switch b.Name() {
	case "cuda", "hip":
		// Page-locked host memory from cuMemHostAlloc / hipHostMalloc is
		// ordinary process memory.
		return unsafe.Slice(*(**byte)(unsafe.Pointer(&p)), n)
	}
	if hb, ok := b.(hostBytesBackend); ok {
		if mem, err := hb.HostBytes(p, n); err == nil && uint64(len(mem)) >= n {
			return mem[:n]
		}
	}
	return nil
}

// copyStream returns the copy stream, creating it on first use. The manager
// allocates and frees all its device memory in stream order on it.
func (mv *mover) copyStream() (gpumem.Stream, error) {
	mv.smu.Lock()
	defer mv.smu.Unlock()
	if !mv.hasStr {
		s, err := mv.b.StreamCreate(mv.dev, gpumem.StreamNonBlocking, 0)
		if err != nil {
			return gpumem.Stream{}, fmt.Errorf("deferrable: create copy stream: %w", err)
		}
		mv.stream, mv.hasStr = s, true
	}
	return mv.stream, nil
}

// current returns the copy stream if it exists (for history records).
func (mv *mover) current() gpumem.Stream {
	mv.smu.Lock()
	defer mv.smu.Unlock()
	if !mv.hasStr {
		return gpumem.Stream{Device: mv.dev}
	}
	return mv.stream
}

// initLocked creates the copy stream, the staging buffers and their events.
func (mv *mover) initLocked() error {
	if mv.inited {
		return nil
	}
	if _, err := mv.copyStream(); err != nil {
		return err
	}
	slots := make([]slot, 0, mv.n)
	fail := func(err error) error {
		for _, sl := range slots {
			mv.b.EventDestroy(sl.ev)
			mv.b.FreeHost(sl.ptr)
		}
		return err
	}
	for i := 0; i < mv.n; i++ {
		p, err := mv.b.MallocHost(mv.chunk)
		if err != nil {
			return fail(fmt.Errorf("deferrable: allocate pinned staging buffer of %s: %w", gpumem.FormatBytes(mv.chunk), err))
		}
		ev, err := mv.b.EventCreate(mv.dev, gpumem.EventDisableTiming)
		if err != nil {
			mv.b.FreeHost(p)
			return fail(fmt.Errorf("deferrable: create staging event: %w", err))
		}
		sl := slot{ptr: p, ev: ev}
		if v := pinnedView(mv.b, p, mv.chunk); v != nil {
			sl.mem, sl.direct = v, true
		} else {
			sl.mem = make([]byte, mv.chunk)
		}
		slots = append(slots, sl)
	}
	mv.slots, mv.inited = slots, true
	return nil
}

// idle waits until the copy of a slot has completed.
func (mv *mover) idle(sl *slot) error {
	if !sl.busy {
		return nil
	}
	if err := mv.b.EventSynchronize(sl.ev); err != nil {
		return fmt.Errorf("deferrable: wait for staging copy: %w", err)
	}
	sl.busy = false
	return nil
}

// consume hands a landed chunk to sink.
func (mv *mover) consume(sl *slot, sink func(off uint64, p []byte) error) error {
	if !sl.has {
		return nil
	}
	sl.has = false
	if err := mv.idle(sl); err != nil {
		return err
	}
	if !sl.direct {
		if err := mv.b.CopyFromDevice(sl.mem[:sl.sz], sl.ptr); err != nil {
			return fmt.Errorf("deferrable: read staging buffer: %w", err)
		}
	}
	return sink(sl.off, sl.mem[:sl.sz])
}

// abortLocked leaves the ring reusable after a failed transfer: the landed
// chunks are dropped and the copy stream is drained so that nothing still
// reads or writes memory the caller is about to give back.
func (mv *mover) abortLocked() {
	for i := range mv.slots {
		mv.slots[i].has = false
	}
	if mv.b.StreamSynchronize(mv.stream) == nil {
		for i := range mv.slots {
			mv.slots[i].busy = false
		}
	}
}

// toHost copies size bytes at device address src to the host, in chunks handed
// to sink in any order, after making the copy stream wait for each of waits.
// It returns once every chunk has been consumed.
func (mv *mover) toHost(src gpumem.Ptr, size uint64, waits []gpumem.Event, sink func(off uint64, p []byte) error) error {
	mv.mu.Lock()
	defer mv.mu.Unlock()
	if err := mv.initLocked(); err != nil {
		return err
	}
	for _, e := range waits {
		if err := mv.b.StreamWaitEvent(mv.stream, e); err != nil {
			return fmt.Errorf("deferrable: order copy after last use: %w", err)
		}
	}
	i := 0
	for off := uint64(0); off < size; off += mv.chunk {
		n := min(mv.chunk, size-off)
		sl := &mv.slots[i%len(mv.slots)]
		i++
		if err := mv.consume(sl, sink); err != nil {
			mv.abortLocked()
			return err
		}
		if err := mv.idle(sl); err != nil {
			mv.abortLocked()
			return err
		}
		if err := mv.b.MemcpyAsync(sl.ptr, src.Add(off), n, mv.stream); err != nil {
			mv.abortLocked()
			return fmt.Errorf("deferrable: copy device to staging: %w", err)
		}
		if err := mv.b.EventRecord(sl.ev, mv.stream); err != nil {
			mv.abortLocked()
			return fmt.Errorf("deferrable: record staging event: %w", err)
		}
		sl.busy, sl.has, sl.off, sl.sz = true, true, off, n
	}
	for j := range mv.slots {
		if err := mv.consume(&mv.slots[(i+j)%len(mv.slots)], sink); err != nil {
			mv.abortLocked()
			return err
		}
	}
	return nil
}

// toDevice copies size bytes to device address dst, each chunk first filled by
// source, and records done on the copy stream after the last chunk. It returns
// once the last chunk is queued; the caller orders its work after done.
func (mv *mover) toDevice(dst gpumem.Ptr, size uint64, source func(off uint64, p []byte) error, done gpumem.Event) error {
	mv.mu.Lock()
	defer mv.mu.Unlock()
	if err := mv.initLocked(); err != nil {
		return err
	}
	i := 0
	for off := uint64(0); off < size; off += mv.chunk {
		n := min(mv.chunk, size-off)
		sl := &mv.slots[i%len(mv.slots)]
		i++
		if err := mv.idle(sl); err != nil {
			mv.abortLocked()
			return err
		}
		if err := source(off, sl.mem[:n]); err != nil {
			mv.abortLocked()
			return err
		}
		if !sl.direct {
			if err := mv.b.CopyToDevice(sl.ptr, sl.mem[:n]); err != nil {
				mv.abortLocked()
				return fmt.Errorf("deferrable: fill staging buffer: %w", err)
			}
		}
		if err := mv.b.MemcpyAsync(dst.Add(off), sl.ptr, n, mv.stream); err != nil {
			mv.abortLocked()
			return fmt.Errorf("deferrable: copy staging to device: %w", err)
		}
		if err := mv.b.EventRecord(sl.ev, mv.stream); err != nil {
			mv.abortLocked()
			return fmt.Errorf("deferrable: record staging event: %w", err)
		}
		sl.busy = true
	}
	if err := mv.b.EventRecord(done, mv.stream); err != nil {
		mv.abortLocked()
		return fmt.Errorf("deferrable: record copy event: %w", err)
	}
	return nil
}

// copyDirect copies size bytes from src to dst (device memory and pinned
// host memory of the arena, either way) with one DMA on the copy stream,
// ordered after waits, and returns once the copy has completed (an event
// recorded after it, synchronized): the caller's timing covers the whole copy.
// On failure the copy stream is drained, so nothing still touches either side.
func (mv *mover) copyDirect(dst, src gpumem.Ptr, size uint64, waits []gpumem.Event) error {
	mv.mu.Lock()
	defer mv.mu.Unlock()
	if _, err := mv.copyStream(); err != nil {
		return err
	}
	if !mv.hasEv {
		ev, err := mv.b.EventCreate(mv.dev, gpumem.EventDisableTiming)
		if err != nil {
			return fmt.Errorf("deferrable: create copy event: %w", err)
		}
		mv.syncEv, mv.hasEv = ev, true
	}
	err := func() error {
		for _, e := range waits {
			if err := mv.b.StreamWaitEvent(mv.stream, e); err != nil {
				return fmt.Errorf("deferrable: order copy after last use: %w", err)
			}
		}
		if err := mv.b.MemcpyAsync(dst, src, size, mv.stream); err != nil {
			return fmt.Errorf("deferrable: copy: %w", err)
		}
		if err := mv.b.EventRecord(mv.syncEv, mv.stream); err != nil {
			return fmt.Errorf("deferrable: record copy event: %w", err)
		}
		if err := mv.b.EventSynchronize(mv.syncEv); err != nil {
			return fmt.Errorf("deferrable: wait for copy: %w", err)
		}
		return nil
	}()
	if err != nil {
		mv.abortLocked()
	}
	return err
}

// close drains the copy stream and frees the ring. What the backend
// refuses to destroy or free is kept, and the next close tries it again.
func (mv *mover) close() error {
	mv.mu.Lock()
	defer mv.mu.Unlock()
	mv.smu.Lock()
	defer mv.smu.Unlock()
	var errs []error
	if mv.hasStr {
		if err := mv.b.StreamSynchronize(mv.stream); err != nil {
			errs = append(errs, err)
		}
	}
	kept := mv.slots[:0]
	for _, sl := range mv.slots {
		if sl.ev != (gpumem.Event{}) {
			if err := mv.b.EventDestroy(sl.ev); err != nil {
				errs = append(errs, err)
			} else {
				sl.ev = gpumem.Event{}
			}
		}
		if sl.ptr != 0 {
			if err := mv.b.FreeHost(sl.ptr); err != nil {
				errs = append(errs, err)
			} else {
				sl.ptr, sl.mem = 0, nil
			}
		}
		if sl.ev != (gpumem.Event{}) || sl.ptr != 0 {
			kept = append(kept, sl)
		}
	}
	mv.slots = kept
	mv.inited = false
	if mv.hasEv {
		if err := mv.b.EventDestroy(mv.syncEv); err != nil {
			errs = append(errs, err)
		} else {
			mv.hasEv = false
		}
	}
	if mv.hasStr {
		if err := mv.b.StreamDestroy(mv.stream); err != nil {
			errs = append(errs, err)
		} else {
			mv.hasStr = false
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("deferrable: close copy machinery: %w", err)
	}
	return nil
}

// parallelCopy copies src into dst (min of their lengths) with up to
// GOMAXPROCS goroutines (at most 8) for large copies: one goroutine's memmove
// (and the first-touch page faults of fresh host memory) is well below the
// copy engine's bandwidth.
func parallelCopy(dst, src []byte) {
	n := min(len(dst), len(src))
	const piece = 1 << 20
	k := min(runtime.GOMAXPROCS(0), n/piece, 8)
	if k <= 1 {
		copy(dst, src)
		return
	}
	step := (n + k - 1) / k
	var wg sync.WaitGroup
	for off := step; off < n; off += step {
		end := min(off+step, n)
		wg.Add(1)
		go func(off, end int) {
			defer wg.Done()
			copy(dst[off:end], src[off:end])
		}(off, end)
	}
	copy(dst[:step], src[:step])
	wg.Wait()
}
