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
	return gpumem.Event{Handle: uintptr(c[0]), Device: dev}, nil
}

// EventDestroy destroys an event.
func (b *Backend) EventDestroy(e gpumem.Event) error {
	return b.call(e.Device, symtab.EventDestroy, e.Handle, 0, 0, 0, 0, 0)
}

// EventRecord records e on s.
func (b *Backend) EventRecord(e gpumem.Event, s gpumem.Stream) error {
	return b.call(s.Device, symtab.EventRecord, e.Handle, s.Handle, 0, 0, 0, 0)
}

// EventQuery reports whether e's last record has completed.
func (b *Backend) EventQuery(e gpumem.Event) (bool, error) {
	return b.query(e.Device, symtab.EventQuery, e.Handle)
}

// EventSynchronize waits for e's last record.
func (b *Backend) EventSynchronize(e gpumem.Event) error {
	return b.call(e.Device, symtab.EventSynchronize, e.Handle, 0, 0, 0, 0, 0)
}

// EventElapsed returns the milliseconds between two completed events.
func (b *Backend) EventElapsed(start, end gpumem.Event) (float32, error) {
	c := getCell()
	defer putCell(c)
	if err := b.call(start.Device, symtab.EventElapsed, c.addr(0), start.Handle, end.Handle, 0, 0, 0); err != nil {
		return 0, err
	}
	return *(*float32)(unsafe.Pointer(&c[0])), nil
}
