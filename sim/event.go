package sim

import (
	"time"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// This file is the events: record, wait, query, synchronize and elapsed
// time, over the engine in engine.go.

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

func (g *GPU) lookupEvent(m symtab.Op, e gpumem.Event) (*event, error) {
	ev := g.events[e.Handle]
	if ev == nil || ev.dev.ord != e.Device {
		return nil, errf(m, symtab.CUDAInvalidHandle, "event(dev %d, %#x) is not a live event", e.Device, e.Handle)
	}
	return ev, nil
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
	gen, cp, timed := ev.gen, ev.cap, ev.timed
	ev.gen++
	ev.cap = nil
	ev.timed = false
	if err := g.enqueue(st, &op{kind: opRecord, m: symtab.EventRecord, ev: ev, evGen: ev.gen}); err != nil {
		ev.gen, ev.cap, ev.timed = gen, cp, timed // refused: the event keeps its last record
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
	if err := g.stickyErr(symtab.EventQuery, ev.dev); err != nil {
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
		return g.stickyErr(symtab.EventSynchronize, ev.dev)
	}
	if err := g.waitFor(symtab.EventSynchronize, ev.s, ev.seq); err != nil {
		return err
	}
	g.trimPools(ev.dev)
	return g.stickyErr(symtab.EventSynchronize, ev.dev)
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
