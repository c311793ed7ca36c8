package sim

import (
	"fmt"
	"time"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// This file is the execution engine (see doc.go for an overview). Every stream has a FIFO queue of ops
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
	opKernel                   // Launch or LaunchKernel
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
	k         *kernelLaunch // LaunchKernel: a Go kernel
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
		if o.k != nil {
			g.runGoKernel(st, o)
		} else {
			g.runKernel(st, o)
		}
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
	if g == nil {
		return false
	}
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
	if g == nil {
		return errNil("Drain")
	}
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
