// Package callback lets C code run Go functions through a single C function
// pointer.
//
// purego.NewCallback can make only about 2000 C-callable functions in a
// process and never frees them, so the project makes exactly one, lazily:
// Pointer returns a C function of type void (*)(void *userData). The
// userData a caller hands to C together with that pointer is an id from
// Register, which maps it to a Go func. This is how host functions
// (cuLaunchHostFunc, hipLaunchHostFunc) and user-object destructors
// (cuUserObjectCreate) run Go code; drivers call them on their own threads.
//
// A func registered with once set is unregistered when it first runs, so a
// host function launched once leaves nothing behind; others stay until
// Unregister. Ids are never reused, so a late or repeated call with a stale
// id finds nothing and does nothing. A panic in a registered func is
// recovered and handed to the panic handler (by default: printed to standard
// error with its stack), because it must not unwind into the driver's C
// frames.
//
// While any func is registered, the project's short foreign calls are
// ordinary ones (internal/ccall.HoldShort): a driver thread that calls a
// registered func enters Go, and a short call must never wait for such a
// thread. The thread itself holds them off too, from before it enters Go
// until after it has left (ccall.HeldCallback), which covers a once func's
// way out after its registration is gone and a call with a stale id.
package callback

import (
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/ebitengine/purego"

	"github.com/gpumem/gpumem/internal/ccall"
)

type entry struct {
	fn   func()
	once bool
}

var (
	ptrOnce sync.Once
	ptr     uintptr

	mu      sync.Mutex
	lastID  uintptr // ids start at 1: userData NULL is never a valid id
	entries = map[uintptr]entry{}

	panicHandler atomic.Pointer[func(value any, stack []byte)]
	stray        atomic.Uint64
)

// Pointer returns the C function pointer, of type void (*)(void *userData),
// that runs the func registered under userData. It is created on first use
// and stays valid for the life of the process.
//
// The pointer is ccall.HeldCallback's wrapper around the purego callback:
// the calling thread holds short calls off from before it enters Go until
// after it has left, so that no short call waits for it on its way (see the
// package documentation).
func Pointer() uintptr {
	ptrOnce.Do(func() {
		ptr = purego.NewCallback(dispatch)
		if held, ok := ccall.HeldCallback(ptr); ok {
			ptr = held
		}
	})
	return ptr
}

// Register records fn and returns the id to pass to C as userData together
// with Pointer(). With once, the registration is removed when fn first runs;
// otherwise it stays until Unregister. A nil fn registers a no-op.
func Register(fn func(), once bool) uintptr {
	if fn == nil {
		fn = func() {}
	}
	// The hold is taken before C can learn the id, and released only
	// once C can no longer call it (run once, or unregistered).
	ccall.HoldShort()
	mu.Lock()
	defer mu.Unlock()
	lastID++
	entries[lastID] = entry{fn: fn, once: once}
	return lastID
}

// Unregister removes the registration id, if it is still there. A C call
// with id afterwards does nothing. Unregistering twice, or an id never
// registered, is harmless.
func Unregister(id uintptr) {
	mu.Lock()
	_, ok := entries[id]
	delete(entries, id)
	mu.Unlock()
	if ok {
		ccall.ReleaseShort()
	}
}

// Pending reports how many funcs are registered and have been neither run
// (for once registrations) nor unregistered: the number that would leak if
// the program stopped now.
func Pending() int {
	mu.Lock()
	defer mu.Unlock()
	return len(entries)
}

// Stray reports how many C calls came with an id that was not registered
// (already run, unregistered, or never issued).
func Stray() uint64 { return stray.Load() }

// SetPanicHandler installs h to receive the value and stack of a panic
// recovered from a registered func, and returns the previous handler. A nil
// h restores the default, which prints to standard error. h runs on the
// thread that called back (possibly a driver thread) and must not panic.
func SetPanicHandler(h func(value any, stack []byte)) (previous func(value any, stack []byte)) {
	var old *func(any, []byte)
	if h == nil {
		old = panicHandler.Swap(nil)
	} else {
		old = panicHandler.Swap(&h)
	}
	if old == nil {
		return nil
	}
	return *old
}

func reportPanic(value any, stack []byte) {
	if h := panicHandler.Load(); h != nil {
		(*h)(value, stack)
		return
	}
	fmt.Fprintf(os.Stderr, "gpumem: panic in a callback from C (recovered): %v\n%s", value, stack)
}

// dispatch is the Go side of Pointer: it runs on whatever thread C calls
// from, looks up id and runs its func outside the lock.
func dispatch(id uintptr) {
	mu.Lock()
	e, ok := entries[id]
	if ok && e.once {
		delete(entries, id)
	}
	mu.Unlock()
	if !ok {
		stray.Add(1)
		return
	}
	if e.once {
		// This thread is in Go already; C will not call the id again.
		defer ccall.ReleaseShort()
	}
	run(e.fn)
}

func run(fn func()) {
	defer func() {
		if v := recover(); v != nil {
			reportPanic(v, debug.Stack())
		}
	}()
	fn()
}
