package sim

import (
	"fmt"
	"slices"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// This file is the hook collective libraries written in Go (package
// collective's simulator engine) run on: a Rendezvous is work that several
// streams of one GPU do together, as the kernels of an NCCL collective do.
// Each participant queues its part on its own stream (QueueRendezvous); the
// op of a part runs when every participant has queued its part and every
// participant's stream has finished the work queued before its part (and
// whatever that part's op waits for: the legacy stream's rules, event waits
// before it). The first op of the rendezvous to run calls Run once, with
// one KernelCall per participant to touch its memory as its device; the
// other participants' ops wait for Run to finish, and no participant's
// stream moves past the rendezvous before that. Nothing in engine.go
// changes: an op's readiness is its dependencies on other streams' counts,
// and until the last part arrives each op also waits on a gate, a stream
// of no work whose count is raised when its op can be ordered.
//
// One op may hold parts of several rendezvous (the calls of a group, fused
// as NCCL fuses them): it runs when all of them can, so that a ring of sends
// and receives, each waiting for its neighbour, completes.

// Rendezvous is stream-ordered work shared by N participants on streams of
// one GPU. Make it with NewRendezvous, queue each participant's part with
// QueueRendezvous.
type Rendezvous struct {
	g     *GPU
	name  string
	run   func(ranks []*KernelCall)
	parts []*rvOp // by participant, nil until queued
	n     int     // parts queued
	state rvState
	done  chan struct{} // closed when Run returned, or at Abort
}

type rvState uint8

const (
	rvWaiting rvState = iota
	rvRunning
	rvDone
	rvAborted
)

// rvOp is one queued op holding parts of one or more rendezvous.
type rvOp struct {
	st     *stream
	o      *op
	before uint64  // st's count of ops queued before o
	base   []dep   // o's own dependencies, without the gate
	gate   *stream // a stream of no work; done 1 once o is ordered
	rvs    []*Rendezvous
	final  bool
}

// RendezvousPart is one participant's share of a rendezvous: its index
// (0 to N-1) and the memory its part reads or writes, which the
// use-after-free detector checks as it checks a kernel's arguments.
type RendezvousPart struct {
	R     *Rendezvous
	Index int
	Mem   []MemRange
}

// MemRange is a range of device memory [Ptr, Ptr+Size).
type MemRange struct {
	Ptr  gpumem.Ptr
	Size uint64
}

// NewRendezvous makes a rendezvous of n participants (1 to 1024) named name
// (errors and violations name it as they name a kernel). run is called
// once, from the op of whichever part runs first, with no lock held, with
// ranks[i] the KernelCall of participant i: its device, its stream, and
// Read, Write, Load and Store checked as a kernel's are. A fault there (an
// access outside live memory, or a panic) becomes the sticky error of
// every participant's device.
func (g *GPU) NewRendezvous(name string, n int, run func(ranks []*KernelCall)) (*Rendezvous, error) {
	if g == nil {
		return nil, errNil("NewRendezvous")
	}
	if n < 1 || n > 1024 || run == nil {
		return nil, fmt.Errorf("sim: NewRendezvous %q: %d participants (1 to 1024), run set %v: %w", name, n, run != nil, gpumem.ErrInvalidValue)
	}
	return &Rendezvous{g: g, name: name, run: run, parts: make([]*rvOp, n), done: make(chan struct{})}, nil
}

// QueueRendezvous queues on s one op that is the given parts of
// rendezvous of this GPU (a group's calls; one op may be two participants
// of one rendezvous, a rank sending to itself). It is counted and fault-injectable as "LaunchKernel", fails once
// a kernel of the device has faulted (its sticky error), and fails, as
// ErrNotSupported, on a capturing stream: the simulator does not capture
// rendezvous into graphs. A part of a rendezvous that was aborted, or whose
// index was queued already, is an error matching ErrInvalidValue (aborted:
// ErrClosed), and nothing is queued.
func (g *GPU) QueueRendezvous(s gpumem.Stream, parts ...RendezvousPart) error {
	if g == nil {
		return errNil("QueueRendezvous")
	}
	const m = symtab.LaunchKernel
	if err := g.enter(m); err != nil {
		return err
	}
	if len(parts) == 0 {
		return errf(m, symtab.CUDAInvalidValue, "QueueRendezvous with no parts")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.lookupStream(m, s)
	if err != nil {
		return err
	}
	if st.cap != nil {
		return &gpumem.NotSupportedError{Backend: "sim", Op: "QueueRendezvous", Reason: fmt.Sprintf("%v is capturing; the simulator does not capture collectives", s)}
	}
	if err := g.stickyErr(m, st.dev); err != nil {
		return err
	}
	var uses []use
	type slot struct {
		r *Rendezvous
		i int
	}
	seen := map[slot]bool{}
	for _, p := range parts {
		r := p.R
		switch {
		case r == nil || r.g != g:
			return errf(m, symtab.CUDAInvalidValue, "a rendezvous part of another GPU, or none")
		case p.Index < 0 || p.Index >= len(r.parts):
			return errf(m, symtab.CUDAInvalidValue, "%s: participant %d of %d", r.name, p.Index, len(r.parts))
		case r.state == rvAborted:
			return fmt.Errorf("sim: %s: the rendezvous was aborted: %w", r.name, gpumem.ErrClosed)
		case r.parts[p.Index] != nil || seen[slot{r, p.Index}]:
			return errf(m, symtab.CUDAInvalidValue, "%s: participant %d queued twice", r.name, p.Index)
		}
		seen[slot{r, p.Index}] = true
		for _, mr := range p.Mem {
			u, err := g.resolve(m, uint64(mr.Ptr), mr.Size, st.dev.ord, true)
			if err != nil {
				return fmt.Errorf("sim: %s, participant %d: %w", r.name, p.Index, err)
			}
			uses = append(uses, u...)
		}
	}
	ro := &rvOp{st: st, gate: &stream{g: g, dev: st.dev}}
	o := &op{kind: opHost, m: m, uses: uses, dev: st.dev.ord, deps: []dep{{ro.gate, 1}}}
	o.fn = func() { g.runRendezvousOp(ro) }
	ro.o = o
	if err := g.enqueue(st, o); err != nil {
		return err
	}
	ro.before = st.enq - 1
	ro.base = append([]dep(nil), o.deps[1:]...)
	for _, p := range parts {
		if p.R.parts[p.Index] = ro; !slices.Contains(ro.rvs, p.R) {
			ro.rvs = append(ro.rvs, p.R)
		}
		p.R.n++
	}
	// This op, and every op that shares a rendezvous with it, may now be
	// orderable.
	g.orderRendezvousOp(ro)
	for _, r := range ro.rvs {
		for _, other := range r.parts {
			if other != nil && other != ro {
				g.orderRendezvousOp(other)
			}
		}
	}
	return nil
}

// orderRendezvousOp gives ro its dependencies once every rendezvous it
// holds a part of has all its parts: its own, and for every other op of
// those rendezvous, that op's stream reaching it and that op's own
// dependencies. Lock held.
func (g *GPU) orderRendezvousOp(ro *rvOp) {
	if ro.final {
		return
	}
	deps := append([]dep(nil), ro.base...)
	for _, r := range ro.rvs {
		if r.state == rvAborted {
			continue
		}
		if r.n < len(r.parts) {
			return
		}
		for _, other := range r.parts {
			if other == ro {
				continue
			}
			deps = append(deps, dep{other.st, other.before})
			deps = append(deps, other.base...)
		}
	}
	g.openGate(ro, deps)
}

// openGate sets ro's dependencies and opens its gate; lock held.
func (g *GPU) openGate(ro *rvOp, deps []dep) {
	ro.final = true
	ro.o.deps = deps
	ro.gate.done = 1
	g.cond.Broadcast()
}

// runRendezvousOp is the op of ro running: it runs the rendezvous no other
// op has started and waits for those another op is running. No lock held.
func (g *GPU) runRendezvousOp(ro *rvOp) {
	g.mu.Lock()
	g.check(ro.st, ro.o)
	var mine []*Rendezvous
	var wait []chan struct{}
	for _, r := range ro.rvs {
		switch r.state {
		case rvWaiting:
			r.state = rvRunning
			mine = append(mine, r)
		case rvRunning:
			wait = append(wait, r.done)
		}
	}
	g.mu.Unlock()
	for _, r := range mine {
		r.execute()
	}
	for _, ch := range wait {
		<-ch
	}
}

// execute calls Run with a KernelCall per participant and records a fault
// on every participant's device. No lock held.
func (r *Rendezvous) execute() {
	g := r.g
	calls := make([]*KernelCall, len(r.parts))
	for i, p := range r.parts {
		kc := &KernelCall{Name: r.name, g: g, st: p.st, o: p.o, dev: p.st.dev.ord, nthreads: 1, nblocks: 1}
		kc.wins = kc.winBuf[:0]
		calls[i] = kc
	}
	f := runRendezvous(r.run, calls)
	g.mu.Lock()
	if f != nil {
		for _, p := range r.parts {
			g.kernelFailed(p.st, p.o, f)
		}
	}
	r.state = rvDone
	close(r.done)
	g.mu.Unlock()
}

// runRendezvous calls run, turning a fault or a panic into a kernelFault.
func runRendezvous(run func([]*KernelCall), calls []*KernelCall) (f *kernelFault) {
	defer func() {
		if x := recover(); x != nil {
			if kf, ok := x.(*kernelFault); ok {
				f = kf
				return
			}
			f = &kernelFault{code: symtab.CUDAUnknown, msg: fmt.Sprintf("%s panicked: %v", calls[0].Name, x)}
		}
	}()
	run(calls)
	for _, c := range calls {
		if c.fault != nil {
			return c.fault
		}
	}
	return nil
}

// Abort ends a rendezvous that has not started running: Run is never
// called, and the ops of the parts queued so far complete without waiting
// for the others (NCCL's ncclCommAbort releases work stuck on a peer).
// Parts queued after Abort are refused. It reports whether it aborted; a
// rendezvous already running or done is left alone.
func (r *Rendezvous) Abort() bool {
	g := r.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if r.state != rvWaiting {
		return false
	}
	r.state = rvAborted
	close(r.done)
	for _, ro := range r.parts {
		if ro != nil {
			ro.final = false
			g.orderRendezvousOp(ro)
		}
	}
	return true
}

// Done reports whether the rendezvous has run (or was aborted).
func (r *Rendezvous) Done() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}
