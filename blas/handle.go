package blas

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/bind"
	"github.com/gpumem/gpumem/sim"
)

// engine runs checked calls: the vendor library through bind (native.go),
// or Go kernels on the simulator (simengine.go). The Handle's mutex is held
// around every method.
type engine interface {
	// library names what runs the calls ("cublas 12.4.5 (libcublas.so.12)", "sim").
	library() string
	setStream(s gpumem.Stream) error
	// setWorkspace hands the library size bytes at p (ErrNotSupported
	// where it takes none).
	setWorkspace(p gpumem.Ptr, size uint64) error
	run(c *call) error
	destroy() error
}

// Handle is a BLAS handle on one device of a backend: the library's handle
// (cublasHandle_t, hipblasHandle_t, rocblas_handle), the stream its calls
// are queued on and its workspace. Its methods are safe for concurrent
// use: a mutex holds the stream, the pointer mode and the call together,
// as the libraries' handles need (their stream and pointer mode are state
// of the handle, not of the call).
type Handle struct {
	mu     sync.Mutex
	b      gpumem.Backend
	dev    int
	stream gpumem.Stream
	eng    engine
	ws     workspaces
	closed bool
	gone   bool // the engine is destroyed: Close does not destroy it again
	c      call // the call being made, under mu: no allocation per call
}

// Option configures Open.
type Option func(*options)

type options struct {
	stream   gpumem.Stream
	hasStrm  bool
	wsRes    gpumem.Resource
	wsSize   uint64
	wsMax    int
	wsMaxSet bool
	path     string
}

// WithStream queues the handle's calls on s (a stream of the handle's
// device; the default stream otherwise). SetStream changes it later.
func WithStream(s gpumem.Stream) Option {
	return func(o *options) { o.stream, o.hasStrm = s, true }
}

// WithWorkspace gives the library workspaces of size bytes from r (any
// gpumem allocator: the caching allocator, a pool) in place of the memory
// the library would otherwise set aside itself: one for each stream the
// handle queues calls on, allocated on that stream when the handle first
// uses it (at Open for the first) and returned, ordered on it, at Close,
// by ReleaseStream, or when more streams than WithWorkspaceStreams allows
// have one. A workspace is written by the library's kernels, so two
// streams never share one: kernels still running on one stream cannot race
// with those of the next. cuBLAS (11+), rocBLAS and hipBLAS 3.0+ take one;
// with another library Open fails with an error matching
// gpumem.ErrNotSupported. The simulator accepts and ignores it.
func WithWorkspace(r gpumem.Resource, size uint64) Option {
	return func(o *options) { o.wsRes, o.wsSize = r, size }
}

// WithWorkspaceStreams keeps the workspaces of at most n streams (n >= 1;
// DefaultWorkspaceStreams without it): when the handle moves to a stream
// beyond n, the workspace of the stream it used least recently goes back
// to its allocator, ordered on that stream, and that stream gets a new one
// if the handle comes back to it.
func WithWorkspaceStreams(n int) Option {
	return func(o *options) { o.wsMax, o.wsMaxSet = n, true }
}

// WithLibrary loads the BLAS library from path (a file or a soname)
// instead of the environment variable of its declaration
// (GPUMEM_CUBLAS_LIBRARY, GPUMEM_HIPBLAS_LIBRARY, GPUMEM_ROCBLAS_LIBRARY) and
// the usual file names. On HIP the file may be hipBLAS or rocBLAS.
func WithLibrary(path string) Option { return func(o *options) { o.path = path } }

// Open creates a BLAS handle on device dev of backend b. On CUDA it loads
// cuBLAS; on HIP hipBLAS, or rocBLAS where hipBLAS is absent; the library
// is loaded once per process and file. On the simulator (a *sim.GPU) the
// routines run as Go kernels on the handle's stream, so programs that call
// them are tested with no GPU. Another backend, one that runs no vendor
// library, is an error matching gpumem.ErrNotSupported; a library that does
// not load is a *gpumem.LoadError (gpumem.ErrLibraryNotFound), and a device
// the library cannot use is the library's status (cuBLAS's
// NOT_INITIALIZED matches gpumem.ErrNoDevice).
func Open(b gpumem.Backend, dev int, opts ...Option) (*Handle, error) {
	if b == nil {
		return nil, fmt.Errorf("gpumem: blas: Open: nil backend: %w", gpumem.ErrInvalidValue)
	}
	var o options
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	n, err := b.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("gpumem: blas: Open: %w", err)
	}
	if dev < 0 || dev >= n {
		return nil, fmt.Errorf("gpumem: blas: Open: device %d of %d: %w", dev, n, gpumem.ErrInvalidValue)
	}
	stream := gpumem.Stream{Device: dev}
	if o.hasStrm {
		if o.stream.Device != dev {
			return nil, fmt.Errorf("gpumem: blas: Open: %v is not a stream of device %d: %w", o.stream, dev, gpumem.ErrInvalidValue)
		}
		stream = o.stream
	}
	if o.wsRes != nil && o.wsSize == 0 {
		return nil, fmt.Errorf("gpumem: blas: Open: a workspace of 0 bytes: %w", gpumem.ErrInvalidValue)
	}
	if o.wsRes == nil && o.wsSize != 0 {
		return nil, fmt.Errorf("gpumem: blas: Open: a workspace of %d bytes from a nil resource: %w", o.wsSize, gpumem.ErrInvalidValue)
	}
	if o.wsMaxSet && o.wsMax < 1 {
		return nil, fmt.Errorf("gpumem: blas: Open: workspaces for %d streams; at least 1: %w", o.wsMax, gpumem.ErrInvalidValue)
	}
	if !o.wsMaxSet {
		o.wsMax = DefaultWorkspaceStreams
	}
	eng, err := newEngine(b, dev, o.path)
	if err != nil {
		return nil, err
	}
	h := &Handle{b: b, dev: dev, stream: gpumem.Stream{Device: dev}, eng: eng}
	if !stream.IsDefault() {
		if err := eng.setStream(stream); err != nil {
			_ = eng.destroy()
			return nil, err
		}
		h.stream = stream
	}
	h.ws = workspaces{r: o.wsRes, size: o.wsSize, max: o.wsMax}
	if h.ws.enabled() {
		p, _, err := h.ws.get(stream)
		if err != nil {
			_ = eng.destroy()
			return nil, fmt.Errorf("gpumem: blas: Open: workspace: %w", err)
		}
		if err := eng.setWorkspace(p, o.wsSize); err != nil {
			_ = eng.destroy()
			_ = o.wsRes.Deallocate(p, stream)
			return nil, err
		}
		h.ws.use(stream, p)
	}
	return h, nil
}

// newEngine picks the engine for b: the vendor library when b runs one,
// Go kernels on the simulator.
func newEngine(b gpumem.Backend, dev int, path string) (engine, error) {
	ctx, err := bind.ContextOf(b, dev)
	if err == nil {
		return openNative(b, ctx, path)
	}
	if errors.Is(err, gpumem.ErrNotSupported) {
		if g, ok := b.(*sim.GPU); ok {
			return openSim(g, dev)
		}
	}
	return nil, fmt.Errorf("gpumem: blas: Open on backend %s: %w", b.Name(), err)
}

// Device returns the handle's device (-1 for a nil handle).
func (h *Handle) Device() int {
	if h == nil {
		return -1
	}
	return h.dev
}

// Library describes what runs the handle's calls: the library, its version
// and file, or "sim" ("" for a nil handle).
func (h *Handle) Library() string {
	if h == nil {
		return ""
	}
	return h.eng.library()
}

// Stream returns the stream the handle's calls are queued on.
func (h *Handle) Stream() gpumem.Stream {
	if h.lock("Stream") != nil {
		return gpumem.Stream{}
	}
	defer h.mu.Unlock()
	return h.stream
}

// lock takes h's mutex, or fails for a nil handle.
func (h *Handle) lock(routine string) error {
	if h == nil {
		return fmt.Errorf("gpumem: blas: %s on a nil handle: %w", routine, gpumem.ErrInvalidValue)
	}
	h.mu.Lock()
	return nil
}

// SetStream queues the handle's later calls on s, a stream of the handle's
// device. With WithWorkspace, the library is given s's own workspace,
// allocated on s the first time the handle uses it (see
// WithWorkspaceStreams). When SetStream fails, the handle's calls stay on
// the stream they were on, with its workspace.
func (h *Handle) SetStream(s gpumem.Stream) error {
	if err := h.lock("SetStream"); err != nil {
		return err
	}
	defer h.mu.Unlock()
	if h.closed {
		return h.closedErr("SetStream")
	}
	if s.Device != h.dev {
		return invalid("SetStream", "%v is not a stream of device %d", s, h.dev)
	}
	if s == h.stream {
		return nil
	}
	var p gpumem.Ptr
	var fresh bool
	if h.ws.enabled() {
		var err error
		if p, fresh, err = h.ws.get(s); err != nil {
			return fmt.Errorf("gpumem: blas: SetStream: workspace: %w", err)
		}
	}
	err := h.eng.setStream(s)
	if err == nil && h.ws.enabled() {
		if err = h.eng.setWorkspace(p, h.ws.size); err != nil {
			// Back to the previous stream and its workspace, as before
			// the call; if the library refuses that, the handle follows
			// it onto s.
			if h.eng.setStream(h.stream) != nil {
				h.stream = s
				h.ws.use(s, p)
				return err
			}
			if i := h.ws.find(h.stream); i >= 0 {
				_ = h.eng.setWorkspace(h.ws.kept[i].p, h.ws.size)
			}
		}
	}
	if err != nil {
		if fresh {
			_ = h.ws.r.Deallocate(p, s)
		}
		return err
	}
	h.stream = s
	if h.ws.enabled() {
		h.ws.use(s, p)
	}
	return nil
}

// ReleaseStream returns the workspace the handle keeps for s, if any, to
// its allocator, ordered on s: call it before destroying a stream the
// handle has queued calls on, once the handle is on another stream. s
// being the handle's current stream is an error matching
// gpumem.ErrInvalidValue. Without WithWorkspace, or with no workspace
// kept for s, it does nothing.
func (h *Handle) ReleaseStream(s gpumem.Stream) error {
	if err := h.lock("ReleaseStream"); err != nil {
		return err
	}
	defer h.mu.Unlock()
	if h.closed {
		return h.closedErr("ReleaseStream")
	}
	if s == h.stream {
		return invalid("ReleaseStream", "%v is the handle's stream; SetStream to another first", s)
	}
	if i := h.ws.find(s); i >= 0 {
		return h.ws.release(i)
	}
	return nil
}

// Close destroys the library's handle and returns the workspaces to their
// allocator, each ordered on its stream. Calls after Close fail with an
// error matching gpumem.ErrClosed. A Close that fails keeps what it could
// not release, and the next Close tries again; after one that succeeded, a
// second Close does nothing.
func (h *Handle) Close() error {
	if err := h.lock("Close"); err != nil {
		return err
	}
	defer h.mu.Unlock()
	h.closed = true
	var err error
	if !h.gone {
		if err = h.eng.destroy(); err == nil {
			h.gone = true
		}
	}
	if derr := h.ws.releaseAll(); derr != nil && err == nil {
		err = fmt.Errorf("gpumem: blas: Close: %w", derr)
	}
	return err
}

func (h *Handle) closedErr(routine string) error {
	return fmt.Errorf("gpumem: blas: %s: handle is closed: %w", routine, gpumem.ErrClosed)
}

// do checks the call in h.c and runs it; h.mu held.
func (h *Handle) do() error {
	if h.closed {
		return h.closedErr(h.c.routine)
	}
	if err := h.c.check(); err != nil {
		return err
	}
	return h.eng.run(&h.c)
}
