package sim

import (
	"errors"
	"math"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// Capture records the work queued on a capturing stream (and on streams
// joined to it through events recorded in the capture) as graph nodes
// instead of running it. The graph is a sequence of nodes in capture order,
// which is a valid serialization of the captured dependencies; a launch
// queues that sequence on the launch stream.

type captureStatus int

const (
	captureActive captureStatus = iota
	captureInvalidated
	captureEnded
)

type capture struct {
	id      uint64
	origin  *stream
	mode    gpumem.CaptureMode
	tid     int // the OS thread that began it (global and thread-local modes)
	status  captureStatus
	graph   *graph
	streams map[*stream]int // captured streams: index of their last node, -1 for none
}

type graph struct {
	h         uintptr
	dev       *device
	nodes     []*op
	allocs    []*object              // graph allocations made by this graph's nodes
	freed     map[*object]bool       // graph allocations its own nodes free
	uobjs     map[*userObject]uint32 // references the graph holds
	execs     int
	destroyed bool
	stack     stack
}

type graphExec struct {
	h           uintptr
	gr          *graph
	nodes       []*op
	allocNoFree []*object
	uobjs       map[*userObject]uint32
	inflight    int
	destroyed   bool
	released    bool
	stack       stack
}

type userObject struct {
	h     uintptr
	dev   int
	fn    func()
	refs  int64 // every reference: the caller's and the graphs'
	owned int64 // the caller's, which UserObjectRelease and a move take
	stack stack
}

func (g *GPU) invalidate(c *capture) {
	if c != nil && c.status == captureActive {
		c.status = captureInvalidated
	}
}

func (g *GPU) leaveCapture(st *stream) {
	if st.cap != nil {
		delete(st.cap.streams, st)
		st.cap = nil
		st.joinedTo = nil
	}
}

// unsafeDuringCapture fails (and invalidates) when a global-mode (or
// thread-local: goroutines cannot be told apart) capture is active: the call
// is one that CUDA 13 refuses then (measured on an H200: cuMemAlloc,
// cuMemFree, cuMemHostAlloc, cuStreamSynchronize and cuEventSynchronize of
// other streams' work).
func (g *GPU) unsafeDuringCapture(m symtab.Op, d *device) error {
	if len(g.captures) == 0 {
		return nil
	}
	var hit bool
	for _, c := range g.captures {
		if c.status == captureActive && c.mode != gpumem.CaptureModeRelaxed {
			g.invalidate(c)
			hit = true
		}
	}
	if hit {
		return errf(m, symtab.CUDAStreamCaptureUnsupported, "not permitted while a global-mode stream capture is active")
	}
	return nil
}

// captureOnDevice fails (and invalidates) when any capture is active on d:
// cuCtxSynchronize refuses then whatever the mode.
func (g *GPU) captureOnDevice(m symtab.Op, d *device) error {
	var hit bool
	for _, c := range g.captures {
		if c.status == captureActive && c.origin.dev == d {
			g.invalidate(c)
			hit = true
		}
	}
	if hit {
		return errf(m, symtab.CUDAStreamCaptureUnsupported, "device %d has a capturing stream", d.ord)
	}
	return nil
}

// legacyCaptureCheck fails when work on d's legacy stream would synchronize
// with a capturing blocking stream (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT).
func (g *GPU) legacyCaptureCheck(m symtab.Op, d *device) error {
	var hit bool
	for _, c := range g.captures {
		if c.status != captureEnded {
			for st := range c.streams {
				if st.dev == d && st.blocking() {
					g.invalidate(c)
					hit = true
				}
			}
		}
	}
	if hit {
		return errf(m, symtab.CUDAStreamCaptureImplicit, "the legacy default stream would synchronize with a capturing stream")
	}
	return nil
}

// captureOp records o as a node of st's capture; lock held.
func (g *GPU) captureOp(st *stream, o *op) error {
	c := st.cap
	if c.status == captureInvalidated {
		return errf(o.m, symtab.CUDAStreamCaptureInvalidated, "the capture on %v was invalidated", st.handle())
	}
	n := *o
	n.deps, n.uses, n.fromGraph = nil, nil, true
	c.graph.nodes = append(c.graph.nodes, &n)
	c.streams[st] = len(c.graph.nodes) - 1
	st.joinedTo = nil
	return nil
}

func (g *GPU) captureRecord(st *stream, ev *event) error {
	c := st.cap
	if c.status == captureInvalidated {
		return errf(symtab.EventRecord, symtab.CUDAStreamCaptureInvalidated, "the capture on %v was invalidated", st.handle())
	}
	ev.gen++
	ev.s, ev.seq, ev.timed = nil, 0, false
	ev.cap, ev.capStream, ev.capIdx = c, st, len(c.graph.nodes)
	return nil
}

func (g *GPU) captureWait(st *stream, ev *event) error {
	c := ev.cap
	switch {
	case c.status == captureInvalidated:
		g.invalidate(st.cap)
		return errf(symtab.StreamWaitEvent, symtab.CUDAStreamCaptureInvalidated, "the event's capture was invalidated")
	case st.cap == nil:
		// A fork: st joins the capture.
		st.cap = c
		c.streams[st] = -1
		st.joinedTo = nil
	case st.cap == c:
		src := ev.capStream
		if src != st && ev.capIdx > c.streams[src] {
			src.joinedTo = st
		}
	default:
		g.invalidate(st.cap)
		g.invalidate(c)
		return errf(symtab.StreamWaitEvent, symtab.CUDAStreamCaptureMerge, "cannot merge two independent captures")
	}
	return nil
}

// StreamBeginCapture starts capturing s. The legacy default stream cannot be
// captured.
func (g *GPU) StreamBeginCapture(s gpumem.Stream, mode gpumem.CaptureMode) error {
	if err := g.enter(symtab.StreamBeginCapture); err != nil {
		return err
	}
	if mode < gpumem.CaptureModeGlobal || mode > gpumem.CaptureModeRelaxed {
		return errf(symtab.StreamBeginCapture, symtab.CUDAInvalidValue, "bad capture mode %d", int(mode))
	}
	stk := g.callers(1)
	// As the real backends: the goroutine stays on its OS thread until it
	// ends a global or thread-local capture, which must end there.
	return g.pins.Begin(s.Handle, mode, func() error { return g.beginCapture(s, mode, stk) })
}

func (g *GPU) beginCapture(s gpumem.Stream, mode gpumem.CaptureMode, stk stack) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.lookupStream(symtab.StreamBeginCapture, s)
	if err != nil {
		return err
	}
	if st.legacy {
		return errf(symtab.StreamBeginCapture, symtab.CUDAStreamCaptureUnsupported, "the legacy default stream cannot be captured")
	}
	if st.cap != nil {
		return errf(symtab.StreamBeginCapture, symtab.CUDAInvalidValue, "%v is already capturing", s)
	}
	g.captureID++
	c := &capture{id: g.captureID, origin: st, mode: mode, streams: map[*stream]int{st: -1},
		graph: &graph{h: g.handle(), dev: st.dev, freed: map[*object]bool{}, uobjs: map[*userObject]uint32{}, stack: stk}}
	if mode != gpumem.CaptureModeRelaxed {
		c.tid = threadID()
	}
	g.captures[c.id] = c
	st.cap = c
	return nil
}

// StreamEndCapture ends the capture begun on s and returns its graph. A
// capture that was invalidated, or whose forked streams were not joined back
// into s, fails and yields no graph.
func (g *GPU) StreamEndCapture(s gpumem.Stream) (gpumem.Graph, error) {
	if err := g.enter(symtab.StreamEndCapture); err != nil {
		return gpumem.Graph{}, err
	}
	gr, err := g.endCapture(s)
	status := int32(0)
	var ve *gpumem.Error
	if errors.As(err, &ve) {
		status = int32(ve.Code)
	} else if err != nil {
		status = -1
	}
	g.pins.End(s.Handle, status)
	return gr, err
}

func (g *GPU) endCapture(s gpumem.Stream) (gpumem.Graph, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.lookupStream(symtab.StreamEndCapture, s)
	if err != nil {
		return gpumem.Graph{}, err
	}
	c := st.cap
	if c == nil {
		return gpumem.Graph{}, errf(symtab.StreamEndCapture, symtab.CUDAInvalidValue, "%v is not capturing", s)
	}
	if c.origin != st {
		g.invalidate(c)
		return gpumem.Graph{}, errf(symtab.StreamEndCapture, symtab.CUDAStreamCaptureUnmatched, "the capture was begun on another stream")
	}
	code := 0
	why := "capture on %v failed"
	if threadRule && c.mode != gpumem.CaptureModeRelaxed && threadID() != c.tid {
		// As CUDA 13 does: refused, and the capture is over, with no graph.
		code = symtab.CUDAStreamCaptureWrongThread
		why = "the capture of %v was begun in global or thread-local mode on another OS thread; it is dropped"
	} else if c.status == captureInvalidated {
		code = symtab.CUDAStreamCaptureInvalidated
	} else {
		for o, last := range c.streams {
			if o == st || last < 0 {
				continue
			}
			seen := map[*stream]bool{}
			x := o
			for x != nil && x != st && !seen[x] {
				seen[x] = true
				x = x.joinedTo
			}
			if x != st {
				code = symtab.CUDAStreamCaptureUnjoined
			}
		}
	}
	for o := range c.streams {
		o.cap = nil
		o.joinedTo = nil
	}
	c.status = captureEnded
	delete(g.captures, c.id)
	gr := c.graph
	if code != 0 {
		g.discardGraph(gr)
		return gpumem.Graph{}, errf(symtab.StreamEndCapture, code, why, s)
	}
	g.graphs[gr.h] = gr
	return gpumem.Graph{Handle: gr.h, Device: gr.dev.ord}, nil
}

// discardGraph drops a graph that never became visible.
func (g *GPU) discardGraph(gr *graph) {
	for _, o := range gr.allocs {
		g.releaseGraphAlloc(o)
	}
	gr.destroyed = true
}

// StreamCaptureInfo reports whether s is capturing, the capture's id and
// the graph being built.
func (g *GPU) StreamCaptureInfo(s gpumem.Stream) (gpumem.CaptureInfo, error) {
	if err := g.enter(symtab.StreamCaptureInfo); err != nil {
		return gpumem.CaptureInfo{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.lookupStream(symtab.StreamCaptureInfo, s)
	if err != nil {
		return gpumem.CaptureInfo{}, err
	}
	c := st.cap
	switch {
	case c == nil:
		return gpumem.CaptureInfo{Status: gpumem.CaptureNone}, nil
	case c.status == captureInvalidated:
		return gpumem.CaptureInfo{Status: gpumem.CaptureInvalidated, ID: c.id}, nil
	}
	return gpumem.CaptureInfo{Status: gpumem.CaptureActive, ID: c.id, Graph: gpumem.Graph{Handle: c.graph.h, Device: c.graph.dev.ord}}, nil
}

// captureAlloc makes a graph memory node: the address is fixed now, the
// memory is allocated when a launch reaches the node.
func (g *GPU) captureAlloc(m symtab.Op, p *pool, size, n uint64, st *stream) (gpumem.Ptr, error) {
	c := st.cap
	if c.status == captureInvalidated {
		return 0, errf(m, symtab.CUDAStreamCaptureInvalidated, "the capture on %v was invalidated", st.handle())
	}
	d := p.dev
	if n > d.cfg.Capacity {
		return 0, vendorErr(m, symtab.CUDAOutOfMemory)
	}
	start, ok := d.va.alloc(n)
	if !ok {
		return 0, vendorErr(m, symtab.CUDAOutOfMemory)
	}
	o := g.newObject(objGraphAlloc, start, n, size, d.ord, g.callers(2))
	o.graph = c.graph
	o.pool = p
	o.graphRefs = 1
	g.spans.insert(start, o)
	g.allocs[start] = o
	c.graph.allocs = append(c.graph.allocs, o)
	if err := g.captureOp(st, &op{kind: opGraphAlloc, m: m, obj: o}); err != nil {
		return 0, err
	}
	return gpumem.Ptr(start), nil
}

// freeGraphOrCaptured handles FreeAsync of a graph allocation, or any
// FreeAsync on a capturing stream (a graph free node).
func (g *GPU) freeGraphOrCaptured(st *stream, o *object) error {
	if st.cap != nil {
		if st.cap.status == captureInvalidated {
			return errf(symtab.FreeAsync, symtab.CUDAStreamCaptureInvalidated, "the capture on %v was invalidated", st.handle())
		}
		if o.kind == objGraphAlloc && o.graph == st.cap.graph {
			st.cap.graph.freed[o] = true
		} else {
			delete(g.allocs, o.start)
		}
		return g.captureOp(st, &op{kind: opGraphFree, m: symtab.FreeAsync, obj: o})
	}
	// A graph allocation freed outside its graph, after a launch.
	if !o.outstanding() {
		return errf(symtab.FreeAsync, symtab.CUDAInvalidValue, "%s is not allocated (launch its graph first)", o.describe())
	}
	o.owned = false
	return g.enqueue(st, &op{kind: opGraphFree, m: symtab.FreeAsync, obj: o})
}

func (o *object) outstanding() bool { return o.owned }

func (g *GPU) graphAllocRun(st *stream, o *op) {
	a := o.obj
	if a.live {
		g.violate(st, o, a.start, a.size, "%s allocated again while still allocated", a.describe())
		return
	}
	if !g.reserve(g.devs[a.dev], a.size) {
		g.violate(st, o, a.start, a.size, "out of memory allocating %s at graph launch", a.describe())
		return
	}
	a.live = true
}

func (g *GPU) graphFreeRun(st *stream, o *op) {
	a := o.obj
	switch a.kind {
	case objGraphAlloc:
		if !a.live {
			g.violate(st, o, a.start, a.size, "%s freed while not allocated", a.describe())
			return
		}
		a.live = false
		g.devs[a.dev].used -= a.size
		g.dropTags(a.start, a.size)
		if a.graphRefs == 0 && !a.owned {
			g.dropGraphAlloc(a)
		}
	case objPoolAlloc:
		if a.freed {
			g.violate(st, o, a.start, a.size, "graph frees %s, which is already free", a.describe())
			return
		}
		g.freePoolAlloc(a)
	}
}

func (g *GPU) releaseGraphAlloc(o *object) {
	o.graphRefs--
	if o.graphRefs <= 0 && !o.live && !o.owned {
		g.dropGraphAlloc(o)
	}
}

func (g *GPU) dropGraphAlloc(o *object) {
	if o.freed {
		return
	}
	o.freed = true
	g.spans.remove(o.start, o)
	if g.allocs[o.start] == o {
		delete(g.allocs, o.start)
	}
	d := g.devs[o.dev]
	d.store.drop(o.start, o.size)
	d.va.release(o.start, o.size)
}

func (g *GPU) lookupGraph(m symtab.Op, h gpumem.Graph) (*graph, error) {
	gr := g.graphs[h.Handle]
	if gr == nil || gr.dev.ord != h.Device {
		return nil, errf(m, symtab.CUDAInvalidValue, "graph(dev %d, %#x) is not a live graph", h.Device, h.Handle)
	}
	return gr, nil
}

// GraphInstantiate makes an executable graph. A graph with allocation nodes
// can have one instantiation at a time, as in CUDA.
func (g *GPU) GraphInstantiate(h gpumem.Graph) (gpumem.GraphExec, error) {
	if err := g.enter(symtab.GraphInstantiate); err != nil {
		return gpumem.GraphExec{}, err
	}
	stk := g.callers(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	gr, err := g.lookupGraph(symtab.GraphInstantiate, h)
	if err != nil {
		return gpumem.GraphExec{}, err
	}
	if len(gr.allocs) > 0 && gr.execs > 0 {
		return gpumem.GraphExec{}, errf(symtab.GraphInstantiate, symtab.CUDAInvalidValue, "a graph with allocation nodes may have only one instantiation at a time")
	}
	ge := &graphExec{h: g.handle(), gr: gr, nodes: gr.nodes, uobjs: map[*userObject]uint32{}, stack: stk}
	for uo, n := range gr.uobjs {
		ge.uobjs[uo] = n
		uo.refs += int64(n)
	}
	for _, o := range gr.allocs {
		o.graphRefs++
		if !gr.freed[o] {
			ge.allocNoFree = append(ge.allocNoFree, o)
		}
	}
	gr.execs++
	g.execs[ge.h] = ge
	return gpumem.GraphExec{Handle: ge.h, Device: gr.dev.ord}, nil
}

// GraphLaunch queues the graph's nodes on s. A graph whose allocation was
// not freed by the graph itself can be launched again only once that
// allocation has been freed.
func (g *GPU) GraphLaunch(h gpumem.GraphExec, s gpumem.Stream) error {
	if err := g.enter(symtab.GraphLaunch); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	ge := g.execs[h.Handle]
	if ge == nil || ge.gr.dev.ord != h.Device {
		return errf(symtab.GraphLaunch, symtab.CUDAInvalidValue, "graphexec(dev %d, %#x) is not a live executable graph", h.Device, h.Handle)
	}
	st, err := g.lookupStream(symtab.GraphLaunch, s)
	if err != nil {
		return err
	}
	for _, o := range ge.allocNoFree {
		if o.owned || o.live {
			return errf(symtab.GraphLaunch, symtab.CUDAInvalidValue, "%s from the previous launch has not been freed", o.describe())
		}
	}
	if st.cap != nil {
		for _, n := range ge.nodes {
			if err := g.captureOp(st, n); err != nil {
				return err
			}
		}
		return nil
	}
	if st.legacy {
		// The one refusal of an uncaptured stream, asked before the
		// launch changes anything (its first node's enqueue would
		// refuse it after the graph was marked in flight).
		if err := g.legacyCaptureCheck(symtab.GraphLaunch, st.dev); err != nil {
			return err
		}
	}
	for _, o := range ge.allocNoFree {
		o.owned = true
	}
	ge.inflight++
	for _, n := range ge.nodes {
		c := *n
		c.fromGraph = true
		c.dev = st.dev.ord
		if err := g.enqueue(st, &c); err != nil {
			return err
		}
	}
	return g.enqueue(st, &op{kind: opGraphEnd, m: symtab.GraphLaunch, ge: ge})
}

func (g *GPU) graphEndRun(ge *graphExec) {
	ge.inflight--
	if ge.destroyed && ge.inflight == 0 {
		fns := g.releaseExec(ge)
		if len(fns) > 0 {
			g.mu.Unlock()
			runAll(fns)
			g.mu.Lock()
		}
	}
}

// releaseExec drops an executable graph's references; it returns the user
// object destructors to run once the lock is released.
func (g *GPU) releaseExec(ge *graphExec) []func() {
	if ge.released {
		return nil
	}
	ge.released = true
	ge.gr.execs--
	for _, o := range ge.gr.allocs {
		g.releaseGraphAlloc(o)
	}
	var fns []func()
	for uo, n := range ge.uobjs {
		fns = g.dropRefs(uo, int64(n), fns)
	}
	return fns
}

func (g *GPU) dropRefs(uo *userObject, n int64, fns []func()) []func() {
	uo.refs -= n
	if uo.refs <= 0 {
		delete(g.uobjs, uo.h)
		fns = append(fns, uo.fn)
	}
	return fns
}

func runAll(fns []func()) {
	for _, f := range fns {
		_ = callSafely(f)
	}
}

// GraphExecDestroy destroys an executable graph; launches still queued
// complete first, and its user-object references are released after them.
func (g *GPU) GraphExecDestroy(h gpumem.GraphExec) error {
	if err := g.enter(symtab.GraphExecDestroy); err != nil {
		return err
	}
	g.mu.Lock()
	ge := g.execs[h.Handle]
	if ge == nil || ge.gr.dev.ord != h.Device {
		g.mu.Unlock()
		return errf(symtab.GraphExecDestroy, symtab.CUDAInvalidValue, "graphexec(dev %d, %#x) is not a live executable graph", h.Device, h.Handle)
	}
	delete(g.execs, ge.h)
	ge.destroyed = true
	var fns []func()
	if ge.inflight == 0 {
		fns = g.releaseExec(ge)
	}
	g.mu.Unlock()
	runAll(fns)
	return nil
}

// GraphDestroy destroys a graph and releases its user-object references.
// Executable graphs made from it stay valid.
func (g *GPU) GraphDestroy(h gpumem.Graph) error {
	if err := g.enter(symtab.GraphDestroy); err != nil {
		return err
	}
	g.mu.Lock()
	gr, err := g.lookupGraph(symtab.GraphDestroy, h)
	if err != nil {
		g.mu.Unlock()
		return err
	}
	delete(g.graphs, gr.h)
	gr.destroyed = true
	var fns []func()
	for uo, n := range gr.uobjs {
		fns = g.dropRefs(uo, int64(n), fns)
	}
	gr.uobjs = nil
	for _, o := range gr.allocs {
		g.releaseGraphAlloc(o)
	}
	g.mu.Unlock()
	runAll(fns)
	return nil
}

// UserObjectCreate makes a user object holding one reference; fn runs once
// the last reference is released (by UserObjectRelease, or by destroying the
// graphs and executable graphs that retained it), in the goroutine that
// released it, with no lock held.
func (g *GPU) UserObjectCreate(dev int, fn func()) (gpumem.UserObject, error) {
	if err := g.enter(symtab.UserObjectCreate); err != nil {
		return gpumem.UserObject{}, err
	}
	if _, err := g.device(symtab.UserObjectCreate, dev); err != nil {
		return gpumem.UserObject{}, err
	}
	if fn == nil {
		return gpumem.UserObject{}, errf(symtab.UserObjectCreate, symtab.CUDAInvalidValue, "nil destructor")
	}
	stk := g.callers(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	uo := &userObject{h: g.handle(), dev: dev, fn: fn, refs: 1, owned: 1, stack: stk}
	g.uobjs[uo.h] = uo
	return gpumem.UserObject{Handle: uo.h, Device: dev}, nil
}

func (g *GPU) lookupUserObject(m symtab.Op, o gpumem.UserObject) (*userObject, error) {
	uo := g.uobjs[o.Handle]
	if uo == nil || uo.dev != o.Device {
		return nil, errf(m, symtab.CUDAInvalidValue, "userobject(dev %d, %#x) is not a live user object", o.Device, o.Handle)
	}
	return uo, nil
}

// UserObjectRelease releases count of the caller's references.
func (g *GPU) UserObjectRelease(o gpumem.UserObject, count uint32) error {
	if err := g.enter(symtab.UserObjectRelease); err != nil {
		return err
	}
	if count == 0 {
		return errf(symtab.UserObjectRelease, symtab.CUDAInvalidValue, "count 0")
	}
	g.mu.Lock()
	uo, err := g.lookupUserObject(symtab.UserObjectRelease, o)
	if err != nil {
		g.mu.Unlock()
		return err
	}
	if int64(count) > uo.owned {
		g.mu.Unlock()
		return errf(symtab.UserObjectRelease, symtab.CUDAInvalidValue, "releasing %d references where the caller holds %d (graphs hold the other %d)", count, uo.owned, uo.refs-uo.owned)
	}
	uo.owned -= int64(count)
	fns := g.dropRefs(uo, int64(count), nil)
	g.mu.Unlock()
	runAll(fns)
	return nil
}

// GraphRetainUserObject gives the graph count references to o; with move
// they are taken from the caller's references.
func (g *GPU) GraphRetainUserObject(h gpumem.Graph, o gpumem.UserObject, count uint32, move bool) error {
	if err := g.enter(symtab.GraphRetainUserObject); err != nil {
		return err
	}
	if count == 0 {
		return errf(symtab.GraphRetainUserObject, symtab.CUDAInvalidValue, "count 0")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	gr, err := g.lookupGraph(symtab.GraphRetainUserObject, h)
	if err != nil {
		return err
	}
	uo, err := g.lookupUserObject(symtab.GraphRetainUserObject, o)
	if err != nil {
		return err
	}
	if uint64(gr.uobjs[uo])+uint64(count) > math.MaxUint32 {
		return errf(symtab.GraphRetainUserObject, symtab.CUDAInvalidValue, "the graph would hold more than %d references", uint32(math.MaxUint32))
	}
	if move {
		if int64(count) > uo.owned {
			return errf(symtab.GraphRetainUserObject, symtab.CUDAInvalidValue, "moving %d references where the caller holds %d", count, uo.owned)
		}
		uo.owned -= int64(count)
	} else {
		uo.refs += int64(count)
	}
	gr.uobjs[uo] += count
	return nil
}

// GuardedCalls reports that the simulator makes guarded calls (it implements
// the optional interface that the asyncpool allocator uses to ask a stream's
// capture status and allocate or free in one backend call).
func (g *GPU) GuardedCalls() bool { return true }

// CapturesOpen reports whether a capture is open on any stream of the
// simulator (the vendor backends answer for the captures begun through
// them; the simulator sees every capture).
func (g *GPU) CapturesOpen() bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.captures) != 0
}

// MallocFromPoolAsyncUncaptured is MallocFromPoolAsync made only if s is not
// being captured; a capturing stream gets its status back and nothing is
// allocated. Faults injected into StreamCaptureInfo or MallocFromPoolAsync
// apply to it.
func (g *GPU) MallocFromPoolAsyncUncaptured(size uint64, mp gpumem.MemPool, s gpumem.Stream) (gpumem.Ptr, gpumem.CaptureStatus, error) {
	if g == nil {
		return 0, 0, errNil("MallocFromPoolAsyncUncaptured")
	}
	ci, err := g.StreamCaptureInfo(s)
	if err != nil || ci.Status != gpumem.CaptureNone {
		return 0, ci.Status, err
	}
	p, err := g.MallocFromPoolAsync(size, mp, s)
	return p, gpumem.CaptureNone, err
}

// FreeAsyncUncaptured is FreeAsync made only if s is not being captured, as
// MallocFromPoolAsyncUncaptured.
func (g *GPU) FreeAsyncUncaptured(p gpumem.Ptr, s gpumem.Stream) (gpumem.CaptureStatus, error) {
	if g == nil {
		return 0, errNil("FreeAsyncUncaptured")
	}
	ci, err := g.StreamCaptureInfo(s)
	if err != nil || ci.Status != gpumem.CaptureNone {
		return ci.Status, err
	}
	return gpumem.CaptureNone, g.FreeAsync(p, s)
}
