package native

import (
	"fmt"
	"sync/atomic"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// StreamCreate creates a stream on dev.
func (b *Backend) StreamCreate(dev int, flags gpumem.StreamFlags, priority int) (gpumem.Stream, error) {
	c := getCell()
	defer putCell(c)
	if err := b.call(dev, symtab.StreamCreate, c.addr(0), uintptr(flags), uintptr(int64(priority)), 0, 0, 0); err != nil {
		return gpumem.Stream{}, err
	}
	s := gpumem.Stream{Handle: uintptr(c[0]), Device: dev}
	b.streamMade(s)
	return s, nil
}

// streamState is what the backend knows of a stream handle it made: its
// device, and whether it is live or was destroyed (a handle the driver may
// give again to a new stream, which then records it live).
type streamState struct {
	dev  int
	live bool
}

// CheckStream implements gpumem.StreamChecker: a stream this backend made is
// checked in process (live, on its device); the default stream of an
// existing device is live; a stream made elsewhere in the process (by
// another library) is asked of the vendor library (its capture status, the
// cheapest question). A handle this backend destroyed is refused without
// passing it to the library, which may not survive a dead handle.
func (b *Backend) CheckStream(s gpumem.Stream) error {
	if b.closed.Load() {
		return b.closedErr()
	}
	if s.Device < 0 || s.Device >= b.nDev {
		return b.badDevice(s.Device)
	}
	if s.Handle == 0 {
		return nil
	}
	if v, ok := b.streams.Load(s.Handle); ok {
		st := v.(streamState)
		switch {
		case !st.live:
			return fmt.Errorf("gpumem: %s: %v was destroyed: %w", b.d.Name, s, gpumem.ErrInvalidValue)
		case st.dev != s.Device:
			return fmt.Errorf("gpumem: %s: %v belongs to device %d: %w", b.d.Name, s, st.dev, gpumem.ErrInvalidValue)
		}
		return nil
	}
	_, err := b.StreamCaptureInfo(s)
	return err
}

// StreamEpoch implements gpumem.StreamChecker: incremented by StreamDestroy
// and Close.
func (b *Backend) StreamEpoch() *atomic.Uint64 { return &b.epoch }

// StreamDestroy destroys a stream. The default stream cannot be destroyed.
func (b *Backend) StreamDestroy(s gpumem.Stream) error {
	if s.Handle == 0 {
		return fmt.Errorf("gpumem: %s: the default stream cannot be destroyed: %w", b.d.Name, gpumem.ErrInvalidValue)
	}
	if err := b.deadStream(s); err != nil {
		return err
	}
	if err := b.call(s.Device, symtab.StreamDestroy, s.Handle, 0, 0, 0, 0, 0); err != nil {
		return err
	}
	b.pins.Forget(s.Handle)
	open.forget(s.Handle)
	b.streamDestroyed(s)
	b.epoch.Add(1)
	return nil
}

// StreamSynchronize waits for the work queued on s.
func (b *Backend) StreamSynchronize(s gpumem.Stream) error {
	if err := b.deadStream(s); err != nil {
		return err
	}
	return b.call(s.Device, symtab.StreamSynchronize, s.Handle, 0, 0, 0, 0, 0)
}

// query asks op whether the work behind h is done. Not ready is an answer,
// not an error, and is told from the raw status so that polling allocates
// nothing.
func (b *Backend) query(dev int, op symtab.Op, h uintptr) (bool, error) {
	r, preFailed, err := b.invoke(dev, op, h, 0, 0, 0, 0, 0)
	switch {
	case err != nil:
		return false, err
	case int32(r) == 0:
		return true, nil
	case !preFailed && int32(r) == StatusNotReady:
		return false, nil
	}
	return false, b.failed(op, r, preFailed)
}

// StreamQuery reports whether s has completed its work.
func (b *Backend) StreamQuery(s gpumem.Stream) (bool, error) {
	if err := b.deadStream(s); err != nil {
		return false, err
	}
	return b.query(s.Device, symtab.StreamQuery, s.Handle)
}

// StreamWaitEvent makes s wait for e's last record.
func (b *Backend) StreamWaitEvent(s gpumem.Stream, e gpumem.Event) error {
	if err := b.deadStream(s); err != nil {
		return err
	}
	if err := b.deadEvent(e); err != nil {
		return err
	}
	return b.call(s.Device, symtab.StreamWaitEvent, s.Handle, e.Handle, 0, 0, 0, 0)
}

// StreamPriorityRange returns the least and greatest stream priorities.
func (b *Backend) StreamPriorityRange(dev int) (least, greatest int, err error) {
	c := getCell()
	defer putCell(c)
	if err := b.call(dev, symtab.StreamPriorityRange, c.addr(0), c.addr(1), 0, 0, 0, 0); err != nil {
		return 0, 0, err
	}
	return int(c.i32(0)), int(c.i32(1)), nil
}
