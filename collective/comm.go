package collective

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/gpumem/gpumem"
)

// kind is a communication call.
type kind uint8

const (
	kAllReduce kind = iota
	kBroadcast
	kReduce
	kAllGather
	kReduceScatter
	kSend
	kRecv
)

var kindNames = [...]string{"AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter", "Send", "Recv"}

func (k kind) String() string { return kindNames[k] }

// call is one communication call as a Comm checked it.
type call struct {
	kind       kind
	send, recv gpumem.Ptr
	count      uint64 // the count argument: sendcount of AllGather, recvcount of ReduceScatter
	dt         DataType
	op         Op
	peer       int // the root, or the peer of Send and Recv
	s          gpumem.Stream
	// sendBytes and recvBytes are the sizes of the buffers the call reads
	// and writes on this rank (0 where it touches none).
	sendBytes, recvBytes uint64
}

// commEngine is a communicator as an engine holds it: the native one
// (NCCL, RCCL) or the simulator's.
type commEngine interface {
	do(c *call) error
	asyncError() error
	abort() error
	destroy() error
	finalize() error
	register(p gpumem.Ptr, size uint64) (uintptr, error)
	deregister(h uintptr) error
}

// Comm is one rank of a communicator: a device of a backend that takes
// part in collectives with the communicator's other ranks. Its methods are
// safe for concurrent use. Calls into the library are serialised (NCCL's
// communicators are not thread-safe), except AsyncError and Abort, which
// NCCL allows beside a call in progress: a goroutine watching AsyncError
// may Abort a communicator whose call is stuck waiting for a rank that
// failed. The order of collectives on a communicator must be the same on
// every rank, as NCCL requires.
type Comm struct {
	mu                sync.Mutex   // serialises calls into the library; guards regs
	life              sync.RWMutex // shared by every call, exclusive for Close
	query             sync.RWMutex // shared by AsyncError, exclusive for Abort
	closed            atomic.Bool  // Close or Abort began: no new calls
	freed             atomic.Bool  // Abort or Close's destroy began: the library's communicator is gone
	e                 commEngine
	backend           string
	nranks, rank, dev int
	regs              map[*Registration]struct{}
}

// Count is the number of ranks of the communicator (0 for a nil *Comm).
func (c *Comm) Count() int {
	if c == nil {
		return 0
	}
	return c.nranks
}

// Rank is this communicator's rank, 0 to Count()-1 (-1 for a nil *Comm).
func (c *Comm) Rank() int {
	if c == nil {
		return -1
	}
	return c.rank
}

// Device is the ordinal of the device of this rank (-1 for a nil *Comm).
func (c *Comm) Device() int {
	if c == nil {
		return -1
	}
	return c.dev
}

// String describes the rank.
func (c *Comm) String() string {
	if c == nil {
		return "nil comm"
	}
	return fmt.Sprintf("%s comm rank %d of %d on device %d", c.backend, c.rank, c.nranks, c.dev)
}

func newComm(e commEngine, backend string, nranks, rank, dev int) *Comm {
	return &Comm{e: e, backend: backend, nranks: nranks, rank: rank, dev: dev}
}

// AllReduce reduces count elements of send over every rank with op and
// leaves the result in recv of every rank. send == recv is in place.
func (c *Comm) AllReduce(send, recv gpumem.Ptr, count int, dt DataType, op Op, s gpumem.Stream) error {
	return c.issue(&call{kind: kAllReduce, send: send, recv: recv, dt: dt, op: op, s: s}, count)
}

// Broadcast copies count elements of root's send into recv of every rank;
// send is read on root only. send == recv is in place.
func (c *Comm) Broadcast(send, recv gpumem.Ptr, count int, dt DataType, root int, s gpumem.Stream) error {
	return c.issue(&call{kind: kBroadcast, send: send, recv: recv, dt: dt, peer: root, s: s}, count)
}

// Reduce reduces count elements of send over every rank with op into recv
// of root; recv is written on root only (others may pass 0).
func (c *Comm) Reduce(send, recv gpumem.Ptr, count int, dt DataType, op Op, root int, s gpumem.Stream) error {
	return c.issue(&call{kind: kReduce, send: send, recv: recv, dt: dt, op: op, peer: root, s: s}, count)
}

// AllGather gathers sendCount elements of send from every rank into recv
// of every rank, rank i's at element i*sendCount: recv holds
// Count()*sendCount elements. send == recv + Rank()*sendCount elements is
// in place.
func (c *Comm) AllGather(send, recv gpumem.Ptr, sendCount int, dt DataType, s gpumem.Stream) error {
	return c.issue(&call{kind: kAllGather, send: send, recv: recv, dt: dt, s: s}, sendCount)
}

// ReduceScatter reduces Count()*recvCount elements of send over every rank
// with op and leaves block i of the result (recvCount elements) in recv of
// rank i.
func (c *Comm) ReduceScatter(send, recv gpumem.Ptr, recvCount int, dt DataType, op Op, s gpumem.Stream) error {
	return c.issue(&call{kind: kReduceScatter, send: send, recv: recv, dt: dt, op: op, s: s}, recvCount)
}

// Send sends count elements of send to rank peer, which receives them with
// Recv of the same count and type. Sends and receives that must progress
// together (a ring, a pair exchanging) go in one Group.
func (c *Comm) Send(send gpumem.Ptr, count int, dt DataType, peer int, s gpumem.Stream) error {
	return c.issue(&call{kind: kSend, send: send, dt: dt, peer: peer, s: s}, count)
}

// Recv receives count elements from rank peer into recv.
func (c *Comm) Recv(recv gpumem.Ptr, count int, dt DataType, peer int, s gpumem.Stream) error {
	return c.issue(&call{kind: kRecv, recv: recv, dt: dt, peer: peer, s: s}, count)
}

// issue checks a call and hands it to the engine.
func (c *Comm) issue(k *call, count int) error {
	if c == nil {
		return errNilComm
	}
	if err := c.check(k, count); err != nil {
		return fmt.Errorf("collective: %s: %s: %w", c, k.kind, err)
	}
	unlock, err := c.enter(true)
	if err != nil {
		return fmt.Errorf("collective: %s: %s: %w", c, k.kind, err)
	}
	defer unlock()
	return c.e.do(k)
}

var errClosed = fmt.Errorf("the communicator is closed: %w", gpumem.ErrClosed)

// enter begins a call on an open communicator: the shared hold that Close
// waits for and, if serial, the call lock. It returns what ends it.
func (c *Comm) enter(serial bool) (func(), error) {
	if c == nil {
		return nil, errNilComm
	}
	if c.closed.Load() {
		return nil, errClosed
	}
	c.life.RLock()
	if c.closed.Load() {
		c.life.RUnlock()
		return nil, errClosed
	}
	if !serial {
		return c.life.RUnlock, nil
	}
	c.mu.Lock()
	if c.closed.Load() { // Abort ran while this call waited for the one before it
		c.mu.Unlock()
		c.life.RUnlock()
		return nil, errClosed
	}
	return func() { c.mu.Unlock(); c.life.RUnlock() }, nil
}

var errInvalid = gpumem.ErrInvalidValue

// check validates what Go can tell is wrong before any library call.
func (c *Comm) check(k *call, count int) error {
	if count < 0 {
		return fmt.Errorf("negative count %d: %w", count, errInvalid)
	}
	k.count = uint64(count)
	if k.dt < 0 || k.dt >= numTypes {
		return fmt.Errorf("unknown data type %d: %w", int32(k.dt), errInvalid)
	}
	switch k.kind {
	case kAllReduce, kReduce, kReduceScatter:
		if k.op < 0 || k.op >= numOps {
			return fmt.Errorf("unknown reduction %d: %w", int32(k.op), errInvalid)
		}
	}
	switch k.kind {
	case kBroadcast, kReduce:
		if k.peer < 0 || k.peer >= c.nranks {
			return fmt.Errorf("root %d of %d ranks: %w", k.peer, c.nranks, errInvalid)
		}
	case kSend, kRecv:
		if k.peer < 0 || k.peer >= c.nranks {
			return fmt.Errorf("peer %d of %d ranks: %w", k.peer, c.nranks, errInvalid)
		}
	}
	if k.s.Device != c.dev {
		return fmt.Errorf("%v is a stream of device %d; the communicator's device is %d: %w", k.s, k.s.Device, c.dev, errInvalid)
	}
	bytes, err := sizeOf(k.count, k.dt, 1)
	if err != nil {
		return err
	}
	all, err := sizeOf(k.count, k.dt, c.nranks)
	if err != nil {
		return err
	}
	switch k.kind {
	case kAllReduce:
		k.sendBytes, k.recvBytes = bytes, bytes
	case kBroadcast:
		k.recvBytes = bytes
		if c.rank == k.peer {
			k.sendBytes = bytes
		}
	case kReduce:
		k.sendBytes = bytes
		if c.rank == k.peer {
			k.recvBytes = bytes
		}
	case kAllGather:
		k.sendBytes, k.recvBytes = bytes, all
	case kReduceScatter:
		k.sendBytes, k.recvBytes = all, bytes
	case kSend:
		k.sendBytes = bytes
	case kRecv:
		k.recvBytes = bytes
	}
	if k.sendBytes > 0 && k.send == 0 {
		return fmt.Errorf("null send buffer for %d bytes: %w", k.sendBytes, errInvalid)
	}
	if k.recvBytes > 0 && k.recv == 0 {
		return fmt.Errorf("null receive buffer for %d bytes: %w", k.recvBytes, errInvalid)
	}
	if end := uint64(k.send) + k.sendBytes; k.sendBytes > 0 && end < uint64(k.send) {
		return fmt.Errorf("send buffer %#x + %d bytes wraps the address space: %w", uint64(k.send), k.sendBytes, errInvalid)
	}
	if end := uint64(k.recv) + k.recvBytes; k.recvBytes > 0 && end < uint64(k.recv) {
		return fmt.Errorf("receive buffer %#x + %d bytes wraps the address space: %w", uint64(k.recv), k.recvBytes, errInvalid)
	}
	return nil
}

// maxBytes bounds a buffer: no device has 2^56 bytes.
const maxBytes = 1 << 56

// sizeOf is count elements of dt times n ranks in bytes, or an error when
// that overflows.
func sizeOf(count uint64, dt DataType, n int) (uint64, error) {
	hi, lo := bits.Mul64(count, uint64(dt.Size()))
	if hi == 0 {
		hi, lo = bits.Mul64(lo, uint64(n))
	}
	if hi != 0 || lo > maxBytes {
		return 0, fmt.Errorf("%d elements of %v on %d ranks overflow a buffer's size: %w", count, dt, n, errInvalid)
	}
	return lo, nil
}

// AsyncError reports an error the communicator met while its work ran
// (ncclCommGetAsyncError): nil while all is well. After one, the
// communicator should be aborted. It may be called while another goroutine
// is in a call on the communicator.
func (c *Comm) AsyncError() error {
	unlock, err := c.enter(false)
	if err != nil {
		return fmt.Errorf("collective: %s: %w", c, err)
	}
	defer unlock()
	// Abort waits for this hold: it does not free the communicator under
	// the library's call.
	c.query.RLock()
	defer c.query.RUnlock()
	if c.closed.Load() {
		return fmt.Errorf("collective: %s: %w", c, errClosed)
	}
	return c.e.asyncError()
}

// Abort stops the communicator's work, including work stuck waiting for
// ranks that will not come, and frees it (ncclCommAbort). It does not wait
// for a call in progress on another goroutine (it is what releases one);
// calls begun after it, and calls waiting for the one in progress, fail
// with ErrClosed, but a call must not begin concurrently with Abort, as in
// C. It waits for AsyncError calls in progress (they do not block). Abort
// while Close waits for a call stuck in the library aborts the
// communicator, which releases the call, in Close's stead. A second Abort,
// or one after Close, does nothing.
func (c *Comm) Abort() error {
	if c == nil {
		return errNilComm
	}
	c.closed.Store(true)
	if !c.free() {
		return nil
	}
	c.query.Lock()
	err := c.e.abort()
	c.query.Unlock()
	c.mu.Lock()
	c.regs = nil
	c.mu.Unlock()
	return err
}

// Finalize flushes the communicator's work and waits until it is quiescent
// (ncclCommFinalize, NCCL 2.14+): ErrNotSupported where the library lacks
// it. Close still frees the communicator.
func (c *Comm) Finalize() error {
	unlock, err := c.enter(true)
	if err != nil {
		return fmt.Errorf("collective: %s: Finalize: %w", c, err)
	}
	defer unlock()
	return c.e.finalize()
}

// Close waits for calls in progress on other goroutines, deregisters the
// buffers registered with the communicator and frees it (ncclCommDestroy,
// which completes its queued work first where the library was not
// finalized). A second Close, or one after Abort, does nothing.
func (c *Comm) Close() error {
	if c == nil {
		return errNilComm
	}
	if c.closed.Swap(true) {
		return nil
	}
	c.life.Lock()
	defer c.life.Unlock()
	if !c.free() {
		return nil // Abort freed it while Close waited
	}
	var errs []error
	for r := range c.regs {
		errs = append(errs, c.e.deregister(r.h))
	}
	c.regs = nil
	errs = append(errs, c.e.destroy())
	return errors.Join(errs...)
}

// free reports whether the caller is the one to free the library's
// communicator (Abort or Close, whichever comes first).
func (c *Comm) free() bool { return c.freed.CompareAndSwap(false, true) }

// Registration is a buffer registered with a communicator for zero-copy
// transfers (ncclCommRegister).
type Registration struct {
	c    *Comm
	h    uintptr
	Ptr  gpumem.Ptr // the start of the range
	Size uint64     // its size in bytes
}

// Register registers [p, p+size) with the communicator (ncclCommRegister,
// NCCL 2.19+; ErrNotSupported where the library lacks it). Buffers from any
// allocator may be registered; Close of the registration, or of the
// communicator, deregisters it. The simulator accepts any range: its
// transfers need no registration.
func (c *Comm) Register(p gpumem.Ptr, size uint64) (*Registration, error) {
	if p == 0 || size == 0 || uint64(p)+size < uint64(p) {
		return nil, fmt.Errorf("collective: %s: Register [%#x, +%d): %w", c, uint64(p), size, errInvalid)
	}
	unlock, err := c.enter(true)
	if err != nil {
		return nil, fmt.Errorf("collective: %s: Register: %w", c, err)
	}
	defer unlock()
	h, err := c.e.register(p, size)
	if err != nil {
		return nil, err
	}
	r := &Registration{c: c, h: h, Ptr: p, Size: size}
	if c.regs == nil {
		c.regs = map[*Registration]struct{}{}
	}
	c.regs[r] = struct{}{}
	return r, nil
}

// Close deregisters the buffer (ncclCommDeregister). A second Close, or one
// after the communicator's, does nothing; Close of a nil *Registration is
// an error matching gpumem.ErrInvalidValue.
func (r *Registration) Close() error {
	if r == nil {
		return fmt.Errorf("collective: nil Registration: %w", gpumem.ErrInvalidValue)
	}
	c := r.c
	unlock, err := c.enter(true)
	if err != nil {
		return nil // the communicator's Close deregistered it, or Abort freed it
	}
	defer unlock()
	if _, ok := c.regs[r]; !ok {
		return nil
	}
	delete(c.regs, r)
	return c.e.deregister(r.h)
}

// errNilComm is the error of every method of a nil *Comm.
var errNilComm = fmt.Errorf("collective: nil Comm: %w", gpumem.ErrInvalidValue)
