package native

import (
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/callback"
	"github.com/gpumem/gpumem/internal/symtab"
)

// LaunchHostFunc runs fn on a runtime thread when s reaches this point.
func (b *Backend) LaunchHostFunc(s gpumem.Stream, fn func()) error {
	if fn == nil {
		return fmt.Errorf("gpumem: %s: LaunchHostFunc: nil function: %w", b.d.Name, gpumem.ErrInvalidValue)
	}
	if err := b.deadStream(s); err != nil {
		return err
	}
	if b.fns[symtab.LaunchHostFunc] == 0 {
		return b.notSupported(symtab.LaunchHostFunc)
	}
	// Outside a capture the function runs once. Captured into a graph it
	// runs at every launch, so its registration must live as long as the
	// graph: a user object retained by the graph unregisters it when the
	// graph (and every instance of it) is destroyed.
	info, err := b.StreamCaptureInfo(s)
	if err != nil && !errors.Is(err, gpumem.ErrNotSupported) {
		return err
	}
	once := info.Status != gpumem.CaptureActive
	id := callback.Register(fn, once)
	if err := b.call(s.Device, symtab.LaunchHostFunc, s.Handle, callback.Pointer(), id, 0, 0, 0); err != nil {
		callback.Unregister(id)
		return err
	}
	if once {
		return nil
	}
	o, err := b.UserObjectCreate(s.Device, func() { callback.Unregister(id) })
	if err != nil {
		if errors.Is(err, gpumem.ErrNotSupported) {
			// No user objects (HIP before 6): the registration stays for
			// the life of the process, one small map entry per captured
			// host function.
			return nil
		}
		return err
	}
	if err := b.GraphRetainUserObject(info.Graph, o, 1, true); err != nil {
		b.UserObjectRelease(o, 1)
		return err
	}
	return nil
}

// StreamBeginCapture starts capturing s into a graph.
func (b *Backend) StreamBeginCapture(s gpumem.Stream, mode gpumem.CaptureMode) error {
	// CUstreamCaptureMode and hipStreamCaptureMode: GLOBAL 0, THREAD_LOCAL 1, RELAXED 2.
	if mode < gpumem.CaptureModeGlobal || mode > gpumem.CaptureModeRelaxed {
		return fmt.Errorf("gpumem: %s: unknown capture mode %d: %w", b.d.Name, int(mode), gpumem.ErrInvalidValue)
	}
	if err := b.deadStream(s); err != nil {
		return err
	}
	// A global or thread-local capture must end on this OS thread: the
	// goroutine stays on it until it ends the capture.
	err := b.pins.Begin(s.Handle, mode, func() error {
		return b.call(s.Device, symtab.StreamBeginCapture, s.Handle, uintptr(mode), 0, 0, 0, 0)
	})
	if err == nil {
		b.captureBegun(s)
	}
	return err
}

// StreamEndCapture ends the capture of s and returns the graph. A capture
// begun in global or thread-local mode must be ended by the goroutine that
// began it (which StreamBeginCapture keeps on its OS thread until then);
// from another goroutine the vendor refuses (WRONG_THREAD) and drops the
// capture.
func (b *Backend) StreamEndCapture(s gpumem.Stream) (gpumem.Graph, error) {
	if err := b.deadStream(s); err != nil {
		return gpumem.Graph{}, err
	}
	c := getCell()
	defer putCell(c)
	r, preFailed, err := b.invoke(s.Device, symtab.StreamEndCapture, s.Handle, c.addr(0), 0, 0, 0, 0)
	if err != nil {
		return gpumem.Graph{}, err
	}
	if !preFailed {
		b.pins.End(s.Handle, int32(r))
		b.captureEnded(s, r)
	}
	if int32(r) != 0 {
		return gpumem.Graph{}, b.failed(symtab.StreamEndCapture, r, preFailed)
	}
	b.graphs.made(uintptr(c[0]))
	return gpumem.Graph{Handle: uintptr(c[0]), Device: s.Device}, nil
}

// StreamCaptureInfo reports the capture status of s.
func (b *Backend) StreamCaptureInfo(s gpumem.Stream) (gpumem.CaptureInfo, error) {
	if err := b.deadStream(s); err != nil {
		return gpumem.CaptureInfo{}, err
	}
	c := getCell()
	defer putCell(c)
	// Allocators ask this on every allocation and free: the plain status
	// (cuStreamIsCapturing) is the cheap question, and the graph is asked
	// for only while a capture is active.
	if b.fns[symtab.StreamIsCapturing] != 0 {
		if err := b.call(s.Device, symtab.StreamIsCapturing, s.Handle, c.addr(0), 0, 0, 0, 0); err != nil {
			return gpumem.CaptureInfo{}, err
		}
		if st := gpumem.CaptureStatus(c.i32(0)); st != gpumem.CaptureActive {
			return gpumem.CaptureInfo{Status: st}, nil
		}
		c[0] = 0
	}
	if err := b.call(s.Device, symtab.StreamCaptureInfo, s.Handle, c.addr(0), c.addr(1), c.addr(2), 0, 0); err != nil {
		return gpumem.CaptureInfo{}, err
	}
	// CUstreamCaptureStatus / hipStreamCaptureStatus: NONE 0, ACTIVE 1, INVALIDATED 2.
	info := gpumem.CaptureInfo{Status: gpumem.CaptureStatus(c.i32(0))}
	if info.Status == gpumem.CaptureActive {
		info.ID = c[1]
		info.Graph = gpumem.Graph{Handle: uintptr(c[2]), Device: s.Device}
		// The capture's graph is a live graph, whatever this backend
		// destroyed at the same address before (the library reuses
		// handles): recorded so, so that GraphRetainUserObject and the
		// graph's later uses are not refused.
		if b.graphs.dead.Load() != 0 {
			b.graphs.made(info.Graph.Handle)
		}
	}
	return info, nil
}

// GraphInstantiate instantiates a graph.
func (b *Backend) GraphInstantiate(g gpumem.Graph) (gpumem.GraphExec, error) {
	if err := b.refuseDead(&b.graphs, "graph", g.Handle); err != nil {
		return gpumem.GraphExec{}, err
	}
	c := getCell()
	defer putCell(c)
	if err := b.call(g.Device, symtab.GraphInstantiate, c.addr(0), g.Handle, 0, 0, 0, 0); err != nil {
		return gpumem.GraphExec{}, err
	}
	b.execs.made(uintptr(c[0]))
	return gpumem.GraphExec{Handle: uintptr(c[0]), Device: g.Device}, nil
}

// GraphLaunch launches an instantiated graph on s.
func (b *Backend) GraphLaunch(ge gpumem.GraphExec, s gpumem.Stream) error {
	if err := b.deadStream(s); err != nil {
		return err
	}
	if err := b.refuseDead(&b.execs, "instantiated graph", ge.Handle); err != nil {
		return err
	}
	return b.call(s.Device, symtab.GraphLaunch, ge.Handle, s.Handle, 0, 0, 0, 0)
}

// GraphExecDestroy destroys an instantiated graph. One this backend
// destroyed is refused without reaching the library.
func (b *Backend) GraphExecDestroy(ge gpumem.GraphExec) error {
	if err := b.refuseDead(&b.execs, "instantiated graph", ge.Handle); err != nil {
		return err
	}
	if err := b.call(ge.Device, symtab.GraphExecDestroy, ge.Handle, 0, 0, 0, 0, 0); err != nil {
		return err
	}
	b.execs.destroyed(ge.Handle)
	return nil
}

// GraphDestroy destroys a graph. One this backend destroyed is refused
// without reaching the library.
func (b *Backend) GraphDestroy(g gpumem.Graph) error {
	if err := b.refuseDead(&b.graphs, "graph", g.Handle); err != nil {
		return err
	}
	if err := b.call(g.Device, symtab.GraphDestroy, g.Handle, 0, 0, 0, 0, 0); err != nil {
		return err
	}
	b.graphs.destroyed(g.Handle)
	return nil
}

// UserObjectCreate makes a user object whose destructor runs fn once. With
// Dialect.DeferDestructors (HIP) fn runs on a new goroutine after the
// runtime's destructor call returns, never inside the releasing call.
func (b *Backend) UserObjectCreate(dev int, fn func()) (gpumem.UserObject, error) {
	if fn == nil {
		return gpumem.UserObject{}, fmt.Errorf("gpumem: %s: UserObjectCreate: nil function: %w", b.d.Name, gpumem.ErrInvalidValue)
	}
	if b.fns[symtab.UserObjectCreate] == 0 {
		return gpumem.UserObject{}, b.notSupported(symtab.UserObjectCreate)
	}
	if b.d.DeferDestructors {
		// The runtime calls the destructor inside the releasing call under
		// its own lock: run fn outside it, so that fn may call the runtime.
		run := fn
		fn = func() { go run() }
	}
	id := callback.Register(fn, true)
	c := getCell()
	defer putCell(c)
	if err := b.call(dev, symtab.UserObjectCreate, c.addr(0), id, callback.Pointer(), 1, UserObjectNoDestructSync, 0); err != nil {
		callback.Unregister(id)
		return gpumem.UserObject{}, err
	}
	return gpumem.UserObject{Handle: uintptr(c[0]), Device: dev}, nil
}

// UserObjectRelease drops count references to o.
func (b *Backend) UserObjectRelease(o gpumem.UserObject, count uint32) error {
	return b.call(o.Device, symtab.UserObjectRelease, o.Handle, uintptr(count), 0, 0, 0, 0)
}

// GraphRetainUserObject gives g count references to o.
func (b *Backend) GraphRetainUserObject(g gpumem.Graph, o gpumem.UserObject, count uint32, move bool) error {
	if err := b.refuseDead(&b.graphs, "graph", g.Handle); err != nil {
		return err
	}
	var flags uintptr
	if move {
		flags = GraphUserObjectMove
	}
	return b.call(g.Device, symtab.GraphRetainUserObject, g.Handle, o.Handle, uintptr(count), flags, 0, 0)
}
