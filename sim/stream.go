package sim

import (
	"fmt"
	"time"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// This file is the execution engine. Every stream has a FIFO queue of ops
// and two counters: enq (ops queued so far) and done (ops completed). An op
// may depend on other streams reaching a count (event waits, and the legacy
// default stream's implicit synchronization); it runs when the head of its
// queue and its dependencies are complete. Events remember the stream and
// count of their last record. In free-running mode an op that is cheap and
// whose stream is idle runs at once in the caller (a GPU that happened to be
// fast); anything else runs on the stream's goroutine, started on demand.
// In Manual mode nothing runs until Step, Drain or a synchronizing call.

type opKind uint8

const (
	opNop        opKind = iota // an event wait or a marker
	opCopy                     // memcpy
	opSet                      // memset
	opHost                     // host function
	opKernel                   // Launch
	opRecord                   // event record
	opFree                     // FreeAsync reached
	opPrefetch                 // managed prefetch
	opGraphAlloc               // a graph's allocation node
	opGraphFree                // a graph's free node
	opGraphEnd                 // the end of a graph launch
	opUntag                    // UntagAsync reached
)

type op struct {
	kind      opKind
	m         symtab.Op
	dst, src  uint64
	size      uint64
	val       byte
	deps      []dep
	uses      []use
	fn        func()
	kfn       func([]byte)
	ev        *event
	evGen     uint64
	obj       *object
	loc       gpumem.Location
	ge        *graphExec
	fromGraph bool   // resolve memory when it runs (graph replay)
	dev       int    // the device that touches memory (for graph replays)
	pf        *pfree // FreeAsync: the free range it returns to the pool
	in        []byte // CopyToDevice: the caller's bytes to write at dst
	out       []byte // CopyFromDevice: where to read src into
}

// cheap ops may run inline in the caller when their stream is idle.
func (o *op) cheap() bool {
	return o.kind != opHost && o.kind != opKernel
}

type dep struct {
	s   *stream
	seq uint64
}

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

type event struct {
	h         uintptr
	dev       *device
	flags     gpumem.EventFlags
	s         *stream // last record's stream, nil if never recorded
	seq       uint64
	gen       uint64
	time      time.Time
	timed     bool // the last record has completed and set time
	cap       *capture
	capStream *stream
	capIdx    int
	stack     stack
}

// Violation is a use of memory that the simulator found unsafe when the work
// ran: the memory had been freed (Free, FreeAsync reached, MemUnmap, Untag),
// or had been handed to another allocation since the work was queued.
type Violation struct {
	Op     string        // the Backend method that queued the work ("MemcpyAsync", "Launch")
	Stream gpumem.Stream // the stream it was queued on
	Addr   gpumem.Ptr
	Size   uint64
	What   string
}

// String formats the violation.
func (v Violation) String() string {
	return fmt.Sprintf("%s on %v touching [%#x, +%d): %s", v.Op, v.Stream, uint64(v.Addr), v.Size, v.What)
}

// Violations returns the unsafe memory uses found so far, oldest first.
func (g *GPU) Violations() []Violation {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Violation(nil), g.violations...)
}

// ClearViolations forgets the violations found so far.
func (g *GPU) ClearViolations() {
	g.mu.Lock()
	g.violations = nil
	g.mu.Unlock()
}

func (g *GPU) violate(st *stream, o *op, a, size uint64, format string, args ...any) {
	g.violations = append(g.violations, Violation{Op: opName(o.m), Stream: st.handle(), Addr: gpumem.Ptr(a), Size: size, What: fmt.Sprintf(format, args...)})
}

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

func (g *GPU) lookupEvent(m symtab.Op, e gpumem.Event) (*event, error) {
	ev := g.events[e.Handle]
	if ev == nil || ev.dev.ord != e.Device {
		return nil, errf(m, symtab.CUDAInvalidHandle, "event(dev %d, %#x) is not a live event", e.Device, e.Handle)
	}
	return ev, nil
}

// enqueue queues o on st (or records it into st's capture); lock held.
func (g *GPU) enqueue(st *stream, o *op) error {
	if st.cap != nil {
		return g.captureOp(st, o)
	}
	if st.legacy {
		if err := g.legacyCaptureCheck(o.m, st.dev); err != nil {
			return err
		}
		for b := range st.dev.blocking {
			if b.pending() {
				o.deps = append(o.deps, dep{b, b.enq})
			}
		}
	} else if st.blocking() {
		if l := st.dev.legacy; l.pending() {
			o.deps = append(o.deps, dep{l, l.enq})
		}
	}
	st.q = append(st.q, o)
	st.enq++
	if g.manual {
		return nil
	}
	if st.head == len(st.q)-1 && !st.busy && !st.worker && o.cheap() && ready(o) {
		g.execHead(st)
		return nil
	}
	if !st.worker {
		st.worker = true
		go g.work(st)
	}
	return nil
}

func ready(o *op) bool {
	for _, d := range o.deps {
		if d.s.done < d.seq {
			return false
		}
	}
	return true
}

// work runs st's queue on its own goroutine until it is empty.
func (g *GPU) work(st *stream) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for !g.closed.Load() && st.head < len(st.q) {
		if st.busy || !ready(st.q[st.head]) {
			g.wait()
			continue
		}
		g.execHead(st)
	}
	st.worker = false
	g.forget(st)
}

// wait blocks on the progress condition; lock held.
func (g *GPU) wait() {
	g.nwait++
	g.cond.Wait()
	g.nwait--
}

// execHead runs the op at the head of st, which is ready; lock held (and
// released while a host function or kernel body runs).
func (g *GPU) execHead(st *stream) {
	o := st.q[st.head]
	st.q[st.head] = nil
	st.head++
	if st.head == len(st.q) {
		st.q = st.q[:0]
		st.head = 0
	}
	st.busy = true
	g.run(st, o)
	st.busy = false
	st.done++
	if g.nwait > 0 {
		g.cond.Broadcast()
	}
}

// forget drops a destroyed stream once its work is done.
func (g *GPU) forget(st *stream) {
	if st.destroyed && !st.pending() && !st.busy {
		delete(st.dev.blocking, st)
		delete(g.all, st)
	}
}

// check runs the use-after-free detector for o; it reports whether the
// memory is still there to touch.
func (g *GPU) check(st *stream, o *op) bool {
	if o.fromGraph {
		return true // checked by resolveAtRun
	}
	ok := true
	for _, u := range o.uses {
		switch {
		case u.obj.freed:
			cur := g.innermost(u.addr, u.addr+u.size)
			now := "nothing"
			if cur != nil {
				now = cur.describe()
			}
			g.violate(st, o, u.addr, u.size, "use after free: %s was freed before this work ran; the range now belongs to %s (allocated at\n%s)", u.obj.describe(), now, u.obj.stack.String())
			ok = ok && cur != nil
		case u.obj.kind == objGraphAlloc && !u.obj.live:
			g.violate(st, o, u.addr, u.size, "%s is not allocated (its graph has not been launched, or it was freed)", u.obj.describe())
			ok = false
		}
	}
	return ok
}

// resolveAtRun resolves the memory of a replayed graph node; false (and a
// violation) when it is not usable memory any more.
func (g *GPU) resolveAtRun(st *stream, o *op, a, n uint64, kernel bool) bool {
	if !o.fromGraph || n == 0 {
		return true
	}
	uses, err := g.resolve(o.m, a, n, o.dev, kernel)
	if err != nil {
		g.violate(st, o, a, n, "graph node touches memory that is gone: %v", err)
		return false
	}
	for _, u := range uses {
		if u.obj.kind == objGraphAlloc && !u.obj.live {
			g.violate(st, o, u.addr, u.size, "graph node touches %s, which is not allocated", u.obj.describe())
			return false
		}
	}
	return true
}

// run performs o; lock held.
func (g *GPU) run(st *stream, o *op) {
	switch o.kind {
	case opNop:
	case opCopy:
		if !g.check(st, o) {
			break
		}
		switch {
		case o.in != nil:
			if !g.writeMem(o.dst, o.in) {
				g.violate(st, o, o.dst, o.size, "copy touched memory that is no longer allocated")
			}
		case o.out != nil:
			if !g.readMem(o.src, o.out) {
				g.violate(st, o, o.src, o.size, "copy touched memory that is no longer allocated")
			}
		case g.resolveAtRun(st, o, o.dst, o.size, false) && g.resolveAtRun(st, o, o.src, o.size, false):
			if !g.copyMem(o.dst, o.src, o.size) {
				g.violate(st, o, o.dst, o.size, "copy touched memory that is no longer allocated")
			}
		}
	case opSet:
		if g.check(st, o) && g.resolveAtRun(st, o, o.dst, o.size, false) {
			if !g.fillMem(o.dst, o.size, o.val) {
				g.violate(st, o, o.dst, o.size, "memset touched memory that is no longer allocated")
			}
		}
	case opHost:
		g.mu.Unlock()
		err := callSafely(o.fn)
		g.mu.Lock()
		if err != nil {
			g.violate(st, o, 0, 0, "host function panicked: %v", err)
		}
	case opKernel:
		g.runKernel(st, o)
	case opRecord:
		if o.ev.gen == o.evGen {
			o.ev.time = time.Now()
			o.ev.timed = true
		}
	case opFree:
		g.completeFree(o.pf)
	case opPrefetch:
		if g.check(st, o) && g.resolveAtRun(st, o, o.dst, o.size, false) {
			g.prefetchRun(o)
		}
	case opGraphAlloc:
		g.graphAllocRun(st, o)
	case opGraphFree:
		g.graphFreeRun(st, o)
	case opGraphEnd:
		g.graphEndRun(o.ge)
	case opUntag:
		o.obj.freed = true
	}
}

func callSafely(fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	fn()
	return nil
}

func (g *GPU) runKernel(st *stream, o *op) {
	n0 := len(g.violations)
	if !g.check(st, o) || !g.resolveAtRun(st, o, o.dst, o.size, true) {
		return
	}
	g.touchRange(o.dst, o.size, st.dev.ord)
	buf := make([]byte, o.size)
	if !g.readMem(o.dst, buf) {
		g.violate(st, o, o.dst, o.size, "kernel read memory that is no longer allocated")
		return
	}
	g.mu.Unlock()
	err := callSafely(func() { o.kfn(buf) })
	g.mu.Lock()
	if err != nil {
		g.violate(st, o, o.dst, o.size, "kernel function panicked: %v", err)
		return
	}
	if len(g.violations) == n0 && !g.check(st, o) {
		return
	}
	if !g.writeMem(o.dst, buf) {
		g.violate(st, o, o.dst, o.size, "kernel wrote memory that was freed while it ran")
	}
}

// waitFor returns once st has completed seq ops, driving the queues in
// Manual mode; lock held.
func (g *GPU) waitFor(m symtab.Op, st *stream, seq uint64) error {
	for st.done < seq {
		if g.closed.Load() {
			return errf(m, symtab.CUDADeinitialized, "closed while waiting")
		}
		if g.manual {
			g.drive(st, seq)
			continue
		}
		if !st.worker && st.head < len(st.q) {
			st.worker = true
			go g.work(st)
		}
		g.wait()
	}
	return nil
}

// drive runs st (and what it depends on) until it has completed seq ops.
func (g *GPU) drive(st *stream, seq uint64) {
	for st.done < seq && !g.closed.Load() {
		if st.busy || st.head >= len(st.q) {
			g.wait()
			continue
		}
		o := st.q[st.head]
		blocked := false
		for _, d := range o.deps {
			if d.s.done < d.seq {
				blocked = true
				g.drive(d.s, d.seq)
			}
		}
		if !blocked {
			g.execHead(st)
		}
	}
}

// Step runs the next queued op of s in Manual mode and reports whether it
// ran one: false when s is idle, its next op waits for another stream, or the
// machine runs freely.
func (g *GPU) Step(s gpumem.Stream) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.manual || g.closed.Load() {
		return false
	}
	var st *stream
	if s.Device >= 0 && s.Device < len(g.devs) && s.Handle == 0 {
		st = g.devs[s.Device].legacy
	} else {
		st = g.streams[s.Handle]
	}
	if st == nil || st.busy || st.head >= len(st.q) || !ready(st.q[st.head]) {
		return false
	}
	g.execHead(st)
	g.forget(st)
	return true
}

// Drain runs every stream until all queued work is done and returns nil, or
// an error if the machine is closed.
func (g *GPU) Drain() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		if g.closed.Load() {
			return fmt.Errorf("sim: Drain: %w", gpumem.ErrClosed)
		}
		progress, pending := false, false
		for _, st := range g.allStreams() {
			if st.head >= len(st.q) && !st.busy {
				continue
			}
			pending = true
			if g.manual && !st.busy && ready(st.q[st.head]) {
				g.execHead(st)
				g.forget(st)
				progress = true
			}
		}
		if !pending {
			return nil
		}
		if !progress {
			g.wait()
		}
	}
}

// allStreams lists every stream that may hold work: legacy streams, live
// streams and destroyed streams still draining.
func (g *GPU) allStreams() []*stream {
	out := make([]*stream, 0, len(g.all)+len(g.devs))
	for _, d := range g.devs {
		out = append(out, d.legacy)
	}
	for st := range g.all {
		out = append(out, st)
	}
	return out
}

// syncDevice waits for all work queued on d's streams; lock held.
func (g *GPU) syncDevice(m symtab.Op, d *device) error {
	idle := !d.legacy.pending()
	if idle {
		for st := range g.all {
			if st.dev == d && st.pending() {
				idle = false
				break
			}
		}
	}
	if idle {
		return nil
	}
	for _, st := range g.allStreams() {
		if st.dev != d || st.cap != nil {
			continue
		}
		if err := g.waitFor(m, st, st.enq); err != nil {
			return err
		}
	}
	return nil
}

// inlineReady reports whether work queued on st now could run at once in
// the caller: free-running, st idle and nothing to wait for.
func (g *GPU) inlineReady(st *stream) bool {
	if g.manual || st.cap != nil || st.busy || st.worker || st.head != len(st.q) {
		return false
	}
	if st.legacy {
		for b := range st.dev.blocking {
			if b.pending() {
				return false
			}
		}
		return len(g.captures) == 0
	}
	return !st.blocking() || !st.dev.legacy.pending()
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
	return nil
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

// EventCreate creates an event.
func (g *GPU) EventCreate(dev int, flags gpumem.EventFlags) (gpumem.Event, error) {
	if err := g.enter(symtab.EventCreate); err != nil {
		return gpumem.Event{}, err
	}
	d, err := g.device(symtab.EventCreate, dev)
	if err != nil {
		return gpumem.Event{}, err
	}
	if flags&^(gpumem.EventBlockingSync|gpumem.EventDisableTiming) != 0 {
		return gpumem.Event{}, errf(symtab.EventCreate, symtab.CUDAInvalidValue, "unknown event flags %#x", uint32(flags))
	}
	ev := &event{dev: d, flags: flags, stack: g.callers(1)}
	g.mu.Lock()
	defer g.mu.Unlock()
	ev.h = g.handle()
	g.events[ev.h] = ev
	return gpumem.Event{Handle: ev.h, Device: dev}, nil
}

// EventDestroy destroys an event; waits already queued on it still hold.
func (g *GPU) EventDestroy(e gpumem.Event) error {
	if err := g.enter(symtab.EventDestroy); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	ev, err := g.lookupEvent(symtab.EventDestroy, e)
	if err != nil {
		return err
	}
	delete(g.events, ev.h)
	return nil
}

// EventRecord records the work queued on s so far in the event. The event
// and the stream must belong to the same device.
func (g *GPU) EventRecord(e gpumem.Event, s gpumem.Stream) error {
	if err := g.enter(symtab.EventRecord); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	ev, err := g.lookupEvent(symtab.EventRecord, e)
	if err != nil {
		return err
	}
	st, err := g.lookupStream(symtab.EventRecord, s)
	if err != nil {
		return err
	}
	if st.dev != ev.dev {
		return errf(symtab.EventRecord, symtab.CUDAInvalidHandle, "event of device %d recorded on %v", ev.dev.ord, s)
	}
	if st.cap != nil {
		return g.captureRecord(st, ev)
	}
	ev.gen++
	ev.cap = nil
	ev.timed = false
	if err := g.enqueue(st, &op{kind: opRecord, m: symtab.EventRecord, ev: ev, evGen: ev.gen}); err != nil {
		return err
	}
	ev.s, ev.seq = st, st.enq
	return nil
}

func (g *GPU) capturedEvent(m symtab.Op, ev *event) error {
	if ev.cap != nil && ev.cap.status != captureEnded {
		g.invalidate(ev.cap)
		return errf(m, symtab.CUDACapturedEvent, "the event was last recorded in a capturing stream")
	}
	return nil
}

// EventQuery reports whether the work recorded by the event has completed
// (true for an event never recorded).
func (g *GPU) EventQuery(e gpumem.Event) (bool, error) {
	if err := g.enter(symtab.EventQuery); err != nil {
		return false, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	ev, err := g.lookupEvent(symtab.EventQuery, e)
	if err != nil {
		return false, err
	}
	if err := g.capturedEvent(symtab.EventQuery, ev); err != nil {
		return false, err
	}
	return ev.s == nil || ev.s.done >= ev.seq, nil
}

// EventSynchronize waits for the work recorded by the event.
func (g *GPU) EventSynchronize(e gpumem.Event) error {
	if err := g.enter(symtab.EventSynchronize); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	ev, err := g.lookupEvent(symtab.EventSynchronize, e)
	if err != nil {
		return err
	}
	if err := g.capturedEvent(symtab.EventSynchronize, ev); err != nil {
		return err
	}
	if err := g.unsafeDuringCapture(symtab.EventSynchronize, ev.dev); err != nil {
		return err
	}
	if ev.s == nil {
		return nil
	}
	if err := g.waitFor(symtab.EventSynchronize, ev.s, ev.seq); err != nil {
		return err
	}
	g.trimPools(ev.dev)
	return nil
}

// EventElapsed returns the milliseconds between two completed events
// (host wall time between their completions in the simulator).
func (g *GPU) EventElapsed(start, end gpumem.Event) (float32, error) {
	if err := g.enter(symtab.EventElapsed); err != nil {
		return 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	a, err := g.lookupEvent(symtab.EventElapsed, start)
	if err != nil {
		return 0, err
	}
	b, err := g.lookupEvent(symtab.EventElapsed, end)
	if err != nil {
		return 0, err
	}
	for _, ev := range []*event{a, b} {
		if err := g.capturedEvent(symtab.EventElapsed, ev); err != nil {
			return 0, err
		}
		if ev.flags&gpumem.EventDisableTiming != 0 || ev.s == nil {
			return 0, errf(symtab.EventElapsed, symtab.CUDAInvalidHandle, "event without timing or never recorded")
		}
		if !ev.timed {
			return 0, errf(symtab.EventElapsed, symtab.CUDANotReady, "event not completed yet")
		}
	}
	return float32(b.time.Sub(a.time).Seconds() * 1000), nil
}

// LaunchHostFunc queues fn on s; it runs on the stream's goroutine (or the
// goroutine that drives the stream in Manual mode) when s reaches it.
func (g *GPU) LaunchHostFunc(s gpumem.Stream, fn func()) error {
	if err := g.enter(symtab.LaunchHostFunc); err != nil {
		return err
	}
	if fn == nil {
		return errf(symtab.LaunchHostFunc, symtab.CUDAInvalidValue, "nil function")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.lookupStream(symtab.LaunchHostFunc, s)
	if err != nil {
		return err
	}
	return g.enqueue(st, &op{kind: opHost, m: symtab.LaunchHostFunc, fn: fn})
}

// Launch queues a simulated kernel on s that reads and writes [p, p+size):
// when s reaches it, fn gets a copy of that memory and what it leaves in the
// slice is written back. The use-after-free detector checks the range when
// the kernel runs; managed pages fault to the stream's device; memory of
// another device needs peer access (EnablePeerAccess, MemPoolSetAccess or
// MemSetAccess). fn must not call the GPU.
func (g *GPU) Launch(s gpumem.Stream, p gpumem.Ptr, size uint64, fn func(mem []byte)) error {
	if err := g.enter(symtab.Launch); err != nil {
		return err
	}
	if fn == nil {
		return errf(symtab.Launch, symtab.CUDAInvalidValue, "nil kernel function")
	}
	if size > 1<<34 {
		return errf(symtab.Launch, symtab.CUDAInvalidValue, "a simulated kernel touches at most 16 GiB, not %d bytes", size)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.lookupStream(symtab.Launch, s)
	if err != nil {
		return err
	}
	uses, err := g.resolve(symtab.Launch, uint64(p), size, st.dev.ord, true)
	if err != nil {
		return err
	}
	return g.enqueue(st, &op{kind: opKernel, m: symtab.Launch, dst: uint64(p), size: size, uses: uses, kfn: fn, dev: st.dev.ord})
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
	return nil
}
