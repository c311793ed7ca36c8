package ccall

import (
	"os"
	"sync"
	"sync/atomic"
	"unsafe"
)

// # Short calls
//
// A call through runtime.cgocall costs about 30-60 ns more than the same
// call from C, most of it spent telling the scheduler that the goroutine
// is in a system call and taking its processor back afterwards. That is
// what lets the scheduler run other goroutines while C blocks, and it is
// wasted on a function that returns in a few hundred nanoseconds and never
// waits. Short6 and ShortPre6 call such a function without it: the
// goroutine is pinned to its processor (runtime.procPin, so it cannot be
// preempted or moved), the OS thread switches to a C stack of that
// processor's own, calls, switches back and unpins. A call costs about 5 ns
// more than C (BenchmarkShort6) where Call6 costs about 30 more on the same
// machine (BenchmarkCall1).
//
// What the caller gives up, for the length of the call:
//   - The processor runs nothing else, and a garbage collection that must
//     stop the world waits for the call to return. So a short call must
//     return promptly: no wait on the device, no sleep, no lock that
//     another thread may hold for long. The stream-ordered pool calls
//     (cuMemAllocFromPoolAsync, cuMemFreeAsync) qualify; their slowest
//     case, a pool growing by a fresh physical allocation, takes tens to
//     hundreds of microseconds, about one garbage collection's pause.
//   - The function must never call back into Go, on this thread or
//     another one that this call then waits for. A thread of C entering Go
//     needs a processor; while the world is being stopped it waits for
//     one, and the world cannot stop while a short call runs: if the short
//     call waited for that thread (a lock the driver holds around a host
//     function it runs, say), neither would move. So short calls are made
//     only while no C-callable Go function can be called: HoldShort and
//     ReleaseShort bracket every registration of internal/callback, the
//     project's only way of handing C a Go function, and while any is
//     held Short6 and ShortPre6 are Call6 and CallPre6. A program that
//     hands C Go functions by other means (purego.NewCallback) must call
//     HoldShort itself (driver.HoldShortCalls, for users), or set
//     GPUMEM_SHORT_CALLS=0. A hold is taken before C can learn of the
//     function, and the thread that runs it holds short calls off too from
//     before it enters Go until after it has left (HeldCallback); a short
//     call already under way when a hold is taken finishes as a short call
//     (docs/architecture.md, "Short calls", says why that is accepted).
//
// GPUMEM_SHORT_CALLS=0 in the environment at start-up makes every short
// call an ordinary one (Call6, CallPre6). Where the platform has no short
// path (only linux/amd64 and linux/arm64 have one), they are ordinary calls
// too.
//
// The C stacks are made on a processor's first short call (that call goes
// through cgocall): ShortStackBytes of address space each, mapped without
// reserving memory, under a guard page, so a C function that overflows one
// faults instead of writing over other memory. Only the pages C touches
// take memory (a few KiB for the pool calls).

// ShortStackBytes is the size of each processor's C stack for short calls:
// 8 MiB, the default stack of a thread on Linux, so that a C function
// finds the room it would find on a thread of its own.
const ShortStackBytes = 8 << 20

// shortSlack is mapped memory left above a C stack's starting point: if C
// faults during a short call, the Go runtime's crash report walks into the
// trampoline's frame and reads its arguments above the stack pointer it
// started from, which then stay mapped (zeros) instead of faulting again
// and hiding the report.
const shortSlack = 4096

// maxShortProcs bounds the processors (GOMAXPROCS) that get a C stack;
// calls on processors beyond it are ordinary calls.
const maxShortProcs = 1024

// stackFailed marks a processor whose stack could not be made: its calls
// are ordinary ones, and no second attempt is made.
const stackFailed = 1

// The short path reads shortHeld and shortStacks with sync/atomic's
// functions on plain words, not the atomic types' methods: a method that is
// not inlined (under -race, or with -gcflags=-l) checks for stack growth, and
// a goroutine stack that moves between the caller's conversion of &local to
// uintptr and the C call leaves C writing to the old stack. The functions
// are nosplit assembly in every build.
var (
	// shortStacks[p] is the top of processor p's C stack (16-byte
	// aligned), 0 until made, stackFailed if it could not be.
	shortStacks [maxShortProcs]uintptr
	stackMu     sync.Mutex // serializes the making of stacks
	// shortHeld counts holds (HoldShort less ReleaseShort); while it is
	// above zero, short calls are ordinary ones.
	shortHeld int64
)

func init() {
	if heldAtStart(shortSupported, os.Getenv("GPUMEM_SHORT_CALLS")) {
		atomic.StoreInt64(&shortHeld, 1<<40) // never released
	}
}

// heldAtStart reports whether short calls are off for the life of the
// process: on a platform without them, or with GPUMEM_SHORT_CALLS=0.
func heldAtStart(supported bool, env string) bool { return !supported || env == "0" }

// HoldShort makes short calls ordinary ones until the matching
// ReleaseShort: call it before handing C a function that runs Go code,
// and ReleaseShort once C can no longer call it. Holds nest.
func HoldShort() { atomic.AddInt64(&shortHeld, 1) }

// ReleaseShort ends a hold of HoldShort. A release without a hold is
// ignored.
func ReleaseShort() {
	for {
		n := atomic.LoadInt64(&shortHeld)
		if n <= 0 || atomic.CompareAndSwapInt64(&shortHeld, n, n-1) {
			return
		}
	}
}

// heldTarget is the C-callable function HeldCallback wraps, and
// heldEntryABI0 the wrapper's address (short_amd64.s, short_arm64.s).
var heldTarget, heldEntryABI0 uintptr

// HeldCallback returns a C function pointer of the same type as fn, void
// (*)(void *userData), that calls fn with short calls held off from before
// the calling thread enters Go until after it has left: fn is a
// C-callable Go function (purego.NewCallback). A registration's hold
// (HoldShort) covers the time C may call it; this one covers the thread's
// way in and out of Go, including a call with an id no longer registered.
// One fn per process: a second, different fn is refused (0, false). Where
// the platform has no short calls it returns fn itself.
func HeldCallback(fn uintptr) (uintptr, bool) {
	if !shortSupported {
		return fn, true
	}
	if !atomic.CompareAndSwapUintptr(&heldTarget, 0, fn) && atomic.LoadUintptr(&heldTarget) != fn {
		return 0, false
	}
	return heldEntryABI0, true
}

// ShortHolds reports the holds now taken (HoldShort less ReleaseShort),
// counting the one GPUMEM_SHORT_CALLS=0 or a platform without short calls
// takes for good as 1<<40.
func ShortHolds() int64 { return atomic.LoadInt64(&shortHeld) }

// ShortEnabled reports whether a short call made now would take the short
// path (no hold, the platform supports it, GPUMEM_SHORT_CALLS is not 0).
func ShortEnabled() bool { return atomic.LoadInt64(&shortHeld) == 0 }

//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

// pinned pins the goroutine and returns its processor and that processor's
// C stack (top), or top 0 with the goroutine unpinned: short calls are held
// off (p -1), or the processor has no stack yet (p its id, for
// makeShortStack after the ordinary call that takes its place).
//
//go:nosplit
func pinned() (p int, top uintptr) {
	if atomic.LoadInt64(&shortHeld) != 0 {
		return -1, 0
	}
	p = procPin()
	if uint(p) < maxShortProcs {
		if top = atomic.LoadUintptr(&shortStacks[p]); top > stackFailed {
			return p, top
		}
	}
	procUnpin()
	return p, 0
}

// Short6 is Call6 for a C function that returns promptly and never calls
// back into Go (see Short calls above): the same arguments and result, the
// same rules for callers, without entering the scheduler's system-call
// state.
//
//go:nosplit
func Short6(fn, a1, a2, a3, a4, a5, a6 uintptr) uintptr {
	p, top := pinned()
	if top != 0 {
		r := shortcall6(fn, a1, a2, a3, a4, a5, a6, top)
		procUnpin()
		return r
	}
	// An ordinary call, then the processor's stack if it has none.
	// (Making the stack first could grow and move the goroutine stack,
	// which the caller's arguments may point into.)
	r := Call6(fn, a1, a2, a3, a4, a5, a6)
	makeShortStack(p)
	return r
}

// ShortPre6 is CallPre6 for two C functions that return promptly and never
// call back into Go (see Short calls above): pre(preArg) and, only if it
// returned 0, fn(a1, ..., a6), on one OS thread, without entering the
// scheduler's system-call state.
//
//go:nosplit
func ShortPre6(pre, preArg, fn, a1, a2, a3, a4, a5, a6 uintptr) (r uintptr, preFailed bool) {
	p, top := pinned()
	if top != 0 {
		r, failed := shortpre6(pre, preArg, fn, a1, a2, a3, a4, a5, a6, top)
		procUnpin()
		return r, failed != 0
	}
	r, preFailed = CallPre6(pre, preArg, fn, a1, a2, a3, a4, a5, a6)
	makeShortStack(p)
	return r, preFailed
}

// ShortOut6 is Short6 for a C function whose first argument is where it
// writes one word of result (cuMemAllocFromPoolAsync's CUdeviceptr *, say):
// it calls fn(&out, a2, ..., a6) and returns fn's result and out. On the
// short path out lives on the C stack, so the caller needs no memory of its
// own for it; out is 0 unless fn wrote it. As an ordinary call (held off,
// or a processor's first) out is a word of the heap, which a callback into
// Go cannot move, so a2..a6 must not point into the goroutine's stack.
//
//go:nosplit
func ShortOut6(fn, a2, a3, a4, a5, a6 uintptr) (r, out uintptr) {
	p, top := pinned()
	if top != 0 {
		r, out = shortout6(fn, a2, a3, a4, a5, a6, top)
		procUnpin()
		return r, out
	}
	r, out = outCall(fn, a2, a3, a4, a5, a6)
	makeShortStack(p)
	return r, out
}

// outWords are heap words for outCall.
var outWords = sync.Pool{New: func() any { return new(uintptr) }}

// outCall is ShortOut6 as an ordinary call, out in a word of the heap.
func outCall(fn, a2, a3, a4, a5, a6 uintptr) (r, out uintptr) {
	w := outWords.Get().(*uintptr)
	*w = 0
	r = Call6(fn, uintptr(unsafe.Pointer(w)), a2, a3, a4, a5, a6)
	out = *w
	outWords.Put(w)
	return r, out
}

// makeShortStack makes processor p's C stack if it has none (p -1: none to
// make).
func makeShortStack(p int) {
	if uint(p) >= maxShortProcs || atomic.LoadUintptr(&shortStacks[p]) != 0 {
		return
	}
	stackMu.Lock()
	defer stackMu.Unlock()
	if atomic.LoadUintptr(&shortStacks[p]) != 0 {
		return
	}
	top, err := mapStack(ShortStackBytes)
	if err != nil {
		atomic.StoreUintptr(&shortStacks[p], stackFailed)
		return
	}
	atomic.StoreUintptr(&shortStacks[p], top)
}

// ShortStack returns the bounds of processor p's C stack for short calls,
// and false if it has none (for tests): hi is its top, where a call's stack
// pointer starts, and lo its lowest usable address, above the guard page.
func ShortStack(p int) (lo, hi uintptr, ok bool) {
	if uint(p) >= maxShortProcs {
		return 0, 0, false
	}
	top := atomic.LoadUintptr(&shortStacks[p])
	if top <= stackFailed {
		return 0, 0, false
	}
	return top - (ShortStackBytes - shortSlack), top, true
}
