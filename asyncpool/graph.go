package asyncpool

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/streamcheck"
)

// graphState follows one capture sequence, and then the graph it produced,
// until the graph is destroyed. A user object retained (moved) by the graph
// has a destructor that queues the state on its device's released list; the
// next allocator call on the device processes it (a destructor must not call
// the backend).
type graphState struct {
	d        *device
	id       uint64
	graph    gpumem.Graph
	launched atomic.Bool // set by a host node of the graph: it ran at least once
	aborted  atomic.Bool // the user object was never handed to the graph
	uo       gpumem.UserObject

	// Guarded by d.mu.
	marked    bool                    // the launch marker node was captured
	unheld    bool                    // the graph does not hold uo yet (see retainLater)
	destroyed bool                    // the graph is gone (processed)
	allocs    map[gpumem.Ptr]struct{} // live records allocated in this capture
	deferred  []gpumem.Ptr            // records freed in this capture (case 3)
	streams   []gpumem.Stream         // capturing streams seen
}

// released is the user object's destructor: it runs on a backend thread
// once the graph and every executable graph made from it are destroyed (and
// their launches complete).
func (gs *graphState) released() {
	if gs.aborted.Load() {
		return
	}
	d := gs.d
	d.relMu.Lock()
	d.released = append(d.released, gs)
	d.relMu.Unlock()
	d.relFlag.Store(true)
}

// graphFor returns the state of capture ci, creating it (and handing its
// user object to the graph being captured) on first use.
func (d *device) graphFor(ci gpumem.CaptureInfo, s gpumem.Stream) (*graphState, error) {
	d.mu.Lock()
	if gs := d.graphs[ci.ID]; gs != nil {
		gs.noteStreamLocked(s)
		d.mu.Unlock()
		return gs, nil
	}
	d.mu.Unlock()
	gs := &graphState{d: d, id: ci.ID, graph: ci.Graph, allocs: map[gpumem.Ptr]struct{}{}}
	uo, err := d.b.UserObjectCreate(d.id, gs.released)
	if err != nil {
		return nil, fmt.Errorf("asyncpool: creating the user object of capture %d on %v: %w", ci.ID, s, err)
	}
	gs.uo = uo
	unheld := false
	if err := d.b.GraphRetainUserObject(ci.Graph, uo, 1, true); errors.Is(err, gpumem.ErrInvalidValue) {
		// Some backends refuse a graph still being captured: hand the
		// object over once the capture has ended (retainLater).
		unheld = true
	} else if err != nil {
		gs.aborted.Store(true)
		err = fmt.Errorf("asyncpool: handing a user object to the graph of capture %d on %v: %w", ci.ID, s, err)
		if rerr := d.b.UserObjectRelease(uo, 1); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if other := d.graphs[ci.ID]; other != nil {
		// Another goroutine won; ours stays empty and is dropped when
		// the graph goes.
		other.noteStreamLocked(s)
		return other, nil
	}
	d.graphs[ci.ID] = gs
	gs.noteStreamLocked(s)
	if unheld {
		gs.unheld = true
		d.unheld.Add(1)
	}
	return gs, nil
}

// retainLater hands their user objects to graphs whose capture has ended
// (see graphFor). A graph already destroyed refuses it: releasing our
// reference then runs the destructor, which is what destruction would
// have done.
func (d *device) retainLater() {
	d.mu.Lock()
	var todo []*graphState
	for _, gs := range d.graphs {
		if gs.unheld {
			todo = append(todo, gs)
		}
	}
	d.mu.Unlock()
	for _, gs := range todo {
		d.mu.Lock()
		streams := append([]gpumem.Stream(nil), gs.streams...)
		d.mu.Unlock()
		open := false
		for _, s := range streams {
			ci, err := d.streamCapture(s)
			if err != nil || (ci.Status != gpumem.CaptureNone && ci.ID == gs.id) {
				open = true
				break
			}
		}
		if open {
			continue
		}
		err := d.b.GraphRetainUserObject(gs.graph, gs.uo, 1, true)
		if err != nil && !errors.Is(err, gpumem.ErrInvalidValue) {
			continue // try again later
		}
		d.mu.Lock()
		gs.unheld = false
		d.mu.Unlock()
		d.unheld.Add(-1)
		if err != nil {
			_ = d.b.UserObjectRelease(gs.uo, 1) // the graph is gone
		}
	}
}

// noteStreamLocked adds s to the capturing streams seen. d.mu must be held.
func (gs *graphState) noteStreamLocked(s gpumem.Stream) {
	for _, u := range gs.streams {
		if u == s {
			return
		}
	}
	gs.streams = append(gs.streams, s)
}

// markLaunch captures, once per graph, a host node that records that the
// graph ran: a graph allocation exists (and must be freed) only if it did.
func (d *device) markLaunch(gs *graphState, s gpumem.Stream) error {
	d.mu.Lock()
	marked := gs.marked
	d.mu.Unlock()
	if marked {
		return nil
	}
	if err := d.b.LaunchHostFunc(s, func() { gs.launched.Store(true) }); err != nil {
		return fmt.Errorf("asyncpool: capturing the launch marker of capture %d on %v: %w", gs.id, s, err)
	}
	d.mu.Lock()
	gs.marked = true
	d.mu.Unlock()
	return nil
}

// processReleased handles the graphs destroyed since the last call: memory
// they owned is queued for a free (or dropped when the graph never ran), and
// frees deferred by their captures go ahead.
func (d *device) processReleased() {
	d.relMu.Lock()
	list := d.released
	d.released = nil
	d.relFlag.Store(false)
	d.relMu.Unlock()
	if len(list) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, gs := range list {
		if gs.destroyed {
			continue
		}
		gs.destroyed = true
		if d.graphs[gs.id] == gs {
			delete(d.graphs, gs.id)
		}
		ran := gs.launched.Load()
		for p := range gs.allocs {
			rec, ok := d.recs.get(p)
			if !ok || rec.state() != stateGraphOwned {
				continue // live: the user's free decides; deferred: its capture does
			}
			if ran {
				d.queueFreeLocked(p, rec)
			} else {
				d.dropLocked(p, rec)
			}
		}
		gs.allocs = nil
		for _, p := range gs.deferred {
			rec, ok := d.recs.get(p)
			if !ok || rec.state() != stateDeferred {
				continue
			}
			g := rec.graph()
			switch {
			case g == nil || (g.destroyed && g.launched.Load()):
				d.queueFreeLocked(p, rec)
			case g.destroyed:
				d.dropLocked(p, rec)
			default:
				// Its allocating graph still exists: it owns it now.
				rec.edit().state = stateGraphOwned
				d.recs.set(p, rec)
				g.allocs[p] = struct{}{}
			}
		}
		gs.deferred = nil
	}
}

// queueFreeLocked queues rec for a free on the free stream. mu must be held.
func (d *device) queueFreeLocked(p gpumem.Ptr, rec record) {
	rec.edit().state = stateGraphFreeing
	d.recs.set(p, rec)
	d.toFree = append(d.toFree, p)
	d.hasWork.Store(true)
}

// dropLocked forgets a graph allocation of a graph that never ran: it never
// existed, so there is nothing to free. mu must be held.
func (d *device) dropLocked(p gpumem.Ptr, rec record) {
	d.recs.del(p)
	d.pending.Add(-int64(rec.size))
	d.noteReleasedLocked(rec.size)
	d.ctr.GraphDropped++
}

// flushGraphFrees frees, on the free stream, the records that destroyed
// graphs released. A record whose using streams are being captured waits
// for a later call; failures are kept for a later call and reported.
func (d *device) flushGraphFrees() error {
	d.mu.Lock()
	list := d.toFree
	d.toFree = nil
	d.hasWork.Store(false)
	d.mu.Unlock()
	var errs []error
	var retry []gpumem.Ptr
	for _, p := range list {
		d.mu.Lock()
		rec, ok := d.recs.get(p)
		if !ok || rec.state() != stateGraphFreeing {
			d.mu.Unlock()
			continue
		}
		d.recs.del(p)
		d.mu.Unlock()
		streams := d.live(using(&rec, d.id, rec.freeOn()))
		busy, err := d.anyCapturing(streams)
		if err == nil && !busy {
			err = d.freeCross(p, rec.size, rec.freeOn(), streams)
		}
		if err != nil || busy {
			if err != nil {
				errs = append(errs, err)
			}
			d.mu.Lock()
			d.recs.set(p, rec)
			d.mu.Unlock()
			retry = append(retry, p)
			continue
		}
		d.mu.Lock()
		d.ctr.GraphReleased++
		d.mu.Unlock()
	}
	if len(retry) > 0 {
		d.mu.Lock()
		d.toFree = append(d.toFree, retry...)
		d.hasWork.Store(true)
		d.mu.Unlock()
	}
	return errors.Join(errs...)
}

// live drops from streams those destroyed since they were seen: they have
// no work left for a free to wait for (the stream a graph's memory was freed
// on included, which may be gone by the time the graph is).
func (d *device) live(streams []gpumem.Stream) []gpumem.Stream {
	out := streams[:0]
	for _, u := range streams {
		if u.IsDefault() || !streamcheck.Gone(d.b, u) {
			out = append(out, u)
		}
	}
	return out
}

// streamCapture is s's capture status. A stream destroyed since the
// allocator saw it captures nothing: a graph outlives the stream it was
// captured on, and a free the streams it waits for.
func (d *device) streamCapture(s gpumem.Stream) (gpumem.CaptureInfo, error) {
	ci, err := d.b.StreamCaptureInfo(s)
	if err != nil && streamcheck.Gone(d.b, s) {
		return gpumem.CaptureInfo{Status: gpumem.CaptureNone}, nil
	}
	return ci, err
}

func (d *device) anyCapturing(streams []gpumem.Stream) (bool, error) {
	for _, u := range streams {
		if u.IsDefault() {
			continue
		}
		ci, err := d.streamCapture(u)
		if err != nil {
			return false, fmt.Errorf("asyncpool: capture status of %v: %w", u, err)
		}
		if ci.Status == gpumem.CaptureActive {
			return true, nil
		}
	}
	return false, nil
}

// captureOpen reports whether a capture the allocator knows of is open on d.
func (d *device) captureOpen() (bool, error) {
	if d.hookCaps.Load() > 0 {
		return true, nil
	}
	d.mu.Lock()
	type probe struct {
		s  gpumem.Stream
		id uint64
	}
	var probes []probe
	for _, gs := range d.graphs {
		for _, s := range gs.streams {
			probes = append(probes, probe{s, gs.id})
		}
	}
	d.mu.Unlock()
	for _, pr := range probes {
		ci, err := d.streamCapture(pr.s)
		if err != nil {
			return false, fmt.Errorf("asyncpool: capture status of %v: %w", pr.s, err)
		}
		if ci.Status == gpumem.CaptureActive && ci.ID == pr.id {
			return true, nil
		}
	}
	return false, nil
}

// BeginCapture synchronizes the free stream of s's device, so that no free
// is pending when the capture starts, and begins capturing s. Use it with
// EndCapture, from the same goroutine for a global or thread-local capture
// (see gpumem.Graphs: the goroutine stays on its OS thread until then); with
// CaptureCheckHooks they are how the allocator learns of captures.
func (a *Allocator) BeginCapture(s gpumem.Stream, mode gpumem.CaptureMode) error {
	if a == nil {
		return errNil("BeginCapture")
	}
	d, err := a.device(s.Device)
	if err != nil {
		return err
	}
	d.life.RLock()
	defer d.life.RUnlock()
	if d.closed {
		return errClosed
	}
	d.processReleased()
	_ = d.flushGraphFrees() // kept for later on failure
	if err := d.syncFree(); err != nil {
		return err
	}
	if err := a.b.StreamBeginCapture(s, mode); err != nil {
		return fmt.Errorf("asyncpool: beginning capture on %v: %w", s, err)
	}
	d.mu.Lock()
	if !d.hooked[s] {
		d.hooked[s] = true
		d.hookCaps.Add(1)
	}
	d.mu.Unlock()
	return nil
}

// EndCapture ends the capture of s begun with BeginCapture and returns the
// graph. Memory the graph owns is freed after the graph (and every
// executable graph made from it) is destroyed.
func (a *Allocator) EndCapture(s gpumem.Stream) (gpumem.Graph, error) {
	if a == nil {
		return gpumem.Graph{}, errNil("EndCapture")
	}
	d, err := a.device(s.Device)
	if err != nil {
		return gpumem.Graph{}, err
	}
	d.life.RLock()
	defer d.life.RUnlock()
	if d.closed {
		return gpumem.Graph{}, errClosed
	}
	g, err := a.b.StreamEndCapture(s)
	d.unhook(s, err)
	if d.unheld.Load() > 0 {
		d.retainLater()
	}
	if err != nil {
		return g, fmt.Errorf("asyncpool: ending capture on %v: %w", s, err)
	}
	d.processReleased()
	return g, nil
}

// unhook forgets the capture of s that BeginCapture began once it is over:
// when EndCapture succeeded, or failed and s is no longer capturing (an
// invalidated capture ends with an error). A failed EndCapture of a stream
// that BeginCapture did not begin, or whose capture goes on, leaves the
// count of open captures as it was.
func (d *device) unhook(s gpumem.Stream, endErr error) {
	if endErr != nil {
		if ci, err := d.b.StreamCaptureInfo(s); err == nil && ci.Status != gpumem.CaptureNone {
			return
		}
	}
	d.mu.Lock()
	if d.hooked[s] {
		delete(d.hooked, s)
		d.hookCaps.Add(-1)
	}
	d.mu.Unlock()
}
