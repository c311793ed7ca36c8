package collective

import (
	"crypto/rand"
	"errors"
	"fmt"
	"sync"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

// The simulator's engine: collectives across the devices of one simulated
// GPU, in Go. Every call of a rank is one part of a sim.Rendezvous queued
// on the rank's stream: it runs once every rank has queued its part and
// every rank's stream has reached it, so that work queued before a
// collective on a rank's stream is seen by it and work queued after sees
// its result, as on a GPU. The ranks' k-th collectives meet in one
// rendezvous; a send and the matching receive (the k-th from one rank to
// another) meet in a rendezvous of two. A group's calls on one rank and
// stream are one op (NCCL fuses them), so sends and receives of a ring
// complete together. Calls that do not match (a different collective,
// count, type, reduction or root on two ranks) fail, and abort the
// rendezvous so that no rank waits forever; the communicator's AsyncError
// then reports it.

// simEngine is the engine of one simulated GPU: a value made per call
// (nothing about a GPU is kept once its communicators are gone).
type simEngine struct {
	g *sim.GPU
}

// simGroups are the open groups, by OS thread, of every simulated GPU.
var simGroups struct {
	mu sync.Mutex
	m  map[int]*simGroup
}

type simGroup struct {
	depth int
	calls []groupCall
}

type groupCall struct {
	c *simComm
	k call
}

func simEngineOf(g *sim.GPU) *simEngine { return &simEngine{g: g} }

// simMagic starts every id the simulator makes.
const simMagic = "gpumem-sim-nccl\x00"

// pending cliques of InitRank, by id, and the ids done with: an id makes
// one communicator, so a rank that joins one whose ranks have all joined,
// or whose joining failed, fails at once instead of waiting for ranks that
// will never come.
var pendingCliques struct {
	mu   sync.Mutex
	m    map[UniqueID]*clique
	done map[UniqueID]error
}

// retire marks id done with, its clique's failure err (nil: made);
// pendingCliques.mu held.
func retire(id *UniqueID, err error) {
	delete(pendingCliques.m, *id)
	if pendingCliques.done == nil {
		pendingCliques.done = map[UniqueID]error{}
	}
	if err == nil {
		err = fmt.Errorf("its communicator is made already: %w", gpumem.ErrInvalidValue)
	}
	pendingCliques.done[*id] = err
}

func (e *simEngine) uniqueID() (UniqueID, error) {
	var id UniqueID
	copy(id[:], simMagic)
	if _, err := rand.Read(id[len(simMagic):]); err != nil {
		return UniqueID{}, err
	}
	return id, nil
}

// clique is the ranks of one communicator.
type clique struct {
	e     *simEngine
	n     int
	mu    sync.Mutex
	devs  []int // by rank; -1 until joined
	seq   []uint64
	units map[uint64]*unit
	sends map[[2]int]uint64 // (from, to) -> sends issued
	recvs map[[2]int]uint64 // (from, to) -> receives issued
	p2p   map[[3]uint64]*unit
	err   error // the first failure: AsyncError
	ready chan struct{}
	left  int // ranks still to join (InitRank)
}

func newClique(e *simEngine, n int) *clique {
	cl := &clique{e: e, n: n, devs: make([]int, n), seq: make([]uint64, n), units: map[uint64]*unit{},
		sends: map[[2]int]uint64{}, recvs: map[[2]int]uint64{}, p2p: map[[3]uint64]*unit{}, ready: make(chan struct{}), left: n}
	for i := range cl.devs {
		cl.devs[i] = -1
	}
	return cl
}

func (e *simEngine) initAll(devs []int) ([]commEngine, error) {
	cl := newClique(e, len(devs))
	copy(cl.devs, devs)
	cl.left = 0
	close(cl.ready)
	ces := make([]commEngine, len(devs))
	for i, d := range devs {
		ces[i] = &simComm{cl: cl, rank: i, dev: d}
	}
	return ces, nil
}

func (e *simEngine) initRank(dev, nranks int, id *UniqueID, rank int) (commEngine, error) {
	if string(id[:len(simMagic)]) != simMagic {
		return nil, fmt.Errorf("collective: InitRank: the id was not made by the simulator's NewUniqueID: %w", gpumem.ErrInvalidValue)
	}
	pendingCliques.mu.Lock()
	if pendingCliques.m == nil {
		pendingCliques.m = map[UniqueID]*clique{}
	}
	if err, ok := pendingCliques.done[*id]; ok {
		pendingCliques.mu.Unlock()
		return nil, fmt.Errorf("collective: InitRank rank %d: the id is used: %w", rank, err)
	}
	cl := pendingCliques.m[*id]
	if cl == nil {
		cl = newClique(e, nranks)
		pendingCliques.m[*id] = cl
	}
	cl.mu.Lock()
	var err error
	switch {
	case cl.e.g != e.g:
		err = fmt.Errorf("collective: InitRank: the id's other ranks are on another simulated GPU: %w", gpumem.ErrInvalidValue)
	case cl.n != nranks:
		err = fmt.Errorf("collective: InitRank: %d ranks, but another rank said %d: %w", nranks, cl.n, gpumem.ErrInvalidValue)
	case cl.devs[rank] >= 0:
		err = fmt.Errorf("collective: InitRank: rank %d joined twice: %w", rank, gpumem.ErrInvalidValue)
	default:
		for r, d := range cl.devs {
			if d == dev {
				err = fmt.Errorf("collective: InitRank: device %d has rank %d already (one rank per device): %w", dev, r, gpumem.ErrInvalidValue)
			}
		}
	}
	if err != nil {
		// The other ranks would wait for this one for ever: fail them too.
		if cl.err == nil && cl.left > 0 {
			cl.err = err
			retire(id, err)
			close(cl.ready)
		}
		cl.mu.Unlock()
		pendingCliques.mu.Unlock()
		return nil, err
	}
	cl.devs[rank] = dev
	cl.left--
	if cl.left == 0 {
		retire(id, nil)
		close(cl.ready)
	}
	cl.mu.Unlock()
	pendingCliques.mu.Unlock()
	<-cl.ready
	cl.mu.Lock()
	err = cl.err
	cl.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("collective: InitRank rank %d: another rank failed: %w", rank, err)
	}
	return &simComm{cl: cl, rank: rank, dev: dev}, nil
}

func (e *simEngine) group(fn func() error) error {
	tid := threadID()
	simGroups.mu.Lock()
	if simGroups.m == nil {
		simGroups.m = map[int]*simGroup{}
	}
	grp := simGroups.m[tid]
	if grp == nil {
		grp = &simGroup{}
		simGroups.m[tid] = grp
	}
	grp.depth++
	simGroups.mu.Unlock()
	end := func() error {
		simGroups.mu.Lock()
		grp.depth--
		var calls []groupCall
		if grp.depth == 0 {
			calls = grp.calls
			delete(simGroups.m, tid)
		}
		simGroups.mu.Unlock()
		if calls == nil {
			return nil
		}
		return flush(calls)
	}
	ended := false
	defer func() {
		if !ended { // fn panicked: the group still ends (its calls are issued), then the panic goes on
			_ = end()
		}
	}()
	ferr := fn()
	ended = true
	return errors.Join(ferr, end())
}

// flush queues a group's calls: for each rank and stream, in the order of
// their first call, one op of all its parts.
func flush(calls []groupCall) error {
	type key struct {
		c *simComm
		s gpumem.Stream
	}
	var order []key
	byKey := map[key][]*call{}
	for i := range calls {
		gc := &calls[i]
		k := key{gc.c, gc.k.s}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], &gc.k)
	}
	var errs []error
	for _, k := range order {
		var parts []sim.RendezvousPart
		var units []*unit
		for _, kc := range byKey[k] {
			p, u, err := k.c.prepare(kc)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			parts = append(parts, p)
			units = append(units, u)
		}
		if len(parts) == 0 {
			continue
		}
		if err := k.c.cl.e.g.QueueRendezvous(k.s, parts...); err != nil {
			k.c.fail(units, err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// simComm is one rank.
type simComm struct {
	cl      *clique
	rank    int
	dev     int
	nextReg uintptr
}

// unit is the rendezvous of one collective, or of one send and its
// receive.
type unit struct {
	desc  call
	r     *sim.Rendezvous
	parts []*call // by participant
}

func (c *simComm) do(k *call) error {
	e := c.cl.e
	simGroups.mu.Lock()
	if grp := simGroups.m[threadID()]; grp != nil {
		grp.calls = append(grp.calls, groupCall{c, *k})
		simGroups.mu.Unlock()
		return nil
	}
	simGroups.mu.Unlock()
	p, u, err := c.prepare(k)
	if err != nil {
		return err
	}
	if err := e.g.QueueRendezvous(k.s, p); err != nil {
		c.fail([]*unit{u}, err)
		return err
	}
	return nil
}

// fail aborts units a rank could not queue its part of, and records the
// failure for AsyncError.
func (c *simComm) fail(units []*unit, err error) {
	for _, u := range units {
		u.r.Abort()
	}
	c.cl.mu.Lock()
	if c.cl.err == nil {
		c.cl.err = fmt.Errorf("rank %d: %w", c.rank, err)
	}
	c.cl.mu.Unlock()
}

// prepare finds (or makes) the unit of k and returns this rank's part.
func (c *simComm) prepare(k *call) (sim.RendezvousPart, *unit, error) {
	cl := c.cl
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.err != nil {
		return sim.RendezvousPart{}, nil, fmt.Errorf("collective: %s: the communicator failed: %w", k.kind, errors.Join(gpumem.ErrClosed, cl.err))
	}
	switch k.kind {
	case kAllReduce, kReduce, kReduceScatter:
		if err := reducible(k.dt); err != nil {
			// Refused here, the call is still this rank's part of a
			// collective the others may have queued: their unit is
			// aborted and the communicator failed, as for a mismatch,
			// so that no rank waits for ever.
			seq := cl.seq[c.rank]
			cl.seq[c.rank]++
			if u := cl.units[seq]; u != nil {
				u.r.Abort()
				delete(cl.units, seq)
			}
			err = fmt.Errorf("collective: %s: %w", k.kind, err)
			if cl.err == nil {
				cl.err = fmt.Errorf("rank %d: %w", c.rank, err)
			}
			return sim.RendezvousPart{}, nil, err
		}
	}
	var u *unit
	idx := c.rank
	var err error
	switch k.kind {
	case kSend, kRecv:
		from, to := c.rank, k.peer
		ctr := cl.sends
		idx = 0
		if k.kind == kRecv {
			from, to, ctr, idx = k.peer, c.rank, cl.recvs, 1
		}
		pair := [2]int{from, to}
		key := [3]uint64{uint64(from), uint64(to), ctr[pair]}
		ctr[pair]++
		u, err = unitFor(cl, cl.p2p, key, k, 2)
		if err == nil {
			u.parts[idx] = k
			if u.parts[0] != nil && u.parts[1] != nil {
				delete(cl.p2p, key)
			}
		}
	default:
		seq := cl.seq[c.rank]
		cl.seq[c.rank]++
		u, err = unitFor(cl, cl.units, seq, k, cl.n)
		if err == nil {
			u.parts[c.rank] = k
			if !missing(u.parts) {
				delete(cl.units, seq)
			}
		}
	}
	if err != nil {
		return sim.RendezvousPart{}, nil, err
	}
	var mem []sim.MemRange
	if k.sendBytes > 0 {
		mem = append(mem, sim.MemRange{Ptr: k.send, Size: k.sendBytes})
	}
	if k.recvBytes > 0 {
		mem = append(mem, sim.MemRange{Ptr: k.recv, Size: k.recvBytes})
	}
	return sim.RendezvousPart{R: u.r, Index: idx, Mem: mem}, u, nil
}

// missing reports whether a part has not arrived.
func missing(parts []*call) bool {
	for _, p := range parts {
		if p == nil {
			return true
		}
	}
	return false
}

// unitFor returns the unit of key in m, made for k when it is the first
// call there, after checking that k matches the calls already there; a
// mismatch aborts the unit and fails the communicator. cl.mu held.
func unitFor[K comparable](cl *clique, m map[K]*unit, key K, k *call, n int) (*unit, error) {
	u := m[key]
	if u == nil {
		u = &unit{desc: *k, parts: make([]*call, n)}
		r, err := cl.e.g.NewRendezvous("nccl"+k.kind.String(), n, u.run)
		if err != nil {
			return nil, err
		}
		u.r = r
		m[key] = u
		return u, nil
	}
	if err := u.matches(k); err != nil {
		u.r.Abort()
		cl.err = err
		return nil, err
	}
	return u, nil
}

// matches checks that k is the same call as the unit's first.
func (u *unit) matches(k *call) error {
	d := &u.desc
	p2p := func(x kind) bool { return x == kSend || x == kRecv }
	same := d.kind == k.kind || (p2p(d.kind) && p2p(k.kind) && d.kind != k.kind)
	if same && (p2p(k.kind) || (d.op == k.op && d.peer == k.peer)) && d.count == k.count && d.dt == k.dt {
		return nil
	}
	return fmt.Errorf("collective: mismatched calls across ranks: %s of %d %v (op %v, root %d) met %s of %d %v (op %v, root %d): %w",
		d.kind, d.count, d.dt, d.op, d.peer, k.kind, k.count, k.dt, k.op, k.peer, gpumem.ErrInvalidValue)
}

// run does the unit's transfer once every part has arrived, touching each
// rank's memory through that rank's KernelCall: every input is read before
// any output is written, so in-place calls are exact.
func (u *unit) run(ranks []*sim.KernelCall) {
	d := &u.desc
	size := uint64(d.dt.Size())
	bytes := d.count * size
	read := func(r int, p gpumem.Ptr, n uint64) []byte {
		b := make([]byte, n)
		if n > 0 {
			ranks[r].Read(p, b)
		}
		return b
	}
	write := func(r int, p gpumem.Ptr, b []byte) {
		if len(b) > 0 {
			ranks[r].Write(p, b)
		}
	}
	n := len(ranks)
	switch d.kind {
	case kSend, kRecv:
		send, recv := u.parts[0], u.parts[1]
		write(1, recv.recv, read(0, send.send, bytes))
	case kAllReduce:
		ins := make([][]byte, n)
		for r := range ins {
			ins[r] = read(r, u.parts[r].send, bytes)
		}
		out := reduce(d.dt, d.op, ins)
		for r := range n {
			write(r, u.parts[r].recv, out)
		}
	case kReduce:
		ins := make([][]byte, n)
		for r := range ins {
			ins[r] = read(r, u.parts[r].send, bytes)
		}
		write(d.peer, u.parts[d.peer].recv, reduce(d.dt, d.op, ins))
	case kBroadcast:
		data := read(d.peer, u.parts[d.peer].send, bytes)
		for r := range n {
			write(r, u.parts[r].recv, data)
		}
	case kAllGather:
		all := make([]byte, 0, uint64(n)*bytes)
		for r := range n {
			all = append(all, read(r, u.parts[r].send, bytes)...)
		}
		for r := range n {
			write(r, u.parts[r].recv, all)
		}
	case kReduceScatter:
		ins := make([][]byte, n)
		for r := range ins {
			ins[r] = read(r, u.parts[r].send, uint64(n)*bytes)
		}
		out := reduce(d.dt, d.op, ins)
		for r := range n {
			write(r, u.parts[r].recv, out[uint64(r)*bytes:uint64(r+1)*bytes])
		}
	}
}

func (c *simComm) asyncError() error {
	c.cl.mu.Lock()
	defer c.cl.mu.Unlock()
	if c.cl.err != nil {
		return fmt.Errorf("collective: sim comm rank %d: %w", c.rank, c.cl.err)
	}
	return nil
}

// abort aborts every rendezvous of the communicator that has not run, and
// fails the communicator for the other ranks.
func (c *simComm) abort() error {
	cl := c.cl
	cl.mu.Lock()
	units := make([]*unit, 0, len(cl.units)+len(cl.p2p))
	for _, u := range cl.units {
		units = append(units, u)
	}
	for _, u := range cl.p2p {
		units = append(units, u)
	}
	if cl.err == nil {
		cl.err = fmt.Errorf("rank %d aborted the communicator: %w", c.rank, gpumem.ErrClosed)
	}
	cl.mu.Unlock()
	for _, u := range units {
		u.r.Abort()
	}
	return nil
}

func (c *simComm) destroy() error  { return nil }
func (c *simComm) finalize() error { return nil }

// register accepts any range: the simulator's transfers need no
// registration.
func (c *simComm) register(p gpumem.Ptr, size uint64) (uintptr, error) {
	c.nextReg++
	return c.nextReg, nil
}

func (c *simComm) deregister(h uintptr) error { return nil }
