package native

import (
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// EventCreate creates an event on dev.
func (b *Backend) EventCreate(dev int, flags gpumem.EventFlags) (gpumem.Event, error) {
	c := getCell()
	defer putCell(c)
	if err := b.call(dev, symtab.EventCreate, c.addr(0), uintptr(flags), 0, 0, 0, 0); err != nil {
		return gpumem.Event{}, err
	}
	e := gpumem.Event{Handle: uintptr(c[0]), Device: dev}
	b.events.made(e.Handle)
	return e, nil
}

// EventDestroy destroys an event. An event this backend destroyed is
// refused without reaching the library, which may not survive it.
func (b *Backend) EventDestroy(e gpumem.Event) error {
	if err := b.deadEvent(e); err != nil {
		return err
	}
	if err := b.call(e.Device, symtab.EventDestroy, e.Handle, 0, 0, 0, 0, 0); err != nil {
		return err
	}
	b.events.destroyed(e.Handle)
	return nil
}

// EventRecord records e on s.
func (b *Backend) EventRecord(e gpumem.Event, s gpumem.Stream) error {
	if err := b.deadEvent(e); err != nil {
		return err
	}
	if err := b.deadStream(s); err != nil {
		return err
	}
	return b.call(s.Device, symtab.EventRecord, e.Handle, s.Handle, 0, 0, 0, 0)
}

// EventQuery reports whether e's last record has completed.
func (b *Backend) EventQuery(e gpumem.Event) (bool, error) {
	if err := b.deadEvent(e); err != nil {
		return false, err
	}
	return b.query(e.Device, symtab.EventQuery, e.Handle)
}

// EventSynchronize waits for e's last record.
func (b *Backend) EventSynchronize(e gpumem.Event) error {
	if err := b.deadEvent(e); err != nil {
		return err
	}
	return b.call(e.Device, symtab.EventSynchronize, e.Handle, 0, 0, 0, 0, 0)
}

// EventElapsed returns the milliseconds between two completed events.
func (b *Backend) EventElapsed(start, end gpumem.Event) (float32, error) {
	if err := b.deadEvent(start, end); err != nil {
		return 0, err
	}
	c := getCell()
	defer putCell(c)
	if err := b.call(start.Device, symtab.EventElapsed, c.addr(0), start.Handle, end.Handle, 0, 0, 0); err != nil {
		return 0, err
	}
	return *(*float32)(unsafe.Pointer(&c[0])), nil
}
