package collective

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/bind"
)

// native is the engine over NCCL or RCCL. Every call that needs a device
// makes the device's context current in the same transition into C
// (bind.CheckOn): ncclCommInitRank binds the communicator to the runtime's
// current device, which follows the driver's current context.
type native struct {
	b gpumem.Backend
	l *bind.Lib
}

// cells are out-parameters in Go heap memory.
type cells struct {
	comm   uintptr
	n      int32
	status int32
	handle uintptr
}

func newCells() *cells {
	c := new(cells)
	escape(c)
	return c
}

func addr[T any](p *T) uintptr { return uintptr(unsafe.Pointer(p)) }

func (e *native) ctx(dev int) (bind.Context, error) { return bind.ContextOf(e.b, dev) }

func (e *native) uniqueID() (UniqueID, error) {
	id := new(UniqueID)
	escape(id)
	ctx, err := e.ctx(0)
	if err != nil {
		return UniqueID{}, err
	}
	err = e.l.CheckOn(ctx, opGetUniqueID, addr(id))
	runtime.KeepAlive(id)
	return *id, err
}

func (e *native) initAll(devs []int) ([]commEngine, error) {
	out := make([]uintptr, len(devs))
	list := make([]int32, len(devs))
	escape(&out[0])
	escape(&list[0])
	for i, d := range devs {
		list[i] = int32(d)
	}
	ctx, err := e.ctx(devs[0])
	if err != nil {
		return nil, err
	}
	err = e.l.CheckOn(ctx, opCommInitAll, addr(&out[0]), uintptr(len(devs)), addr(&list[0]))
	runtime.KeepAlive(out)
	runtime.KeepAlive(list)
	if err != nil {
		return nil, fmt.Errorf("collective: InitAll on devices %v: %w", devs, err)
	}
	ces := make([]commEngine, len(devs))
	for i, h := range out {
		ces[i] = &nativeComm{e: e, h: h, dev: devs[i]}
	}
	return ces, nil
}

func (e *native) initRank(dev, nranks int, id *UniqueID, rank int) (commEngine, error) {
	ctx, err := e.ctx(dev)
	if err != nil {
		return nil, err
	}
	out := newCells()
	args, keep := initRankWords(addr(&out.comm), nranks, rank, id, 0)
	err = e.l.CheckOn(ctx, opCommInitRank, args...)
	runtime.KeepAlive(out)
	runtime.KeepAlive(keep)
	if err != nil {
		return nil, fmt.Errorf("collective: InitRank rank %d of %d on device %d: %w", rank, nranks, dev, err)
	}
	c := &nativeComm{e: e, h: out.comm, dev: dev}
	if err := c.verify(nranks, rank, dev); err != nil {
		_ = c.destroy()
		return nil, err
	}
	return c, nil
}

func (e *native) group(fn func() error) error {
	ctx, err := e.ctx(0)
	if err != nil {
		return err
	}
	if err := e.l.CheckOn(ctx, opGroupStart); err != nil {
		return err
	}
	ended := false
	defer func() {
		if !ended { // fn panicked: the group still ends, then the panic goes on
			_ = e.l.CheckOn(ctx, opGroupEnd)
		}
	}()
	ferr := fn()
	ended = true
	return errors.Join(ferr, e.l.CheckOn(ctx, opGroupEnd))
}

// nativeComm is an ncclComm_t.
type nativeComm struct {
	e   *native
	h   uintptr
	dev int
}

// verify checks the communicator's rank, size and device against what
// was asked (ncclCommCount, ncclCommUserRank, ncclCommCuDevice).
func (c *nativeComm) verify(nranks, rank, dev int) error {
	ctx, err := c.e.ctx(c.dev)
	if err != nil {
		return err
	}
	out := newCells()
	for _, q := range []struct {
		op   bind.Op
		want int
	}{{opCommCount, nranks}, {opCommUserRank, rank}, {opCommCuDevice, dev}} {
		err := c.e.l.CheckOn(ctx, q.op, c.h, addr(&out.n))
		runtime.KeepAlive(out)
		if err != nil {
			return err
		}
		if int(out.n) != q.want {
			return fmt.Errorf("collective: %s reports %d, want %d: %w", Table.Rows[q.op].Symbol[c.e.l.Vendor()], out.n, q.want, gpumem.ErrInvalidValue)
		}
	}
	return nil
}

func (c *nativeComm) do(k *call) error {
	ctx, err := c.e.ctx(c.dev)
	if err != nil {
		return err
	}
	l, s := c.e.l, k.s.Handle
	send, recv, n, dt := uintptr(k.send), uintptr(k.recv), uintptr(k.count), uintptr(uint32(k.dt))
	op, peer := uintptr(uint32(k.op)), uintptr(uint32(int32(k.peer)))
	switch k.kind {
	case kAllReduce:
		err = l.CheckOn(ctx, opAllReduce, send, recv, n, dt, op, c.h, s)
	case kBroadcast:
		err = l.CheckOn(ctx, opBroadcast, send, recv, n, dt, peer, c.h, s)
	case kReduce:
		err = l.CheckOn(ctx, opReduce, send, recv, n, dt, op, peer, c.h, s)
	case kAllGather:
		err = l.CheckOn(ctx, opAllGather, send, recv, n, dt, c.h, s)
	case kReduceScatter:
		err = l.CheckOn(ctx, opReduceScatter, send, recv, n, dt, op, c.h, s)
	case kSend:
		err = l.CheckOn(ctx, opSend, send, n, dt, peer, c.h, s)
	case kRecv:
		err = l.CheckOn(ctx, opRecv, recv, n, dt, peer, c.h, s)
	}
	return c.withLastError(err)
}

// withLastError adds the library's message for the last failure
// (ncclGetLastError, where it has one) to err.
func (c *nativeComm) withLastError(err error) error {
	if err == nil || !c.e.l.Has(opGetLastError) {
		return err
	}
	r, cerr := c.e.l.Call(opGetLastError, c.h)
	if cerr != nil {
		return err
	}
	if msg := bind.CString(r); msg != "" {
		return fmt.Errorf("%w (%s)", err, msg)
	}
	return err
}

func (c *nativeComm) asyncError() error {
	ctx, err := c.e.ctx(c.dev)
	if err != nil {
		return err
	}
	out := newCells()
	err = c.e.l.CheckOn(ctx, opCommGetAsyncError, c.h, addr(&out.status))
	runtime.KeepAlive(out)
	if err != nil {
		return err
	}
	return c.e.l.Err(opCommGetAsyncError, int(out.status))
}

func (c *nativeComm) simple(op bind.Op) error {
	ctx, err := c.e.ctx(c.dev)
	if err != nil {
		return err
	}
	return c.e.l.CheckOn(ctx, op, c.h)
}

func (c *nativeComm) abort() error    { return c.simple(opCommAbort) }
func (c *nativeComm) destroy() error  { return c.simple(opCommDestroy) }
func (c *nativeComm) finalize() error { return c.simple(opCommFinalize) }

func (c *nativeComm) register(p gpumem.Ptr, size uint64) (uintptr, error) {
	ctx, err := c.e.ctx(c.dev)
	if err != nil {
		return 0, err
	}
	out := newCells()
	err = c.e.l.CheckOn(ctx, opCommRegister, c.h, uintptr(p), uintptr(size), addr(&out.handle))
	runtime.KeepAlive(out)
	return out.handle, c.withLastError(err)
}

func (c *nativeComm) deregister(h uintptr) error {
	ctx, err := c.e.ctx(c.dev)
	if err != nil {
		return err
	}
	return c.e.l.CheckOn(ctx, opCommDeregister, c.h, h)
}
