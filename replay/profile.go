package replay

import (
	"fmt"
	"io"
	"sort"
	"sync/atomic"
	"time"

	"github.com/gpumem/gpumem"
)

// Profiler is a gpumem.Backend that times the calls allocators make to the
// backend it wraps: for each operation the number of calls and their total
// and longest host time. Build the allocator over the Profiler and pass the
// Profiler to Run: the replay then reports (Result.Profile) what the timed
// loop spent in the backend. The gpumem.Kernels methods (module loads,
// lookups, launches, occupancy) are timed too, so that a program that
// launches through the Profiler sees its launch overhead beside the
// allocator's. Every other method goes straight to the wrapped backend,
// untimed. A Profiler is safe for use from many goroutines.
type Profiler struct {
	gpumem.Backend
	ops [numProfOps]opCounter
	// epoch stands for the stream epoch of a wrapped backend that has
	// none: it moves at every check, so that no answer is kept.
	epoch atomic.Uint64
}

type opCounter struct {
	calls, total, max atomic.Int64
}

// The operations a Profiler times.
const (
	opMalloc = iota
	opFree
	opMallocAsync
	opMallocFromPoolAsync
	opFreeAsync
	opEventCreate
	opEventRecord
	opEventQuery
	opEventSynchronize
	opEventDestroy
	opStreamWaitEvent
	opStreamSynchronize
	opDeviceSynchronize
	opMemCreate
	opMemMap
	opMemUnmap
	opMemRelease
	opMemSetAccess
	opMemAddressReserve
	opMemAddressFree
	opMemInfo
	opStreamCaptureInfo
	opModuleLoadData
	opModuleUnload
	opModuleFunction
	opModuleGlobal
	opFuncAttribute
	opFuncSetMaxDynamicSharedMemory
	opLaunchKernel
	opOccupancyMaxActiveBlocks
	opOccupancyMaxPotentialBlockSize
	numProfOps
)

var profOpNames = [numProfOps]string{
	"Malloc", "Free", "MallocAsync", "MallocFromPoolAsync", "FreeAsync",
	"EventCreate", "EventRecord", "EventQuery", "EventSynchronize", "EventDestroy",
	"StreamWaitEvent", "StreamSynchronize", "DeviceSynchronize",
	"MemCreate", "MemMap", "MemUnmap", "MemRelease", "MemSetAccess",
	"MemAddressReserve", "MemAddressFree", "MemInfo", "StreamCaptureInfo",
	"ModuleLoadData", "ModuleUnload", "ModuleFunction", "ModuleGlobal", "FuncAttribute",
	"FuncSetMaxDynamicSharedMemory", "LaunchKernel", "OccupancyMaxActiveBlocks",
	"OccupancyMaxPotentialBlockSize",
}

// OpProfile is what a Profiler measured for one backend operation.
type OpProfile struct {
	Op      string `json:"op"`       // the Backend method
	Calls   int64  `json:"calls"`    // how many calls
	TotalNs int64  `json:"total_ns"` // host time of all calls
	MaxNs   int64  `json:"max_ns"`   // the longest call
}

// NewProfiler wraps b. A nil b is an error matching gpumem.ErrInvalidValue.
func NewProfiler(b gpumem.Backend) (*Profiler, error) {
	if b == nil {
		return nil, fmt.Errorf("gpumem: replay: profiling a nil backend: %w", gpumem.ErrInvalidValue)
	}
	return &Profiler{Backend: b}, nil
}

// Reset zeroes every counter.
func (p *Profiler) Reset() {
	for i := range p.ops {
		c := &p.ops[i]
		c.calls.Store(0)
		c.total.Store(0)
		c.max.Store(0)
	}
}

// Profile returns the operations called since the last Reset, most total
// time first (ties by name).
func (p *Profiler) Profile() []OpProfile {
	var out []OpProfile
	for i := range p.ops {
		c := &p.ops[i]
		if n := c.calls.Load(); n > 0 {
			out = append(out, OpProfile{Op: profOpNames[i], Calls: n, TotalNs: c.total.Load(), MaxNs: c.max.Load()})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].TotalNs != out[j].TotalNs {
			return out[i].TotalNs > out[j].TotalNs
		}
		return out[i].Op < out[j].Op
	})
	return out
}

// WriteProfile prints a profile as a table: each operation's calls, total
// and mean time, longest call, and share of wall (the replay loop's time;
// 0 leaves the share out).
func WriteProfile(w io.Writer, prof []OpProfile, wall time.Duration) {
	fmt.Fprintf(w, "%-20s %10s %14s %12s %12s %7s\n", "op", "calls", "total", "mean", "max", "share")
	var sum int64
	for _, o := range prof {
		sum += o.TotalNs
		mean := time.Duration(0)
		if o.Calls > 0 {
			mean = time.Duration(o.TotalNs / o.Calls)
		}
		share := "-"
		if wall > 0 {
			share = fmt.Sprintf("%.1f%%", 100*float64(o.TotalNs)/float64(wall))
		}
		fmt.Fprintf(w, "%-20s %10d %14v %12v %12v %7s\n", o.Op, o.Calls, time.Duration(o.TotalNs), mean, time.Duration(o.MaxNs), share)
	}
	share := "-"
	if wall > 0 {
		share = fmt.Sprintf("%.1f%%", 100*float64(sum)/float64(wall))
	}
	fmt.Fprintf(w, "%-20s %10s %14v %12s %12s %7s\n", "backend total", "", time.Duration(sum), "", "", share)
}

func (p *Profiler) done(op int, t0 time.Time) {
	d := int64(time.Since(t0))
	c := &p.ops[op]
	c.calls.Add(1)
	c.total.Add(d)
	for {
		m := c.max.Load()
		if d <= m || c.max.CompareAndSwap(m, d) {
			return
		}
	}
}

// Malloc times the wrapped backend's Malloc.
func (p *Profiler) Malloc(dev int, size uint64) (gpumem.Ptr, error) {
	defer p.done(opMalloc, time.Now())
	return p.Backend.Malloc(dev, size)
}

// Free times the wrapped backend's Free.
func (p *Profiler) Free(dev int, ptr gpumem.Ptr) error {
	defer p.done(opFree, time.Now())
	return p.Backend.Free(dev, ptr)
}

// MallocAsync times the wrapped backend's MallocAsync.
func (p *Profiler) MallocAsync(size uint64, s gpumem.Stream) (gpumem.Ptr, error) {
	defer p.done(opMallocAsync, time.Now())
	return p.Backend.MallocAsync(size, s)
}

// MallocFromPoolAsync times the wrapped backend's MallocFromPoolAsync.
func (p *Profiler) MallocFromPoolAsync(size uint64, pool gpumem.MemPool, s gpumem.Stream) (gpumem.Ptr, error) {
	defer p.done(opMallocFromPoolAsync, time.Now())
	return p.Backend.MallocFromPoolAsync(size, pool, s)
}

// FreeAsync times the wrapped backend's FreeAsync.
func (p *Profiler) FreeAsync(ptr gpumem.Ptr, s gpumem.Stream) error {
	defer p.done(opFreeAsync, time.Now())
	return p.Backend.FreeAsync(ptr, s)
}

// EventCreate times the wrapped backend's EventCreate.
func (p *Profiler) EventCreate(dev int, flags gpumem.EventFlags) (gpumem.Event, error) {
	defer p.done(opEventCreate, time.Now())
	return p.Backend.EventCreate(dev, flags)
}

// EventRecord times the wrapped backend's EventRecord.
func (p *Profiler) EventRecord(e gpumem.Event, s gpumem.Stream) error {
	defer p.done(opEventRecord, time.Now())
	return p.Backend.EventRecord(e, s)
}

// EventQuery times the wrapped backend's EventQuery.
func (p *Profiler) EventQuery(e gpumem.Event) (bool, error) {
	defer p.done(opEventQuery, time.Now())
	return p.Backend.EventQuery(e)
}

// EventSynchronize times the wrapped backend's EventSynchronize.
func (p *Profiler) EventSynchronize(e gpumem.Event) error {
	defer p.done(opEventSynchronize, time.Now())
	return p.Backend.EventSynchronize(e)
}

// EventDestroy times the wrapped backend's EventDestroy.
func (p *Profiler) EventDestroy(e gpumem.Event) error {
	defer p.done(opEventDestroy, time.Now())
	return p.Backend.EventDestroy(e)
}

// StreamWaitEvent times the wrapped backend's StreamWaitEvent.
func (p *Profiler) StreamWaitEvent(s gpumem.Stream, e gpumem.Event) error {
	defer p.done(opStreamWaitEvent, time.Now())
	return p.Backend.StreamWaitEvent(s, e)
}

// StreamSynchronize times the wrapped backend's StreamSynchronize.
func (p *Profiler) StreamSynchronize(s gpumem.Stream) error {
	defer p.done(opStreamSynchronize, time.Now())
	return p.Backend.StreamSynchronize(s)
}

// DeviceSynchronize times the wrapped backend's DeviceSynchronize.
func (p *Profiler) DeviceSynchronize(dev int) error {
	defer p.done(opDeviceSynchronize, time.Now())
	return p.Backend.DeviceSynchronize(dev)
}

// MemCreate times the wrapped backend's MemCreate.
func (p *Profiler) MemCreate(dev int, size uint64) (gpumem.MemHandle, error) {
	defer p.done(opMemCreate, time.Now())
	return p.Backend.MemCreate(dev, size)
}

// MemMap times the wrapped backend's MemMap.
func (p *Profiler) MemMap(ptr gpumem.Ptr, size, offset uint64, h gpumem.MemHandle) error {
	defer p.done(opMemMap, time.Now())
	return p.Backend.MemMap(ptr, size, offset, h)
}

// MemUnmap times the wrapped backend's MemUnmap.
func (p *Profiler) MemUnmap(ptr gpumem.Ptr, size uint64) error {
	defer p.done(opMemUnmap, time.Now())
	return p.Backend.MemUnmap(ptr, size)
}

// MemRelease times the wrapped backend's MemRelease.
func (p *Profiler) MemRelease(h gpumem.MemHandle) error {
	defer p.done(opMemRelease, time.Now())
	return p.Backend.MemRelease(h)
}

// MemSetAccess times the wrapped backend's MemSetAccess.
func (p *Profiler) MemSetAccess(ptr gpumem.Ptr, size uint64, dev int, a gpumem.Access) error {
	defer p.done(opMemSetAccess, time.Now())
	return p.Backend.MemSetAccess(ptr, size, dev, a)
}

// MemAddressReserve times the wrapped backend's MemAddressReserve.
func (p *Profiler) MemAddressReserve(size, alignment uint64) (gpumem.Ptr, error) {
	defer p.done(opMemAddressReserve, time.Now())
	return p.Backend.MemAddressReserve(size, alignment)
}

// MemAddressFree times the wrapped backend's MemAddressFree.
func (p *Profiler) MemAddressFree(ptr gpumem.Ptr, size uint64) error {
	defer p.done(opMemAddressFree, time.Now())
	return p.Backend.MemAddressFree(ptr, size)
}

// MemInfo times the wrapped backend's MemInfo.
func (p *Profiler) MemInfo(dev int) (free, total uint64, err error) {
	defer p.done(opMemInfo, time.Now())
	return p.Backend.MemInfo(dev)
}

// StreamCaptureInfo times the wrapped backend's StreamCaptureInfo.
func (p *Profiler) StreamCaptureInfo(s gpumem.Stream) (gpumem.CaptureInfo, error) {
	defer p.done(opStreamCaptureInfo, time.Now())
	return p.Backend.StreamCaptureInfo(s)
}

// CheckStream passes the allocators' in-process stream check through to the
// wrapped backend (gpumem.StreamChecker), untimed: it stands for no call
// into the vendor library. A backend without it is asked as allocators
// would ask it.
func (p *Profiler) CheckStream(s gpumem.Stream) error {
	if sc, ok := p.Backend.(gpumem.StreamChecker); ok {
		return sc.CheckStream(s)
	}
	p.epoch.Add(1)
	_, err := p.StreamCaptureInfo(s) // timed: what streamcheck asks such a backend
	return err
}

// MapsHandleTwice passes the wrapped backend's answer through
// (gpumem.MappingAliaser), so that an allocator over the Profiler moves
// memory as it would over the backend; a backend without the capability
// is tried, as allocators try it.
func (p *Profiler) MapsHandleTwice() (bool, string) {
	if m, ok := p.Backend.(gpumem.MappingAliaser); ok {
		return m.MapsHandleTwice()
	}
	return true, ""
}

// StreamEpoch is the wrapped backend's stream epoch (gpumem.StreamChecker):
// with it the Profiler is a StreamChecker, and an allocator over it keeps
// its stream checks' answers as it does over the backend itself, instead
// of asking the vendor library at every call (a profile would show calls
// the allocator does not make).
func (p *Profiler) StreamEpoch() *atomic.Uint64 {
	if sc, ok := p.Backend.(gpumem.StreamChecker); ok {
		return sc.StreamEpoch()
	}
	return &p.epoch
}
