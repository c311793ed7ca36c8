package sim

import (
	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
	"sync/atomic"
)

// This file is the streams of the Backend interface: creation, destruction,
// synchronization and queries, over the engine in engine.go.

type stream struct {
	h         uintptr
	g         *GPU
	dev       *device
	flags     gpumem.StreamFlags
	prio      int
	legacy    bool
	destroyed bool
	q         []*op
	head      int
	enq, done uint64
	busy      bool
	worker    bool
	cap       *capture
	joinedTo  *stream // capture: the stream this one's work was joined back into
	ordered   map[*stream]uint64
	stack     stack
}

func (s *stream) handle() gpumem.Stream {
	return gpumem.Stream{Handle: s.h, Device: s.dev.ord}
}

func (s *stream) pending() bool { return s.done < s.enq }

func (s *stream) blocking() bool { return !s.legacy && s.flags&gpumem.StreamNonBlocking == 0 }

// lookupStream resolves a stream handle; lock held.
func (g *GPU) lookupStream(m symtab.Op, s gpumem.Stream) (*stream, error) {
	if s.Device < 0 || s.Device >= len(g.devs) {
		return nil, errf(m, symtab.CUDAInvalidHandle, "%v: no device %d", s, s.Device)
	}
	if s.Handle == 0 {
		return g.devs[s.Device].legacy, nil
	}
	st := g.streams[s.Handle]
	if st == nil || st.destroyed {
		return nil, errf(m, symtab.CUDAInvalidHandle, "%v is not a live stream", s)
	}
	if st.dev.ord != s.Device {
		return nil, errf(m, symtab.CUDAInvalidHandle, "%v belongs to device %d", s, st.dev.ord)
	}
	return st, nil
}

// StreamCreate creates a stream; priorities are clamped to
// StreamPriorityRange as CUDA does.
func (g *GPU) StreamCreate(dev int, flags gpumem.StreamFlags, priority int) (gpumem.Stream, error) {
	if err := g.enter(symtab.StreamCreate); err != nil {
		return gpumem.Stream{}, err
	}
	d, err := g.device(symtab.StreamCreate, dev)
	if err != nil {
		return gpumem.Stream{}, err
	}
	if flags&^gpumem.StreamNonBlocking != 0 {
		return gpumem.Stream{}, errf(symtab.StreamCreate, symtab.CUDAInvalidValue, "unknown stream flags %#x", uint32(flags))
	}
	priority = max(min(priority, 0), -5)
	st := &stream{g: g, dev: d, flags: flags, prio: priority, stack: g.callers(1)}
	g.mu.Lock()
	defer g.mu.Unlock()
	st.h = g.handle()
	g.streams[st.h] = st
	g.all[st] = struct{}{}
	if st.blocking() {
		d.blocking[st] = struct{}{}
	}
	return st.handle(), nil
}

// StreamDestroy destroys a stream; work already queued still runs.
func (g *GPU) StreamDestroy(s gpumem.Stream) error {
	if err := g.enter(symtab.StreamDestroy); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if s.Handle == 0 {
		return errf(symtab.StreamDestroy, symtab.CUDAInvalidHandle, "the default stream cannot be destroyed")
	}
	st, err := g.lookupStream(symtab.StreamDestroy, s)
	if err != nil {
		return err
	}
	if st.cap != nil {
		g.invalidate(st.cap)
		g.leaveCapture(st)
	}
	st.destroyed = true
	delete(g.streams, st.h)
	g.forget(st)
	g.pins.Forget(st.h)
	g.streamEpoch.Add(1)
	return nil
}

// StreamSynchronize waits for the work queued on s. It is illegal while s
// is capturing (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, which invalidates the
// capture).
func (g *GPU) StreamSynchronize(s gpumem.Stream) error {
	if err := g.enter(symtab.StreamSynchronize); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.lookupStream(symtab.StreamSynchronize, s)
	if err != nil {
		return err
	}
	if st.cap != nil {
		g.invalidate(st.cap)
		return errf(symtab.StreamSynchronize, symtab.CUDAStreamCaptureUnsupported, "%v is capturing", s)
	}
	if err := g.unsafeDuringCapture(symtab.StreamSynchronize, st.dev); err != nil {
		return err
	}
	if st.legacy {
		if err := g.legacyCaptureCheck(symtab.StreamSynchronize, st.dev); err != nil {
			return err
		}
		// The legacy stream waits for every blocking stream.
		for b := range st.dev.blocking {
			if err := g.waitFor(symtab.StreamSynchronize, b, b.enq); err != nil {
				return err
			}
		}
	}
	if err := g.waitFor(symtab.StreamSynchronize, st, st.enq); err != nil {
		return err
	}
	g.trimPools(st.dev)
	return g.stickyErr(symtab.StreamSynchronize, st.dev)
}

// StreamQuery reports whether s has completed its queued work. It is
// illegal while s is capturing.
func (g *GPU) StreamQuery(s gpumem.Stream) (bool, error) {
	if err := g.enter(symtab.StreamQuery); err != nil {
		return false, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.lookupStream(symtab.StreamQuery, s)
	if err != nil {
		return false, err
	}
	if st.cap != nil {
		g.invalidate(st.cap)
		return false, errf(symtab.StreamQuery, symtab.CUDAStreamCaptureUnsupported, "%v is capturing", s)
	}
	if err := g.stickyErr(symtab.StreamQuery, st.dev); err != nil {
		return false, err
	}
	return !st.pending(), nil
}

// StreamWaitEvent makes future work on s wait for the event's last record.
// During capture, waiting on an event recorded in a capturing stream joins s
// to that capture (a fork), and the origin stream waiting on an event of a
// joined stream joins it back.
func (g *GPU) StreamWaitEvent(s gpumem.Stream, e gpumem.Event) error {
	if err := g.enter(symtab.StreamWaitEvent); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.lookupStream(symtab.StreamWaitEvent, s)
	if err != nil {
		return err
	}
	ev, err := g.lookupEvent(symtab.StreamWaitEvent, e)
	if err != nil {
		return err
	}
	if ev.cap != nil && ev.cap.status != captureEnded {
		return g.captureWait(st, ev)
	}
	if st.cap != nil {
		if ev.s == nil {
			return nil
		}
		g.invalidate(st.cap)
		return errf(symtab.StreamWaitEvent, symtab.CUDAStreamCaptureIsolation, "capturing %v cannot wait on an event recorded outside the capture", s)
	}
	if ev.s == nil {
		return nil
	}
	if st.ordered == nil {
		st.ordered = map[*stream]uint64{}
	}
	if ev.seq > st.ordered[ev.s] {
		st.ordered[ev.s] = ev.seq
	}
	return g.enqueue(st, &op{kind: opNop, m: symtab.StreamWaitEvent, deps: []dep{{ev.s, ev.seq}}})
}

// StreamPriorityRange returns 0 (least) and -5 (greatest), as an H100 or H200.
func (g *GPU) StreamPriorityRange(dev int) (least, greatest int, err error) {
	if err := g.enter(symtab.StreamPriorityRange); err != nil {
		return 0, 0, err
	}
	if _, err := g.device(symtab.StreamPriorityRange, dev); err != nil {
		return 0, 0, err
	}
	return 0, -5, nil
}

// DeviceSynchronize waits for all work queued on the device. It is illegal
// while a global-mode capture is active.
func (g *GPU) DeviceSynchronize(dev int) error {
	if err := g.enter(symtab.DeviceSynchronize); err != nil {
		return err
	}
	d, err := g.device(symtab.DeviceSynchronize, dev)
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.captureOnDevice(symtab.DeviceSynchronize, d); err != nil {
		return err
	}
	if err := g.syncDevice(symtab.DeviceSynchronize, d); err != nil {
		return err
	}
	g.trimPools(d)
	return g.stickyErr(symtab.DeviceSynchronize, d)
}

// CheckStream implements gpumem.StreamChecker in process: nil for a live
// stream of its device (or a device's default stream), an error matching
// ErrInvalidValue for any other handle, ErrClosed after Close (StreamEpoch
// counts destroyed streams and Close). It is not
// counted among the calls, nor fault-injectable: it stands for the checks an
// allocator makes without calling the device.
func (g *GPU) CheckStream(s gpumem.Stream) error {
	if g == nil {
		return errNil("CheckStream")
	}
	if g.closed.Load() {
		return errf(symtab.StreamQuery, symtab.CUDADeinitialized, "the simulated GPU is closed")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	_, err := g.lookupStream(symtab.StreamQuery, s)
	return err
}

// StreamEpoch implements gpumem.StreamChecker: incremented by StreamDestroy
// and Close.
func (g *GPU) StreamEpoch() *atomic.Uint64 {
	if g == nil {
		return nil
	}
	return &g.streamEpoch
}
