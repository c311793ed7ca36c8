// Package replay drives an allocator with an allocation trace and reports
// what it cost: peak reserved bytes against the trace's floor (the peak of
// live requested bytes), device allocations, out-of-memory failures and host
// time per allocation/free pair.
//
// The replay follows the project's GPU anchor (a C++ program driving
// PyTorch's allocator with the same traces): four non-blocking streams are
// created on the device; "a ID SIZE STREAM" allocates SIZE bytes on stream
// STREAM&3; "f ID STREAM" frees the allocation, first recording its use on the
// free's stream when that differs from the allocation's, then deallocating it
// on the allocation's stream. Only the allocate/free loop is timed.
//
// A replay drives any gpumem.Allocator (an allocator or a chain of
// adaptors); allocators are found by name through gpumem's registry
// (gpumem.NewNamedAllocator).
package replay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/trace"
)

// NumStreams is the number of streams a replay creates; a trace's stream s
// runs on stream s % NumStreams, as in the GPU anchor.
const NumStreams = 4

// DefaultTimelinePoints is the default bound on the timeline's length.
const DefaultTimelinePoints = 2000

// Options adjust a replay.
type Options struct {
	Allocator      string // the allocator's name, for the result
	Conf           string // the configuration, for the result
	Device         int    // the device to replay on (default 0)
	TimelinePoints int    // at most this many timeline points (0: DefaultTimelinePoints; <0: none)
}

// Point is one sample of the timeline: the bytes live at event index Event.
// The fields are the largest values seen since the previous point when the
// allocator can reset its peaks (or for Requested, always); otherwise the
// values at Event.
type Point struct {
	Event     int    `json:"event"`
	Requested uint64 `json:"requested"` // live bytes the trace asked for
	Allocated uint64 `json:"allocated"` // bytes the allocator handed out (rounded)
	Reserved  uint64 `json:"reserved"`  // bytes the allocator held from the device
}

// Result is what a replay measured. The JSON names are part of the
// command-line tool's interface.
type Result struct {
	Trace             string  `json:"trace"`
	Allocator         string  `json:"allocator"`
	Backend           string  `json:"backend"`
	Device            string  `json:"device,omitempty"` // the device's name
	Conf              string  `json:"conf"`
	Events            int     `json:"events"`
	Pairs             int     `json:"pairs"`          // allocations in the trace
	PeakRequested     uint64  `json:"peak_requested"` // the trace's floor
	PeakReserved      uint64  `json:"peak_reserved"`
	PeakAllocated     uint64  `json:"peak_allocated"`
	DeviceAllocs      int64   `json:"device_allocs"`
	DeviceFrees       int64   `json:"device_frees"`
	OOMs              int     `json:"ooms"` // allocations that failed for lack of memory (skipped)
	AllocRetries      int64   `json:"alloc_retries"`
	CrossStreamReuses int64   `json:"cross_stream_reuses"`
	NsPerPair         float64 `json:"ns_per_pair"` // host time of the loop over pairs
	Overhead          float64 `json:"overhead"`    // peak_reserved / peak_requested
	LiveAtEnd         int     `json:"live_at_end"` // allocations the trace leaves live

	// Profile is what the timed loop spent in each backend operation, when
	// the replay ran over a Profiler (see NewProfiler); else empty.
	Profile []OpProfile `json:"profile,omitempty"`

	// Timeline is the sampled memory use over the replay (not in JSON).
	Timeline []Point `json:"-"`
}

// step is one event with its allocation slot resolved.
type step struct {
	alloc  bool
	slot   int32
	stream uint8
	size   uint64
}

// Run replays tr through alloc on backend b and then closes alloc (which
// releases the allocations the trace leaves live) and the replay's streams.
// An allocation that fails for lack of memory is counted in OOMs and
// skipped, and its free ignored; any other failure stops the replay with an
// error naming the event. When b is a *Profiler (the one alloc was built
// over), Result.Profile holds the backend calls of the timed loop.
func Run(b gpumem.Backend, tr *trace.Trace, alloc gpumem.Allocator, opts Options) (Result, error) {
	return RunContext(context.Background(), b, tr, alloc, opts)
}

// checkEvery is how many events RunContext replays between two looks at
// its context: a power of two, so that the look costs a mask and a test.
const checkEvery = 1024

// RunContext is Run, stopped early when ctx is done: the context is
// looked at before the replay and every checkEvery events, and a replay
// that stops returns the figures so far with an error wrapping ctx.Err().
// The allocator is closed (and the streams destroyed) either way.
func RunContext(ctx context.Context, b gpumem.Backend, tr *trace.Trace, alloc gpumem.Allocator, opts Options) (res Result, err error) {
	if b == nil || tr == nil || alloc == nil {
		return Result{}, fmt.Errorf("gpumem: replay: nil backend, trace or allocator: %w", gpumem.ErrInvalidValue)
	}
	closed := false
	defer func() {
		if !closed {
			if cerr := alloc.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("gpumem: replay: closing the allocator: %w", cerr)
			}
		}
	}()
	steps, slots, err := compile(tr)
	if err != nil {
		return Result{}, err
	}
	dev := opts.Device
	if n, err := b.DeviceCount(); err != nil {
		return Result{}, fmt.Errorf("gpumem: replay: %w", err)
	} else if dev < 0 || dev >= n {
		return Result{}, fmt.Errorf("gpumem: replay: device %d out of range (%d devices): %w", dev, n, gpumem.ErrInvalidValue)
	}
	res = Result{
		Trace: tr.Name, Allocator: opts.Allocator, Backend: b.Name(), Conf: opts.Conf,
		Events: len(tr.Events),
	}
	if name, err := b.DeviceName(dev); err == nil {
		res.Device = name
	}
	var streams [NumStreams]gpumem.Stream
	for i := range streams {
		s, err := b.StreamCreate(dev, gpumem.StreamNonBlocking, 0)
		if err != nil {
			for _, c := range streams[:i] {
				b.StreamDestroy(c)
			}
			return Result{}, fmt.Errorf("gpumem: replay: creating stream %d: %w", i, err)
		}
		streams[i] = s
	}
	defer func() {
		// Close the allocator before its streams go away.
		closed = true
		cerr := alloc.Close()
		for _, s := range streams {
			b.StreamDestroy(s)
		}
		if cerr != nil && err == nil {
			err = fmt.Errorf("gpumem: replay: closing the allocator: %w", cerr)
		}
	}()

	maxPoints := opts.TimelinePoints
	if maxPoints == 0 {
		maxPoints = DefaultTimelinePoints
	}
	every := math.MaxInt
	if maxPoints > 1 {
		every = (len(steps) + maxPoints - 2) / (maxPoints - 1)
		if every < 1 {
			every = 1
		}
	}
	if err := gpumem.SetupOf(alloc, dev); err != nil {
		return res, fmt.Errorf("gpumem: replay: setting device %d up: %w", dev, err)
	}
	alloc.ResetPeakStats(dev)
	ptrs := make([]gpumem.Ptr, slots)
	owner := make([]uint8, slots)
	sizes := make([]uint64, slots)
	var live, bucketReq, peakReq uint64
	var peakRes, peakAlloc uint64
	var sampling time.Duration
	sample := func(i int) {
		t0 := time.Now()
		st := alloc.Stats(dev)
		p := Point{Event: i, Requested: bucketReq}
		p.Allocated = uint64(max(st.AllocatedBytes[gpumem.StatAll].Peak, 0))
		p.Reserved = uint64(max(st.ReservedBytes[gpumem.StatAll].Peak, 0))
		alloc.ResetPeakStats(dev)
		peakRes = max(peakRes, p.Reserved)
		peakAlloc = max(peakAlloc, p.Allocated)
		if maxPoints > 0 {
			res.Timeline = append(res.Timeline, p)
		}
		bucketReq = live
		sampling += time.Since(t0)
	}
	if maxPoints > 0 {
		res.Timeline = make([]Point, 0, len(steps)/every+2)
		sample(0)
		sampling = 0 // only samples inside the timed loop are subtracted
	}

	prof, _ := b.(*Profiler)
	if prof != nil {
		prof.Reset()
	}
	done := ctx.Done()
	start := time.Now()
	for i, s := range steps {
		if done != nil && i&(checkEvery-1) == 0 && ctx.Err() != nil {
			return res, fmt.Errorf("gpumem: replay: %s: stopped before event %d: %w", tr.Name, i+1, context.Cause(ctx))
		}
		if s.alloc {
			res.Pairs++
			p, err := alloc.Allocate(s.size, streams[s.stream])
			if err != nil {
				if errors.Is(err, gpumem.ErrOutOfMemory) {
					res.OOMs++
					ptrs[s.slot] = 0
					continue
				}
				return res, fmt.Errorf("gpumem: replay: %s: event %d (%v): %w", tr.Name, i+1, tr.Events[i], err)
			}
			ptrs[s.slot], owner[s.slot], sizes[s.slot] = p, s.stream, s.size
			live += s.size
			if live > peakReq {
				peakReq = live
			}
			if live > bucketReq {
				bucketReq = live
			}
		} else if p := ptrs[s.slot]; p != 0 {
			own := owner[s.slot]
			if own != s.stream {
				if err := alloc.RecordStream(p, streams[s.stream]); err != nil {
					return res, fmt.Errorf("gpumem: replay: %s: event %d (%v): record stream: %w", tr.Name, i+1, tr.Events[i], err)
				}
			}
			if err := alloc.Deallocate(p, streams[own]); err != nil {
				return res, fmt.Errorf("gpumem: replay: %s: event %d (%v): %w", tr.Name, i+1, tr.Events[i], err)
			}
			ptrs[s.slot] = 0
			live -= sizes[s.slot]
		}
		if (i+1)%every == 0 {
			sample(i + 1)
		}
	}
	elapsed := time.Since(start) - sampling
	if prof != nil {
		res.Profile = prof.Profile()
	}
	if maxPoints > 0 && len(steps)%every != 0 {
		sample(len(steps))
	}
	for _, s := range streams {
		if err := b.StreamSynchronize(s); err != nil {
			return res, fmt.Errorf("gpumem: replay: synchronizing: %w", err)
		}
	}
	st := alloc.Stats(dev)
	peakRes = max(peakRes, uint64(max(st.ReservedBytes[gpumem.StatAll].Peak, 0)))
	peakAlloc = max(peakAlloc, uint64(max(st.AllocatedBytes[gpumem.StatAll].Peak, 0)))
	res.PeakRequested = peakReq
	res.PeakReserved = peakRes
	res.PeakAllocated = peakAlloc
	res.DeviceAllocs = st.NumDeviceAlloc
	res.DeviceFrees = st.NumDeviceFree
	res.AllocRetries = st.NumAllocRetries
	res.CrossStreamReuses = st.CrossStreamReuses
	for _, p := range ptrs {
		if p != 0 {
			res.LiveAtEnd++
		}
	}
	if res.Pairs > 0 {
		res.NsPerPair = float64(elapsed.Nanoseconds()) / float64(res.Pairs)
	}
	if peakReq > 0 {
		res.Overhead = float64(peakRes) / float64(peakReq)
	}
	return res, nil
}

// compile checks the trace and gives every allocation a dense slot so that
// the timed loop indexes slices instead of hashing IDs.
func compile(tr *trace.Trace) ([]step, int, error) {
	if err := tr.Validate(); err != nil {
		return nil, 0, fmt.Errorf("gpumem: replay: %w", err)
	}
	if len(tr.Events) > math.MaxInt32 {
		return nil, 0, fmt.Errorf("gpumem: replay: %s: too many events (%d): %w", tr.Name, len(tr.Events), gpumem.ErrInvalidValue)
	}
	slotOf := make(map[uint64]int32, len(tr.Events)/2+1)
	steps := make([]step, len(tr.Events))
	n := int32(0)
	for i, e := range tr.Events {
		st := uint8(e.Stream & (NumStreams - 1))
		if e.Alloc {
			slotOf[e.ID] = n
			steps[i] = step{alloc: true, slot: n, stream: st, size: e.Size}
			n++
			continue
		}
		steps[i] = step{slot: slotOf[e.ID], stream: st}
	}
	return steps, int(n), nil
}
