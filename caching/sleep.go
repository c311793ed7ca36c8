// Sleep and wake: the physical memory behind every segment released while
// the virtual addresses stay reserved, the contents of kept allocations
// saved to pinned host memory and restored. The policy is in doc.go
// (Sleep and wake); this file has the API and the way to sleep, wake.go the
// way back.
//
// See doc.go for an overview.

package caching

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gpumem/gpumem"
)

// SleepTag says what Sleep does with the contents of an allocation.
type SleepTag uint8

// Sleep tags.
const (
	// DiscardOnSleep drops the contents: after Wake the allocation is at
	// the same address with undefined contents. Allocate's blocks have it.
	DiscardOnSleep SleepTag = iota
	// KeepOnSleep saves the contents to pinned host memory at Sleep; Wake
	// restores them byte for byte.
	KeepOnSleep
)

// String names the tag.
func (t SleepTag) String() string {
	switch t {
	case DiscardOnSleep:
		return "discard"
	case KeepOnSleep:
		return "keep"
	}
	return fmt.Sprintf("sleep_tag(%d)", int(t))
}

// ErrAsleep is what an allocation on a device that is asleep fails with
// (it also matches gpumem.ErrInvalidValue): call Wake first.
var ErrAsleep = errors.New("caching: the device is asleep")

// asleepError is the error of an allocation refused while asleep.
type asleepError struct{ dev int }

func (e asleepError) Error() string {
	return fmt.Sprintf("caching: device %d is asleep: its memory is released until Wake (allocate after Wake)", e.dev)
}

// Is matches ErrAsleep and gpumem.ErrInvalidValue.
func (e asleepError) Is(target error) bool {
	return target == ErrAsleep || target == gpumem.ErrInvalidValue
}

func errAsleep(dev int) error { return asleepError{dev} }

// SleepReport describes a device's last Sleep and Wake.
type SleepReport struct {
	Asleep    bool   // the device is asleep now
	Released  uint64 // bytes of physical memory the last Sleep released
	Saved     uint64 // bytes of kept allocations the last Sleep saved
	Copied    uint64 // bytes its copies moved: Saved, and small gaps copied along
	Discarded uint64 // bytes of other live allocations the last Sleep discarded
	Restored  uint64 // bytes the last Wake restored

	SleepTime   time.Duration // the last Sleep, from start to end
	SaveTime    time.Duration // its device-to-host copies, from the first to their completion
	WakeTime    time.Duration // the last Wake, from start to end
	RestoreTime time.Duration // its host-to-device copies, from the first to their completion

	HostBuffer uint64 // bytes of pinned host memory held for saved contents
}

// savedRun is a range of kept allocations saved at offset off of the host buffer.
type savedRun struct {
	addr      gpumem.Ptr
	size, off uint64
}

// sleepState is a device's sleep: what Wake restores and the buffers Sleep
// uses. Guarded by d.mu.
type sleepState struct {
	runs      []savedRun
	host      gpumem.Ptr // pinned host buffer, or 0
	hostSize  uint64
	stream    gpumem.Stream // the stream of the copies, once created
	hasStream bool
	report    SleepReport
}

// AllocateTagged is Allocate with a sleep tag: KeepOnSleep makes Sleep save
// the allocation's contents and Wake restore them.
func (a *Allocator) AllocateTagged(size uint64, s gpumem.Stream, tag SleepTag) (gpumem.Ptr, error) {
	if a == nil {
		return 0, errNil("AllocateTagged")
	}
	if tag > KeepOnSleep {
		return 0, fmt.Errorf("caching: unknown sleep tag %d: %w", int(tag), gpumem.ErrInvalidValue)
	}
	return a.allocate(size, s, tag == KeepOnSleep)
}

// SetSleepTag changes the sleep tag of the live allocation at p (for memory
// allocated through Allocate, or the gpumem.Allocator interface). While the
// device is asleep it changes nothing already saved or discarded: it applies
// to the next Sleep.
func (a *Allocator) SetSleepTag(p gpumem.Ptr, tag SleepTag) error {
	if a == nil {
		return errNil("SetSleepTag")
	}
	if tag > KeepOnSleep {
		return fmt.Errorf("caching: unknown sleep tag %d: %w", int(tag), gpumem.ErrInvalidValue)
	}
	d, b, err := a.find(p, -1)
	if err != nil {
		return err
	}
	b.keep = tag == KeepOnSleep
	d.mu.Unlock()
	return nil
}

// Sleep releases the physical memory of every device: cached memory first,
// then, after saving the contents of KeepOnSleep allocations to pinned host
// memory, the memory behind every live allocation, whose virtual addresses
// stay reserved. Pointers stay valid for Deallocate and for Wake; using the
// memory itself before Wake is undefined. Allocations fail with ErrAsleep
// until Wake. A device already asleep is left as is.
//
// Sleep needs expandable segments (expandable_segments:True): elsewhere it
// fails with an error matching gpumem.ErrNotSupported and changes nothing
// but the cache. If a device fails, the devices this call put to sleep are
// woken again and the error is returned.
func (a *Allocator) Sleep(ctx context.Context) error {
	if a == nil {
		return errNil("Sleep")
	}
	if a.closed.Load() {
		return errClosed()
	}
	if ctx == nil {
		return errNilContext("Sleep")
	}
	var slept []int
	for i := range a.devs {
		d := a.devs[i]
		d.mu.Lock()
		was := d.asleep
		err := d.sleepLocked(ctx)
		d.mu.Unlock()
		if err != nil {
			for _, j := range slices.Backward(slept) {
				if werr := a.WakeDevice(context.Background(), j); werr != nil {
					err = errors.Join(err, werr)
				}
			}
			return err
		}
		if !was {
			slept = append(slept, i)
		}
	}
	return nil
}

// SleepDevice is Sleep for device dev alone.
func (a *Allocator) SleepDevice(ctx context.Context, dev int) error {
	if a == nil {
		return errNil("SleepDevice")
	}
	if ctx == nil {
		return errNilContext("SleepDevice")
	}
	return a.onDevice(dev, func(d *device) error { return d.sleepLocked(ctx) })
}

// errNilContext is the error of Sleep and Wake given a nil context.
func errNilContext(op string) error {
	return fmt.Errorf("caching: %s: nil context (use context.Background()): %w", op, gpumem.ErrInvalidValue)
}

// onDevice runs fn with device dev's lock held.
func (a *Allocator) onDevice(dev int, fn func(*device) error) error {
	d, err := a.device(dev)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return fn(d)
}

// Asleep reports whether device dev is asleep (false for an unknown device).
func (a *Allocator) Asleep(dev int) bool {
	if a == nil {
		return false
	}
	if dev < 0 || dev >= len(a.devs) {
		return false
	}
	d := a.devs[dev]
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.asleep
}

// SleepReport describes device dev's last Sleep and Wake (zero for an
// unknown device).
func (a *Allocator) SleepReport(dev int) SleepReport {
	if a == nil {
		return SleepReport{}
	}
	if dev < 0 || dev >= len(a.devs) {
		return SleepReport{}
	}
	d := a.devs[dev]
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.sleep.report
	r.Asleep = d.asleep
	r.HostBuffer = d.sleep.hostSize
	return r
}

// canSleepLocked refuses a device whose memory cannot keep its addresses.
// d.mu must be held.
func (d *device) canSleepLocked() error {
	if !d.a.opts.ExpandableSegments {
		return fmt.Errorf("caching: Sleep needs expandable segments, whose memory keeps its virtual address when released "+
			"(set expandable_segments:True in GPUMEM_ALLOC_CONF, or Options.ExpandableSegments): %w", gpumem.ErrNotSupported)
	}
	if !d.expOn {
		return fmt.Errorf("caching: Sleep needs the virtual memory API, which device %d lacks (%s): %w", d.id, d.expReason, gpumem.ErrNotSupported)
	}
	if len(d.captures) > 0 {
		return fmt.Errorf("caching: Sleep during a graph capture on device %d: %w", d.id, gpumem.ErrInvalidValue)
	}
	return nil
}

// sleepLocked puts the device to sleep. d.mu must be held.
func (d *device) sleepLocked(ctx context.Context) error {
	if d.closed {
		return errClosed()
	}
	if d.asleep {
		return nil
	}
	if err := d.canSleepLocked(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("caching: sleeping device %d: %w", d.id, err)
	}
	start := time.Now()
	// Cached memory goes first: nothing of it comes back at Wake. This
	// waits for the device and every pending free.
	if err := d.releaseCachedLocked(true); err != nil {
		return fmt.Errorf("caching: sleeping device %d: %w", d.id, err) // nothing unmapped: the device stays awake
	}
	var segs []*segment
	regular := 0
	for seg := range d.segments {
		if seg.exp == nil {
			regular++
			continue
		}
		segs = append(segs, seg)
	}
	if regular > 0 {
		return fmt.Errorf("caching: Sleep on device %d: %d segments of graph capture pools are in use and are not "+
			"expandable (their memory cannot keep its address); release the pools (ReleasePool) first: %w", d.id, regular, gpumem.ErrNotSupported)
	}
	slices.SortFunc(segs, func(x, y *segment) int { return cmpPtr(x.addr, y.addr) })
	runs, saved, copied, discarded := keptRuns(segs)
	var saveTime time.Duration
	if saved > 0 {
		t, err := d.saveLocked(runs, copied)
		if err != nil {
			return err
		}
		saveTime = t
	}
	if err := ctx.Err(); err != nil {
		d.dropHostLocked()
		return fmt.Errorf("caching: sleeping device %d: %w", d.id, err)
	}
	d.asleep = true
	d.sleep.runs = runs
	d.stats.AsleepSavedBytes = int64(saved)
	d.stats.AsleepDiscardedBytes = int64(discarded)
	released, err := d.releaseMappedLocked(segs)
	if err != nil {
		err = fmt.Errorf("caching: sleeping device %d: releasing its memory: %w", d.id, err)
		if werr := d.wakeLocked(context.Background()); werr != nil {
			return errors.Join(err, fmt.Errorf("caching: undoing the sleep failed too; device %d stays asleep, and Wake maps its memory back: %w", d.id, werr))
		}
		return fmt.Errorf("%w (undone: the device is awake, kept allocations intact, discarded ones undefined)", err)
	}
	d.stats.NumSleeps++
	d.sleep.report = SleepReport{Released: released, Saved: saved, Copied: copied, Discarded: discarded,
		SleepTime: time.Since(start), SaveTime: saveTime}
	return nil
}

func cmpPtr(x, y gpumem.Ptr) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// maxSavedGap is the most bytes of discarded allocations between two kept
// ones that Sleep copies along, so that the two are saved in one copy: a
// copy costs microseconds of its own, which a small one cannot hide.
const maxSavedGap = 64 << 10

// keptRuns returns the ranges of the KeepOnSleep allocations of segs (in
// address order) with their offsets in one buffer: adjacent ones merged,
// and ones apart by at most maxSavedGap bytes of other live allocations
// (which are mapped) merged with those bytes. It returns the bytes the
// kept allocations hold, the bytes of the runs, and the bytes of the
// other live allocations.
func keptRuns(segs []*segment) (runs []savedRun, saved, copied, discarded uint64) {
	for _, seg := range segs {
		open := false // the last run is in this segment and may grow
		var gap uint64
		for b := seg.head; b != nil; b = b.next {
			switch {
			case b.allocated && b.keep:
				if open && gap <= maxSavedGap {
					runs[len(runs)-1].size += gap + b.size
					copied += gap + b.size
				} else {
					runs = append(runs, savedRun{addr: b.addr, size: b.size, off: copied})
					copied += b.size
				}
				saved += b.size
				open, gap = true, 0
			case b.allocated:
				discarded += b.size
				gap += b.size
			default:
				open = false // free memory may be unmapped
			}
		}
	}
	return runs, saved, copied, discarded
}

// streamLocked returns the stream of the device's sleep copies, creating it
// once. d.mu must be held.
func (d *device) streamLocked() (gpumem.Stream, error) {
	if d.sleep.hasStream {
		return d.sleep.stream, nil
	}
	s, err := d.a.b.StreamCreate(d.id, gpumem.StreamNonBlocking, 0)
	if err != nil {
		return gpumem.Stream{}, fmt.Errorf("caching: creating the stream of sleep copies on device %d: %w", d.id, err)
	}
	d.sleep.stream, d.sleep.hasStream = s, true
	return s, nil
}

// saveLocked copies the kept runs (n bytes in all) to a pinned host
// buffer, one copy per run on the sleep stream, and waits for them. It
// returns the time from the first copy to their completion. On failure
// the buffer is dropped and the device is as it was. d.mu must be held.
func (d *device) saveLocked(runs []savedRun, n uint64) (time.Duration, error) {
	if d.sleep.hostSize < n {
		if err := d.freeHostLocked(); err != nil {
			return 0, fmt.Errorf("caching: sleeping device %d: a larger pinned buffer is needed: %w", d.id, err)
		}
		h, err := d.a.b.MallocHost(n)
		if err != nil {
			return 0, fmt.Errorf("caching: sleeping device %d: %s of pinned host memory for the kept allocations: %w",
				d.id, gpumem.FormatBytes(n), err)
		}
		d.sleep.host, d.sleep.hostSize = h, n
	}
	s, err := d.streamLocked()
	if err != nil {
		d.dropHostLocked()
		return 0, err
	}
	start := time.Now()
	for _, r := range runs {
		if err = d.a.b.MemcpyAsync(d.sleep.host.Add(r.off), r.addr, r.size, s); err != nil {
			err = fmt.Errorf("caching: sleeping device %d: saving %s at %#x: %w", d.id, gpumem.FormatBytes(r.size), uintptr(r.addr), err)
			break
		}
	}
	if serr := d.a.b.StreamSynchronize(s); serr != nil && err == nil {
		err = fmt.Errorf("caching: sleeping device %d: waiting for the saving copies: %w", d.id, serr)
	}
	if err != nil {
		d.dropHostLocked()
		return 0, err
	}
	return time.Since(start), nil
}

// freeHostLocked frees the pinned host buffer. A buffer the device refuses
// to free is kept, as if Options.KeepSleepBuffer asked for it: the next
// Sleep reuses it or tries again, and so does Close. d.mu must be held.
func (d *device) freeHostLocked() error {
	if d.sleep.host == 0 {
		return nil
	}
	if err := d.a.b.FreeHost(d.sleep.host); err != nil {
		return fmt.Errorf("caching: freeing the pinned host buffer of device %d (%s, kept and tried again): %w",
			d.id, gpumem.FormatBytes(d.sleep.hostSize), err)
	}
	d.sleep.host, d.sleep.hostSize = 0, 0
	return nil
}

// dropHostLocked frees the pinned host buffer unless Options.KeepSleepBuffer
// keeps it for the next Sleep; a refused free is logged (the buffer stays).
// d.mu must be held.
func (d *device) dropHostLocked() {
	if d.a.opts.KeepSleepBuffer {
		return
	}
	if err := d.freeHostLocked(); err != nil {
		d.a.logf("%v", err)
	}
}

// releaseMappedLocked unmaps every mapped chunk of segs (one call per run
// of consecutive chunks where the backend takes it, else chunk by chunk)
// and releases its physical memory; the chunks stay counted as mapped,
// marked sleeping, for Wake. It returns the bytes released. The device has
// been synchronized. A range of several mappings is one cuMemUnmap on CUDA
// (NVIDIA's vectorAddMMAP sample frees its multi-allocation range so, in
// simpleFreeMultiDeviceMmap); the HIP backend splits it into its mappings
// itself (Dialect.UnmapByMapping); should a driver refuse, the run is
// unmapped chunk by chunk. d.mu must be held.
func (d *device) releaseMappedLocked(segs []*segment) (uint64, error) {
	var released uint64
	for _, seg := range segs {
		e := seg.exp
		if err := d.unmapAllGhostsLocked(seg); err != nil {
			return released, err
		}
		if e.sleeping == nil {
			e.sleeping = make([]bool, len(e.mapped))
		}
		n := uint64(len(e.mapped))
		for i := uint64(0); i < n; {
			if !e.mapped[i] || e.sleeping[i] {
				i++
				continue
			}
			j := i
			for j < n && e.mapped[j] && !e.sleeping[j] {
				j++
			}
			// A run of mapped chunks is whole physical allocations; should
			// the run not unmap in one call, one allocation at a time, so
			// that what was unmapped is known.
			whole := d.a.b.MemUnmap(seg.addr.Add(i*e.chunk), (j-i)*e.chunk) == nil
			for k := i; k < j; {
				n := e.spanAt(k)
				if !whole {
					if err := d.a.b.MemUnmap(seg.addr.Add(k*e.chunk), n*e.chunk); err != nil {
						return released, fmt.Errorf("unmapping %#x: %w", uintptr(seg.addr.Add(k*e.chunk)), err)
					}
				}
				released += d.sleepGroupLocked(seg, k)
				k += n
			}
			d.recordLocked(gpumem.ActionSegmentUnmap, seg.stream.Handle, seg.addr.Add(i*e.chunk), (j-i)*e.chunk)
			i = j
		}
	}
	return released, nil
}

// sleepGroupLocked releases the unmapped physical allocation whose first
// chunk of seg is i and marks its chunks sleeping; it returns their size.
// d.mu must be held.
func (d *device) sleepGroupLocked(seg *segment, i uint64) uint64 {
	e := seg.exp
	n := e.spanAt(i)
	if err := d.releaseHandleLocked(e.handles[i], n*e.chunk); err != nil {
		d.a.logf("caching: at %#x: %v", uintptr(seg.addr.Add(i*e.chunk)), err)
	}
	for k := i; k < i+n; k++ {
		e.handles[k], e.sleeping[k] = gpumem.MemHandle{}, true
	}
	e.span[i] = 0
	d.stats.AsleepBytes += int64(n * e.chunk)
	return n * e.chunk
}
