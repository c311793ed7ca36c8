package native

import (
	"sync"
	"sync/atomic"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/capthread"
	"github.com/gpumem/gpumem/internal/symtab"
)

// Backend is the shared gpumem.Backend. Its fields are set during Open and
// read-only afterwards, except the closed flag and the error-name cache.
type Backend struct {
	d   *Dialect
	lib Library

	// What every call reads comes first, together: whether the backend is
	// closed, the device count, and how each op is called.
	closed atomic.Bool
	nDev   int
	how    [symtab.NumOps]uint8 // howDirect, howShort: the table's rows for this vendor, read at Open

	fns     [symtab.NumOps]uintptr
	missing [symtab.NumOps]error // why fns[op] is 0

	pre      uintptr   // make-current function
	cur      []uintptr // per device: argument to pre (CUcontext, or ordinal)
	handle   []int32   // per device: the vendor's device handle (CUdevice, ordinal)
	names    sync.Map  // int -> string
	locByVal bool      // Advise/Prefetch take a location by value (CUDA 12.2+)
	pins     capthread.Pins

	maps      mappings  // HIP: what MemMap mapped where (Dialect.UnmapByMapping)
	reserveG  sync.Once // computes reserveGr (Dialect.ReserveAligned)
	reserveGr uint64
	poolsSet  sync.Map      // pool handle -> struct{}: Dialect.PoolSetup ran
	streams   sync.Map      // stream handle -> streamState: made or destroyed through this backend
	epoch     atomic.Uint64 // StreamEpoch: incremented on StreamDestroy and Close
	// deadStreams counts the handles in streams recorded destroyed; the
	// books are the handles of each other kind made, live or destroyed
	// (handles.go).
	deadStreams atomic.Int64
	events      handleBook
	graphs      handleBook // StreamEndCapture's, until GraphDestroy
	execs       handleBook // GraphInstantiate's, until GraphExecDestroy
	modules     handleBook // ModuleLoadData's, until ModuleUnload
	pools       handleBook // MemPoolCreate's, until MemPoolDestroy
	params      paramBook  // parameter counts of the kernels of ModuleFunction

	stopMu  sync.Mutex // held by Close while it calls Dialect.Stop
	stopped bool       // Dialect.Stop succeeded (or there is none)

	// State the dialect keeps (driver version, ...).
	DriverVersion  int
	RuntimeVersion int
	// Released is the dialect's record, per device, of what its Stop has
	// released (CUDA: the primary context), so that a Stop retried after
	// a failure releases only what is left.
	Released []bool
}

var (
	_ gpumem.Backend       = (*Backend)(nil)
	_ gpumem.StreamChecker = (*Backend)(nil)
	_ gpumem.ParamReporter = (*Backend)(nil)
	_ gpumem.TargetNamer   = (*Backend)(nil)
)

// Name returns "cuda" or "hip".
func (b *Backend) Name() string { return b.d.Name }

// Library returns the path of the loaded library.
func (b *Backend) Library() string { return b.lib.Path() }

// Version returns the library's versions.
func (b *Backend) Version() (gpumem.Version, error) {
	if b.closed.Load() {
		return gpumem.Version{}, b.closedErr()
	}
	return b.d.Versions(b)
}

// ErrorName returns the library's name for code, cached per code.
func (b *Backend) ErrorName(code int) string {
	if v, ok := b.names.Load(code); ok {
		return v.(string)
	}
	n := b.d.ErrorName(b, code)
	b.names.Store(code, n)
	return n
}

// Close releases the devices' contexts. The library stays mapped: vendor
// runtimes keep threads of their own that may still run code in it. After
// Close every method returns an error matching gpumem.ErrClosed. A Close
// whose release failed returns the error, and the next Close tries again
// what was not released; once all is released, Close returns nil.
func (b *Backend) Close() error {
	if !b.closed.Swap(true) {
		b.epoch.Add(1)
	}
	b.stopMu.Lock()
	defer b.stopMu.Unlock()
	if b.stopped || b.d.Stop == nil {
		return nil
	}
	if err := b.d.Stop(b); err != nil {
		return err
	}
	b.stopped = true
	return nil
}
