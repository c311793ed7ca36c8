package native

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/symtab"
)

// MaxLater is how many frees FreeAsyncLater holds back at most: the one
// that fills the queue is sent at once with those before it, in one
// transition.
const MaxLater = 8

// laterQueue is the stream-ordered frees that FreeAsyncLater held back, to
// be sent before or with the backend's next foreign call, in one transition.
//
// Only a free that needs no current context (symtab.Row.StreamContext, on
// an explicit stream, Dialect.DirectCalls) on a live stream that this
// backend made, while no capture begun through gpumem is open, is held
// back. Every way into C checks n first (settle) and sends what is queued
// before it calls, or with its call (callOnStream's direct calls), so the
// driver sees each free before any later call of this backend: before an
// allocation from any pool (the pool's state, and so its footprint, is what
// it would have been), before a stream is destroyed, synchronized or
// captured, before Close. A free is late only by the Go code that runs
// between it and the next call.
type laterQueue struct {
	mu sync.Mutex
	n  atomic.Int32 // frees queued; written under mu, read without it by settle
	// e holds the queued frees and, at e[n], the call they ride with.
	e [MaxLater]ccall.Entry
	// streams are the queued frees' streams, for errors.
	streams [MaxLater]gpumem.Stream
	// known are stream handles checked as made by this backend and live, at
	// the stream epoch knownAt (+1; 0: none).
	known   [4]uintptr
	knownAt uint64
	next    int // the slot of known filled next
	sent    atomic.Int64
	failed  []error // frees the driver refused, until FlushLater reports them
}

// FreeAsyncLater is FreeAsync, held back when it can be: the free is sent
// to the driver with this backend's next foreign call, in the same
// transition, instead of in one of its own (it rides with the allocation
// that follows it in an alloc/free loop). What it cannot hold back it sends
// at once, as FreeAsync: a free on a default stream, on a stream this
// backend did not make, while a capture begun through gpumem is open, or on
// a vendor whose free needs its context current (HIP).
//
// A free held back that the driver refuses is not reported to this call:
// FlushLater returns it. The driver refuses a free of a live pool
// allocation on a live stream only when its context is lost.
func (b *Backend) FreeAsyncLater(p gpumem.Ptr, s gpumem.Stream) error {
	q := &b.later
	if s.Handle > maxSpecialStream && b.d.DirectCalls && symtab.Driver.Rows[symtab.FreeAsync].StreamContext[b.d.Vendor] {
		if fn := b.fnFor(s.Device, symtab.FreeAsync); fn != 0 {
			q.mu.Lock()
			// A capture begun through gpumem counts itself open before it
			// sends what is queued and begins (StreamBeginCapture): asked
			// under mu, an open capture is either seen here or sends this
			// free before it begins.
			if !open.any() && b.madeLocked(s) {
				i := q.n.Load()
				q.e[i] = ccall.Entry{Fn: fn, A1: uintptr(p), A2: s.Handle}
				q.streams[i] = s
				q.n.Store(i + 1)
				if i+1 == MaxLater {
					b.sendLocked(0)
				}
				q.mu.Unlock()
				return nil
			}
			q.mu.Unlock()
		}
	}
	return b.FreeAsync(p, s)
}

// madeLocked reports whether s is a live stream of this backend, on its
// device; a handle answered yes is remembered until a stream is destroyed
// (the stream epoch moves). Called with later.mu held.
func (b *Backend) madeLocked(s gpumem.Stream) bool {
	q := &b.later
	e := b.epoch.Load() + 1
	if q.knownAt == e {
		for _, h := range q.known {
			if h == s.Handle {
				return true
			}
		}
	}
	v, ok := b.streams.Load(s.Handle)
	if !ok {
		return false
	}
	if st := v.(streamState); !st.live || st.dev != s.Device {
		return false
	}
	if q.knownAt != e {
		q.known, q.knownAt, q.next = [4]uintptr{}, e, 0
	}
	q.known[q.next] = s.Handle
	q.next = (q.next + 1) % len(q.known)
	return true
}

// settle sends the frees held back, if any, before a call that does not
// take them with it. It costs one atomic load when there are none.
func (b *Backend) settle() {
	if b.later.n.Load() != 0 {
		b.flushLater()
	}
}

// flushLater sends the frees held back, in one transition.
//
//go:noinline
func (b *Backend) flushLater() {
	q := &b.later
	q.mu.Lock()
	if q.n.Load() != 0 {
		b.sendLocked(0)
	}
	q.mu.Unlock()
}

// sendLocked calls the queued frees and, when with is 1, the call at e[n]
// after them, in one transition, then notes the frees the driver refused
// and empties the queue. Called with later.mu held.
func (b *Backend) sendLocked(with int32) {
	q := &b.later
	n := q.n.Load()
	ccall.CallBatch(0, 0, q.e[:n+with])
	q.n.Store(0) // before the errors: naming a status may call the library (settle)
	for i := int32(0); i < n; i++ {
		if r := q.e[i].R; int32(r) != 0 {
			err := b.Status(symtab.FreeAsync, r)
			q.failed = append(q.failed, fmt.Errorf("gpumem: %s: free of %#x held back on %v: %w", b.d.Name, q.e[i].A1, q.streams[i], err))
		}
	}
	q.sent.Add(int64(n))
}

// rideLocked is a direct call of fn on an explicit stream made together
// with the frees held back (at least one), in one transition. Called with
// later.mu held; it returns fn's result.
func (b *Backend) rideLocked(fn, a1, a2, a3, a4, a5, a6 uintptr) uintptr {
	q := &b.later
	n := q.n.Load()
	q.e[n] = ccall.Entry{Fn: fn, A1: a1, A2: a2, A3: a3, A4: a4, A5: a5, A6: a6}
	b.sendLocked(1)
	return q.e[n].R
}

// FlushLater sends the frees FreeAsyncLater holds back now, and returns
// the errors of those the driver refused since the last FlushLater (nil if
// none). An allocator calls it where it reports (trimming, closing).
func (b *Backend) FlushLater() error {
	q := &b.later
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n.Load() != 0 {
		b.sendLocked(0)
	}
	err := errors.Join(q.failed...)
	q.failed = nil
	return err
}

// LaterSent is how many frees have been sent after being held back.
func (b *Backend) LaterSent() int64 { return b.later.sent.Load() }
