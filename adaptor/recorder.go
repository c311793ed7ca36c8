package adaptor

// See doc.go for an overview.

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/gpumem/gpumem"
)

// Recorder writes every allocation and free that passes through it as an
// allocation trace, the text that package trace reads and `gpumem replay`
// replays through every allocator, after RMM's logging_resource_adaptor:
//
//	a ID SIZE STREAM     Allocate(SIZE, s) handed out allocation ID
//	f ID STREAM          Deallocate of allocation ID
//
// IDs count from 0 in the order allocations are handed out. Streams are
// numbered in the order they are first seen, from 0 (so 0 is the first
// stream used, normally the program's main stream); StreamNumber tells the
// mapping. A replay runs a trace's stream k on its stream k%4.
//
// The trace has one stream per free, where the replay orders the free:
// when it differs from the allocation's stream, the replay records the use
// on it and frees on the allocation's stream. So a free records the stream
// of Deallocate when that differs from the allocation's stream, else the
// last stream RecordStream named for the allocation, else the allocation's
// stream; the other streams RecordStream named are not in the trace.
//
// Lines are written in the order the upstream served the requests: a free
// is written before the upstream can hand its memory out again, so a trace
// never shows two live allocations at one address. Only successful calls
// are written; failed allocations are not in the trace. Each line is one
// Write to w; the first error of w is kept (Err) and stops the writing,
// never the allocations. Wrap w in a bufio.Writer for speed, and flush it
// after Close.
//
// The device is the stream's (s.Device); the trace format has no device,
// so record one device per Recorder. Deallocate and RecordStream accept
// only pointers handed out through this Recorder (others: ErrInvalidValue,
// upstream not called). Stats, ResetPeakStats, SetOOMHandler and
// AddOOMObserver are the upstream's.
//
// Closing a Recorder closes its upstream (it owns it), not w; allocations
// still live are left live in the trace, as a replay leaves them. A
// Recorder is safe for concurrent use; its frees are serialised.
type Recorder struct {
	link
	w io.Writer

	mu      sync.Mutex // serialises frees and every write
	err     error
	nextID  uint64
	streams map[gpumem.Stream]int
	live    map[gpumem.Ptr]*recorded
	buf     []byte
}

// recorded is what a Recorder knows of a live allocation.
type recorded struct {
	id       uint64
	stream   gpumem.Stream
	used     gpumem.Stream // the last stream RecordStream named other than stream
	usedElse bool
}

var _ gpumem.Adaptor = (*Recorder)(nil)

// NewRecorder returns a Recorder over up writing to w.
func NewRecorder(up gpumem.Allocator, w io.Writer) (*Recorder, error) {
	if err := checkUpstream(up, "adaptor.Recorder"); err != nil {
		return nil, err
	}
	if w == nil {
		return nil, fmt.Errorf("adaptor.Recorder: nil writer: %w", gpumem.ErrInvalidValue)
	}
	return &Recorder{link: link{up: up, name: "adaptor.Recorder"}, w: w, streams: map[gpumem.Stream]int{}, live: map[gpumem.Ptr]*recorded{}}, nil
}

// Err returns the first error w returned, or nil.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// StreamNumber returns the number the trace gives s, and false when s has
// not been seen.
func (r *Recorder) StreamNumber(s gpumem.Stream) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.streams[s]
	return n, ok
}

// streamLocked returns the number of s, giving it the next one when new.
// r.mu is held.
func (r *Recorder) streamLocked(s gpumem.Stream) int {
	n, ok := r.streams[s]
	if !ok {
		n = len(r.streams)
		r.streams[s] = n
	}
	return n
}

// writeLocked writes one event. r.mu is held.
func (r *Recorder) writeLocked(alloc bool, id, size uint64, stream int) {
	if r.err != nil {
		return
	}
	b := r.buf[:0]
	if alloc {
		b = append(b, "a "...)
	} else {
		b = append(b, "f "...)
	}
	b = strconv.AppendUint(b, id, 10)
	if alloc {
		b = append(b, ' ')
		b = strconv.AppendUint(b, size, 10)
	}
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(stream), 10)
	b = append(b, '\n')
	r.buf = b
	if _, err := r.w.Write(b); err != nil {
		r.err = fmt.Errorf("adaptor.Recorder: %w", err)
	}
}

// Allocate takes size bytes from the upstream on s and writes the
// allocation.
func (r *Recorder) Allocate(size uint64, s gpumem.Stream) (gpumem.Ptr, error) {
	if r.closed.Load() {
		return 0, r.errClosed()
	}
	if size == 0 {
		return 0, r.errZero()
	}
	p, err := r.up.Allocate(size, s)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	id := r.nextID
	r.nextID++
	r.live[p] = &recorded{id: id, stream: s}
	r.writeLocked(true, id, size, r.streamLocked(s))
	return p, nil
}

// Deallocate frees p, allocated through r, through the upstream and writes
// the free; s is the stream on which its last use is ordered.
func (r *Recorder) Deallocate(p gpumem.Ptr, s gpumem.Stream) error {
	if r.closed.Load() {
		return r.errClosed()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.live[p]
	if !ok {
		return r.errForeign("Deallocate", p)
	}
	// The upstream is called with r.mu held: an Allocate that gets p's
	// memory back writes its line after this free's.
	if err := r.up.Deallocate(p, s); err != nil {
		if errors.Is(err, gpumem.ErrClosed) {
			delete(r.live, p)
		}
		return err
	}
	delete(r.live, p)
	on := a.stream
	switch {
	case s != a.stream:
		on = s
	case a.usedElse:
		on = a.used
	}
	r.writeLocked(false, a.id, 0, r.streamLocked(on))
	return nil
}

// RecordStream marks p, allocated through r, as used on s (upstream); the
// trace keeps the last such stream for p's free.
func (r *Recorder) RecordStream(p gpumem.Ptr, s gpumem.Stream) error {
	if r.closed.Load() {
		return r.errClosed()
	}
	r.mu.Lock()
	a, ok := r.live[p]
	r.mu.Unlock()
	if !ok {
		return r.errForeign("RecordStream", p)
	}
	if err := r.up.RecordStream(p, s); err != nil {
		return err
	}
	if s != a.stream {
		r.mu.Lock()
		a.used, a.usedElse = s, true
		r.mu.Unlock()
	}
	return nil
}

// Stats returns the upstream's statistics of device dev.
func (r *Recorder) Stats(dev int) gpumem.MemoryStats {
	if r.closed.Load() {
		return gpumem.MemoryStats{}
	}
	return r.up.Stats(dev)
}

// ResetPeakStats resets the upstream's peaks of device dev.
func (r *Recorder) ResetPeakStats(dev int) {
	if !r.closed.Load() {
		r.up.ResetPeakStats(dev)
	}
}

// SetOOMHandler sets the upstream's OOM handler.
func (r *Recorder) SetOOMHandler(h gpumem.OOMHandler) { r.up.SetOOMHandler(h) }

// AddOOMObserver adds an observer to the upstream.
func (r *Recorder) AddOOMObserver(o gpumem.OOMObserver) { r.up.AddOOMObserver(o) }

// Close closes the upstream, which releases everything allocated through
// r; every later call but Close and Stats fails with ErrClosed.
func (r *Recorder) Close() error { return r.close() }
