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
	// Passes replays the trace this many times back to back over the same
	// allocator (0 or 1: once), as a job that repeats the recorded work:
	// each pass frees, at its end, what the trace leaves live, so that
	// every pass starts with nothing allocated and the allocator's cache
	// as the previous pass left it. Result.Passes says what each pass
	// cost: an allocator that has settled makes no device calls after the
	// first.
	Passes int
}

// MaxPasses bounds Options.Passes.
const MaxPasses = 1000

// Pass is what one pass of a replay of several cost (Options.Passes).
type Pass struct {
	NsPerPair    float64 `json:"ns_per_pair"`
	PeakReserved uint64  `json:"peak_reserved"`
	DeviceAllocs int64   `json:"device_allocs"` // made during the pass
	DeviceFrees  int64   `json:"device_frees"`  // made during the pass
	DeviceSyncs  int64   `json:"device_syncs"`  // made during the pass
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
	Trace         string `json:"trace"`
	Allocator     string `json:"allocator"`
	Backend       string `json:"backend"`
	Device        string `json:"device,omitempty"` // the device's name
	Conf          string `json:"conf"`
	Events        int    `json:"events"`
	Pairs         int    `json:"pairs"`          // allocations in the trace
	PeakRequested uint64 `json:"peak_requested"` // the trace's floor
	PeakReserved  uint64 `json:"peak_reserved"`
	PeakAllocated uint64 `json:"peak_allocated"`
	DeviceAllocs  int64  `json:"device_allocs"`
	DeviceFrees   int64  `json:"device_frees"`
	// DeviceSyncs counts the synchronizations of the whole device the
	// allocator made (num_sync_all_streams): each stalls every stream of
	// a busy GPU, a cost the replay, which queues no work, does not show
	// in its time.
	DeviceSyncs       int64   `json:"device_syncs"`
	OOMs              int     `json:"ooms"` // allocations that failed for lack of memory (skipped)
	AllocRetries      int64   `json:"alloc_retries"`
	CrossStreamReuses int64   `json:"cross_stream_reuses"`
	NsPerPair         float64 `json:"ns_per_pair"` // host time of the loop over pairs
	Overhead          float64 `json:"overhead"`    // peak_reserved / peak_requested
	LiveAtEnd         int     `json:"live_at_end"` // allocations the trace leaves live

	// Passes holds each pass's figures when the replay ran more than one
	// (Options.Passes); the figures above then cover all the passes.
	Passes []Pass `json:"passes,omitempty"`

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
	passes := max(opts.Passes, 1)
	if opts.Passes < 0 || opts.Passes > MaxPasses {
		return Result{}, fmt.Errorf("gpumem: replay: %d passes: want 1 to %d: %w", opts.Passes, MaxPasses, gpumem.ErrInvalidValue)
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
		every = (passes*len(steps) + maxPoints - 2) / (maxPoints - 1)
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
	var peakRes, peakAlloc, passPeak uint64
	var sampling time.Duration
	sample := func(i int) {
		t0 := time.Now()
		st := alloc.Stats(dev)
		p := Point{Event: i, Requested: bucketReq}
		p.Allocated = uint64(max(st.AllocatedBytes[gpumem.StatAll].Peak, 0))
		p.Reserved = uint64(max(st.ReservedBytes[gpumem.StatAll].Peak, 0))
		alloc.ResetPeakStats(dev)
		peakRes = max(peakRes, p.Reserved)
		passPeak = max(passPeak, p.Reserved)
		peakAlloc = max(peakAlloc, p.Allocated)
		// One point at most: the last one (the end), not the start.
		if maxPoints > 1 || maxPoints == 1 && i == passes*len(steps) {
			res.Timeline = append(res.Timeline, p)
		}
		bucketReq = live
		sampling += time.Since(t0)
	}
	if maxPoints > 0 {
		res.Timeline = make([]Point, 0, passes*len(steps)/every+2)
		sample(0)
		sampling = 0 // only samples inside the timed loop are subtracted
	}

	prof, _ := b.(*Profiler)
	if prof != nil {
		prof.Reset()
	}
	// figures fills in the replay's figures, from the allocator's
	// statistics and the loop's counts: at the end, or where a cancelled
	// replay stopped (its figures so far).
	figures := func(elapsed time.Duration) {
		st := alloc.Stats(dev)
		peakRes = max(peakRes, uint64(max(st.ReservedBytes[gpumem.StatAll].Peak, 0)))
		peakAlloc = max(peakAlloc, uint64(max(st.AllocatedBytes[gpumem.StatAll].Peak, 0)))
		res.PeakRequested = peakReq
		res.PeakReserved = peakRes
		res.PeakAllocated = peakAlloc
		res.DeviceAllocs = st.NumDeviceAlloc
		res.DeviceFrees = st.NumDeviceFree
		res.DeviceSyncs = st.NumSyncAllStreams
		res.AllocRetries = st.NumAllocRetries
		res.CrossStreamReuses = st.CrossStreamReuses
		res.LiveAtEnd = 0
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
	}
	done := ctx.Done()
	var elapsed time.Duration
	n := len(steps)
	// eventErr names event i (of the pass named by note) in an error.
	eventErr := func(i int, note, what string, err error) error {
		return fmt.Errorf("gpumem: replay: %s: event %d%s (%v): %s%w", tr.Name, i+1, note, tr.Events[i], what, err)
	}
	nextSample := every // the next event count after which the timeline is sampled
	for pass := 0; pass < passes; pass++ {
		note := "" // which pass, in errors, when there are several
		var before gpumem.MemoryStats
		if passes > 1 {
			note = fmt.Sprintf(" of pass %d", pass+1)
			before = alloc.Stats(dev)
			if pass > 0 {
				// Each pass's peaks are its own: the previous pass's
				// are folded into the replay's first.
				peakRes = max(peakRes, uint64(max(before.ReservedBytes[gpumem.StatAll].Peak, 0)))
				peakAlloc = max(peakAlloc, uint64(max(before.AllocatedBytes[gpumem.StatAll].Peak, 0)))
				alloc.ResetPeakStats(dev)
			}
			passPeak = uint64(max(before.ReservedBytes[gpumem.StatAll].Current, 0))
		}
		sampling = 0
		start := time.Now()
		for i, s := range steps {
			at := pass*n + i // the event's index over all the passes
			if done != nil && at&(checkEvery-1) == 0 && ctx.Err() != nil {
				figures(elapsed + time.Since(start) - sampling)
				return res, fmt.Errorf("gpumem: replay: %s: stopped before event %d%s: %w", tr.Name, i+1, note, context.Cause(ctx))
			}
			if s.alloc {
				res.Pairs++
				p, err := alloc.Allocate(s.size, streams[s.stream])
				switch {
				case err == nil:
					ptrs[s.slot], owner[s.slot], sizes[s.slot] = p, s.stream, s.size
					live += s.size
					if live > peakReq {
						peakReq = live
					}
					if live > bucketReq {
						bucketReq = live
					}
				case errors.Is(err, gpumem.ErrOutOfMemory):
					res.OOMs++
					ptrs[s.slot] = 0
				default:
					return res, eventErr(i, note, "", err)
				}
			} else if p := ptrs[s.slot]; p != 0 {
				own := owner[s.slot]
				if own != s.stream {
					if err := alloc.RecordStream(p, streams[s.stream]); err != nil {
						return res, eventErr(i, note, "record stream: ", err)
					}
				}
				if err := alloc.Deallocate(p, streams[own]); err != nil {
					return res, eventErr(i, note, "", err)
				}
				ptrs[s.slot] = 0
				live -= sizes[s.slot]
			}
			if at+1 == nextSample { // a compare: a division on every event costs more than some allocators' pairs
				sample(at + 1)
				nextSample += every
			}
		}
		if pass < passes-1 {
			// What the trace leaves live is freed before the next pass,
			// on its allocation's stream.
			for slot, p := range ptrs {
				if p == 0 {
					continue
				}
				if err := alloc.Deallocate(p, streams[owner[slot]]); err != nil {
					return res, fmt.Errorf("gpumem: replay: %s: freeing what pass %d left live: %w", tr.Name, pass+1, err)
				}
				ptrs[slot] = 0
				live -= sizes[slot]
			}
		}
		took := time.Since(start) - sampling
		elapsed += took
		if passes > 1 {
			after := alloc.Stats(dev)
			res.Passes = append(res.Passes, Pass{
				NsPerPair:    float64(took.Nanoseconds()) / float64(max(slots, 1)), // a slot per pair
				PeakReserved: max(passPeak, uint64(max(after.ReservedBytes[gpumem.StatAll].Peak, 0))),
				DeviceAllocs: after.NumDeviceAlloc - before.NumDeviceAlloc,
				DeviceFrees:  after.NumDeviceFree - before.NumDeviceFree,
				DeviceSyncs:  after.NumSyncAllStreams - before.NumSyncAllStreams,
			})
		}
	}
	if prof != nil {
		res.Profile = prof.Profile()
	}
	if maxPoints > 0 && (passes*n)%every != 0 {
		sample(passes * n)
	}
	for _, s := range streams {
		if err := b.StreamSynchronize(s); err != nil {
			return res, fmt.Errorf("gpumem: replay: synchronizing: %w", err)
		}
	}
	figures(elapsed)
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
