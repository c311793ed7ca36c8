package managed

// See doc.go for an overview.

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/caching"
)

// Buffer is a managed-memory block that knows where it is: the Go form of
// the seed's managed tensor. Ptr and Size never change; a move (To) changes
// only the buffer's Location, its advice and where its pages are.
// A Buffer is safe for concurrent use; it is invalid after Free or the
// allocator's Close.
type Buffer struct {
	Ptr  gpumem.Ptr // the unified address, valid on the host and every device
	Size uint64     // bytes asked for

	a      *Allocator
	pool   *caching.Allocator
	host   bool          // from the host-preferred pool
	dev    int           // the pool's device
	stream gpumem.Stream // the stream it was allocated on

	mu         sync.Mutex
	loc        gpumem.Location
	accessedBy int             // device advised as accessing it by the placement (the host pool's hint); -1: none
	pref       gpumem.Location // the preferred location advised, when prefKnown
	prefKnown  bool            // false after a failed preferred-location advice
	moved      bool            // advice differs from the pool's initial hints
	prefetched bool            // the last prefetch went to loc
	freed      bool
	foreign    []gpumem.Stream // streams of other devices that used it
	readers    map[int]bool    // devices advised as accessing it by AddReader
}

// Location returns where the buffer is placed: the location of its advice
// and its last prefetch.
func (b *Buffer) Location() gpumem.Location {
	if b.check() != nil {
		return gpumem.Location{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.loc
}

// Allocator returns the allocator that owns the buffer.
func (b *Buffer) Allocator() *Allocator {
	if b == nil {
		return nil
	}
	return b.a
}

// String formats the buffer for messages.
func (b *Buffer) String() string {
	if b.check() != nil {
		return "managed buffer <nil>"
	}
	return fmt.Sprintf("managed buffer %#x (%s, %s)", uintptr(b.Ptr), gpumem.FormatBytes(b.Size), b.Location())
}

// ToOptions say how To moves or copies a buffer.
type ToOptions struct {
	// Stream orders the prefetch (or the copy). The zero value is device 0's
	// default stream.
	Stream gpumem.Stream
	// NonBlocking skips the synchronization of a move or copy to the host;
	// the caller then synchronizes Stream before touching the memory.
	NonBlocking bool
	// Copy forces a copy into a new buffer at the location, as the seed's
	// copy=True, even for a managed buffer.
	Copy bool
}

// To places the buffer at loc, the seed's Tensor.to(device) for a managed
// tensor. Without Copy it is a move: the same buffer (same address, no new
// allocation) is advised to prefer loc, and a prefetch to loc is queued on
// opts.Stream; a move to the host then synchronizes the stream unless
// NonBlocking is set. A move advises no device as accessing the buffer
// (accessed-by advice left by the buffer's pool is unset; readers added
// with AddReader stay). Moving to the current location does nothing. With
// Copy it returns a new buffer at loc holding a copy of the data. On a
// device that cannot migrate pages a move only updates the advice. On an
// error the buffer keeps its previous placement, except that a failed
// synchronization after a queued prefetch leaves the move made.
func (b *Buffer) To(loc gpumem.Location, opts ToOptions) (*Buffer, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	a := b.a
	if err := a.checkOpen(); err != nil {
		return nil, err
	}
	if err := a.checkLocation(loc); err != nil {
		return nil, err
	}
	s := opts.Stream
	if s.Device < 0 || s.Device >= a.ndev {
		return nil, fmt.Errorf("managed: %v: no such device: %w", s, gpumem.ErrInvalidValue)
	}
	if opts.Copy {
		return b.copyTo(loc, s, opts.NonBlocking)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.freed {
		return nil, b.errFreed()
	}
	if b.loc == loc {
		return b, nil
	}
	if err := b.moveLocked(loc, s); err != nil {
		return nil, err
	}
	if loc.Kind == gpumem.LocationHost && !opts.NonBlocking {
		if err := a.b.StreamSynchronize(s); err != nil {
			return nil, fmt.Errorf("managed: synchronizing %v after a move to the host: %w", s, err)
		}
	}
	return b, nil
}

// check refuses a nil Buffer (what a failed Alloc returns) and one that no
// allocator made (a zero Buffer), with ErrInvalidValue.
func (b *Buffer) check() error {
	if b == nil || b.a == nil {
		return fmt.Errorf("managed: nil buffer (or not from an allocator): %w", gpumem.ErrInvalidValue)
	}
	return nil
}

func (b *Buffer) errFreed() error {
	return fmt.Errorf("managed: buffer %#x used after Free: %w", uintptr(b.Ptr), gpumem.ErrInvalidValue)
}

// moveLocked moves the buffer towards loc: advice and a prefetch on s.
// Only the advice that differs from the buffer's current advice is sent.
//
// The advice of a move is the preferred location loc and no accessed-by
// device: an accessed-by device the buffer has (the host pool's hint, or
// one left by an earlier placement) is unset unless it is one of the
// buffer's readers (AddReader), which stay. Towards the host this departs
// from the seed's hints for host-pool allocations (preferred location host,
// accessed by the current device), which the host pool still gives its
// segments: accessed-by advice maps the pages into the device's page tables
// wherever they live, which after a move to the host means zero-copy
// remote access from the device. A move to the host (to free device memory
// or to hand the data to the CPU) does not ask for that, and it costs about
// a quarter of the move's bandwidth: on an H100/H200 a bare device-to-host
// prefetch of 1 GiB ran at 10.5 GB/s, 10.5 with the preferred location host
// advised first, 7.7 with accessed-by advised first and 7.1 with it advised
// after the migration. A program that wants the device to read
// host-resident data in place says so with AddReader.
//
// Towards a device the prefetch goes first: cuMemPrefetchAsync migrates to
// its destination whatever the range's advice, and cuMemAdvise is a host
// call that may be made while a prefetch of the range is in flight, so the
// advice (milliseconds per GiB in the driver) runs while the copy engine
// moves the pages instead of before it. If that advice fails, the old
// advice is restored and the pages are prefetched back, so that the buffer
// keeps its previous placement. Towards the host the advice goes first:
// the preferred location given to pages still on the device does not slow
// the migration that follows (the figures above), and a failed advice
// leaves the pages where they were, with nothing to send back. b.mu held.
func (b *Buffer) moveLocked(loc gpumem.Location, s gpumem.Stream) error {
	a := b.a
	oldLoc, oldAcc := b.loc, b.accessedBy
	const newAcc = -1 // a move advises no accessed-by device
	migrate := loc.Kind == gpumem.LocationHost || a.migrates[loc.Device]
	if oldLoc.Kind == gpumem.LocationDevice && !a.migrates[oldLoc.Device] && loc.Kind == gpumem.LocationHost {
		migrate = false // the pages never left the host
	}
	restore := func() {
		if rerr := b.adviseLocked(oldLoc, oldAcc); rerr != nil {
			a.dirty.Store(true)
		}
	}
	prefetchFirst := migrate && loc.Kind == gpumem.LocationDevice
	if !prefetchFirst {
		if err := b.adviseLocked(loc, newAcc); err != nil {
			restore()
			return err
		}
	}
	if migrate {
		if err := a.b.Prefetch(b.Ptr, b.Size, loc, s); err != nil {
			if !prefetchFirst {
				restore()
			}
			return fmt.Errorf("managed: prefetching %#x to %s: %w", uintptr(b.Ptr), loc, err)
		}
		if err := b.recordUseLocked(s); err != nil {
			// The prefetch is queued: wait for it at free.
			b.foreign = append(b.foreign, s)
		}
	}
	if prefetchFirst {
		if err := b.adviseLocked(loc, newAcc); err != nil {
			restore()
			back := oldLoc
			if back.Kind == gpumem.LocationDevice && !a.migrates[back.Device] {
				back = gpumem.HostLocation()
			}
			perr := a.b.Prefetch(b.Ptr, b.Size, back, s)
			b.prefetched = perr == nil && back == oldLoc
			return err
		}
	}
	a.resident[a.residentIndex(oldLoc)].Add(-int64(b.Size))
	a.resident[a.residentIndex(loc)].Add(int64(b.Size))
	b.loc = loc
	b.prefetched = migrate
	b.moved = !b.initialPlacementLocked()
	return nil
}

// initialPlacementLocked reports whether the buffer's advice equals its
// pool's initial hints. A host-pool buffer moved to a device and back to the
// host is not at its initial placement: the move to the host advises no
// accessed-by device, where the pool's hints name the buffer's device; Free
// restores them. b.mu held.
func (b *Buffer) initialPlacementLocked() bool {
	if b.host {
		return b.loc.Kind == gpumem.LocationHost && b.accessedBy == b.dev
	}
	return b.loc == gpumem.DeviceLocation(b.dev) && b.accessedBy < 0
}

// adviseLocked sets the preferred location and the accessed-by device (-1:
// none) of the placement, sending only the advice that differs from the
// buffer's current advice: no preferred location that is already in effect,
// no accessed-by unset that was never set. An accessed-by device that is
// also a reader (AddReader) keeps its advice when the placement drops it:
// from then on it is the reader's alone, and RemoveReader or Free unsets it.
// b.mu held; b.pref and b.accessedBy follow the calls that succeed.
func (b *Buffer) adviseLocked(pref gpumem.Location, acc int) error {
	a := b.a
	if !b.prefKnown || b.pref != pref {
		b.prefKnown = false
		if err := a.b.Advise(b.Ptr, b.Size, gpumem.AdviseSetPreferredLocation, pref); err != nil {
			return fmt.Errorf("managed: advising %#x to prefer %s: %w", uintptr(b.Ptr), pref, err)
		}
		b.pref, b.prefKnown = pref, true
	}
	if b.accessedBy == acc {
		return nil
	}
	if b.accessedBy >= 0 {
		if !b.readers[b.accessedBy] {
			if err := a.b.Advise(b.Ptr, b.Size, gpumem.AdviseUnsetAccessedBy, gpumem.DeviceLocation(b.accessedBy)); err != nil {
				return fmt.Errorf("managed: unsetting accessed-by device %d on %#x: %w", b.accessedBy, uintptr(b.Ptr), err)
			}
		}
		b.accessedBy = -1
	}
	if acc >= 0 {
		if !b.readers[acc] {
			if err := a.b.Advise(b.Ptr, b.Size, gpumem.AdviseSetAccessedBy, gpumem.DeviceLocation(acc)); err != nil {
				return fmt.Errorf("managed: advising %#x accessed by device %d: %w", uintptr(b.Ptr), acc, err)
			}
		}
		b.accessedBy = acc
	}
	return nil
}

// recordUse marks the buffer as used on s.
func (b *Buffer) recordUse(s gpumem.Stream) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.freed {
		return b.errFreed()
	}
	return b.recordUseLocked(s)
}

// recordUseLocked tells the pool of a use on s of the pool's device; a
// stream of another device is remembered and synchronized at free. b.mu held.
func (b *Buffer) recordUseLocked(s gpumem.Stream) error {
	if s == b.stream {
		return nil
	}
	if s.Device != b.dev {
		for _, f := range b.foreign {
			if f == s {
				return nil
			}
		}
		b.foreign = append(b.foreign, s)
		return nil
	}
	if err := b.pool.RecordStream(b.Ptr, s); err != nil {
		return fmt.Errorf("managed: %w", err)
	}
	return nil
}

// copyTo allocates a buffer at loc and copies the data into it on s.
func (b *Buffer) copyTo(loc gpumem.Location, s gpumem.Stream, nonBlocking bool) (*Buffer, error) {
	a := b.a
	b.mu.Lock()
	freed := b.freed
	b.mu.Unlock()
	if freed {
		return nil, b.errFreed()
	}
	as := s
	crossDevice := loc.Kind == gpumem.LocationDevice && s.Device != loc.Device
	if crossDevice {
		as = gpumem.Stream{Device: loc.Device}
	}
	dst, err := a.Alloc(b.Size, loc, as)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Buffer, error) {
		return nil, errors.Join(err, dst.Free())
	}
	if crossDevice {
		// The block is ready in the order of its device's default stream;
		// the copy runs on s, of another device.
		if err := a.b.StreamSynchronize(as); err != nil {
			return fail(fmt.Errorf("managed: synchronizing %v: %w", as, err))
		}
		dst.mu.Lock()
		_ = dst.recordUseLocked(s)
		dst.mu.Unlock()
	}
	if err := b.recordUse(s); err != nil {
		return fail(err)
	}
	if err := a.b.MemcpyAsync(dst.Ptr, b.Ptr, b.Size, s); err != nil {
		return fail(fmt.Errorf("managed: copying %#x to a new buffer at %s: %w", uintptr(b.Ptr), loc, err))
	}
	if loc.Kind == gpumem.LocationHost && !nonBlocking {
		if err := a.b.StreamSynchronize(s); err != nil {
			return fail(fmt.Errorf("managed: synchronizing %v after a copy to the host: %w", s, err))
		}
	}
	return dst, nil
}

// Free returns the buffer to its pool, its last use ordered on the stream
// it was allocated on (and on the streams recorded since). A moved buffer
// gets its pool's initial hints back first. A second Free is an error
// matching ErrInvalidValue.
func (b *Buffer) Free() error { return b.free(nil) }

// free releases the buffer, its last use ordered on s (nil: its own stream).
func (b *Buffer) free(s *gpumem.Stream) error {
	if err := b.check(); err != nil {
		return err
	}
	a := b.a
	if err := a.checkOpen(); err != nil {
		return err
	}
	b.mu.Lock()
	if b.freed {
		b.mu.Unlock()
		return fmt.Errorf("managed: buffer %#x freed twice: %w", uintptr(b.Ptr), gpumem.ErrInvalidValue)
	}
	b.freed = true
	sh := a.shardOf(b.Ptr)
	sh.mu.Lock()
	if sh.m[b.Ptr] == b {
		delete(sh.m, b.Ptr)
	}
	sh.mu.Unlock()
	a.resident[a.residentIndex(b.loc)].Add(-int64(b.Size))
	var errs []error
	for _, f := range b.foreign {
		if a.streamGone(f) {
			continue // destroyed: no work left to wait for
		}
		if err := a.b.StreamSynchronize(f); err != nil {
			errs = append(errs, fmt.Errorf("managed: synchronizing %v before a free: %w", f, err))
		}
	}
	if len(b.readers) > 0 {
		if err := b.dropReadersLocked(); err != nil {
			a.dirty.Store(true)
			errs = append(errs, err)
		}
	}
	if b.moved {
		init := gpumem.DeviceLocation(b.dev)
		acc := -1
		if b.host {
			init, acc = gpumem.HostLocation(), b.dev
		}
		if err := b.adviseLocked(init, acc); err != nil {
			a.dirty.Store(true)
			errs = append(errs, err)
		}
	}
	fs := b.stream
	if s != nil {
		fs = *s
		if fs.Device != b.dev {
			// The pool orders frees on its own device's streams.
			if err := a.b.StreamSynchronize(fs); err != nil {
				errs = append(errs, fmt.Errorf("managed: synchronizing %v before a free: %w", fs, err))
			}
			fs = b.stream
		}
	}
	b.mu.Unlock()
	err := b.pool.Deallocate(b.Ptr, fs)
	if err != nil && !fs.IsDefault() && a.streamGone(fs) {
		// The buffer's own stream was destroyed since: it has no work
		// left, and the pool refuses to order a free on it. The device's
		// default stream, always live, takes its place.
		err = b.pool.Deallocate(b.Ptr, gpumem.Stream{Device: b.dev})
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("managed: %w", err))
	}
	return errors.Join(errs...)
}

// Manage copies size bytes of ordinary memory at src (device memory of
// srcLoc's device, or pinned host memory when srcLoc is the host) into a new
// managed buffer placed at srcLoc: the seed's Tensor.manage_memory. The copy
// is ordered on s; from the host it is complete when Manage returns. If src
// is already a managed buffer of this allocator, Manage returns that buffer
// (moved to srcLoc) when Options.MoveOnCopy is set, and a copy otherwise.
func (a *Allocator) Manage(src gpumem.Ptr, size uint64, srcLoc gpumem.Location, s gpumem.Stream) (*Buffer, error) {
	if a == nil {
		return nil, errNil("Manage")
	}
	if err := a.checkOpen(); err != nil {
		return nil, err
	}
	if src == 0 {
		return nil, fmt.Errorf("managed: Manage of a null pointer: %w", gpumem.ErrInvalidValue)
	}
	if size == 0 {
		return nil, fmt.Errorf("managed: Manage of zero bytes: %w", gpumem.ErrInvalidValue)
	}
	if err := a.checkLocation(srcLoc); err != nil {
		return nil, err
	}
	if own := a.Buffer(src); own != nil {
		// A managed buffer of this allocator: moved with MoveOnCopy (all
		// of it), else copied (at most all of it: the bytes after it
		// belong to something else).
		if a.opts.MoveOnCopy && size != own.Size || size > own.Size {
			return nil, fmt.Errorf("managed: Manage of %d bytes of a %d-byte managed buffer: %w", size, own.Size, gpumem.ErrInvalidValue)
		}
		if a.opts.MoveOnCopy {
			return own.To(srcLoc, ToOptions{Stream: s})
		}
	}
	dst, err := a.Alloc(size, srcLoc, s)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Buffer, error) { return nil, errors.Join(err, dst.Free()) }
	if srcLoc.Kind == gpumem.LocationDevice && a.migrates[srcLoc.Device] {
		// Populate the pages where the copy writes them.
		if err := a.b.Prefetch(dst.Ptr, size, srcLoc, s); err != nil {
			return fail(fmt.Errorf("managed: prefetching the new buffer to %s: %w", srcLoc, err))
		}
		dst.mu.Lock()
		dst.prefetched = true
		dst.mu.Unlock()
	}
	if err := a.b.MemcpyAsync(dst.Ptr, src, size, s); err != nil {
		return fail(fmt.Errorf("managed: copying %#x into managed memory: %w", uintptr(src), err))
	}
	if srcLoc.Kind == gpumem.LocationHost {
		if err := a.b.StreamSynchronize(s); err != nil {
			return fail(fmt.Errorf("managed: synchronizing %v after Manage: %w", s, err))
		}
	}
	return dst, nil
}

// Unmanage copies the buffer into new ordinary memory at dst: a device
// allocation (Backend.Malloc) of dst's device, or pinned host memory
// (Backend.MallocHost) for the host; the seed's Tensor.unmanage_memory. The
// copy is ordered on s; to the host it is complete when Unmanage returns.
// The buffer stays valid; the caller frees the result with Backend.Free or
// Backend.FreeHost.
func (a *Allocator) Unmanage(buf *Buffer, dst gpumem.Location, s gpumem.Stream) (gpumem.Ptr, error) {
	if a == nil {
		return 0, errNil("Unmanage")
	}
	if err := a.checkOpen(); err != nil {
		return 0, err
	}
	if buf == nil || buf.a != a {
		return 0, fmt.Errorf("managed: Unmanage of a buffer of another allocator: %w", gpumem.ErrInvalidValue)
	}
	if err := a.checkLocation(dst); err != nil {
		return 0, err
	}
	if err := buf.recordUse(s); err != nil {
		return 0, err
	}
	var p gpumem.Ptr
	var err error
	release := func() error { return a.b.Free(dst.Device, p) }
	if dst.Kind == gpumem.LocationHost {
		p, err = a.b.MallocHost(buf.Size)
		release = func() error { return a.b.FreeHost(p) }
	} else {
		p, err = a.b.Malloc(dst.Device, buf.Size)
	}
	if err != nil {
		return 0, fmt.Errorf("managed: Unmanage: allocating %s at %s: %w", gpumem.FormatBytes(buf.Size), dst, err)
	}
	if err := a.b.MemcpyAsync(p, buf.Ptr, buf.Size, s); err != nil {
		return 0, errors.Join(fmt.Errorf("managed: Unmanage: copying %#x: %w", uintptr(buf.Ptr), err), release())
	}
	if dst.Kind == gpumem.LocationHost {
		if err := a.b.StreamSynchronize(s); err != nil {
			return 0, errors.Join(fmt.Errorf("managed: Unmanage: synchronizing %v: %w", s, err), release())
		}
	}
	return p, nil
}

// CopyTo is a copy of a managed buffer to loc as the seed's copy kernel
// sees it: with Options.MoveOnCopy the buffer itself is moved (To without
// Copy); otherwise a new buffer at loc receives a copy.
func (a *Allocator) CopyTo(buf *Buffer, loc gpumem.Location, s gpumem.Stream) (*Buffer, error) {
	if a == nil {
		return nil, errNil("CopyTo")
	}
	if buf == nil || buf.a != a {
		return nil, fmt.Errorf("managed: CopyTo of a buffer of another allocator: %w", gpumem.ErrInvalidValue)
	}
	return buf.To(loc, ToOptions{Stream: s, Copy: !a.opts.MoveOnCopy})
}
