package callback

import (
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/dl"
)

// callC calls the callback pointer the way C does: from a C call frame, with
// userData as its one argument.
func callC(id uintptr) { ccall.Call1(Pointer(), id) }

func TestPointerIsStable(t *testing.T) {
	p := Pointer()
	if p == 0 {
		t.Fatal("Pointer() = 0")
	}
	if Pointer() != p {
		t.Fatal("Pointer() changed")
	}
}

func TestOnceRunsOnceAndUnregisters(t *testing.T) {
	before, strayBefore := Pending(), Stray()
	var n atomic.Int32
	id := Register(func() { n.Add(1) }, true)
	if id == 0 {
		t.Fatal("Register returned id 0")
	}
	if Pending() != before+1 {
		t.Fatalf("Pending = %d, want %d", Pending(), before+1)
	}
	callC(id)
	if n.Load() != 1 {
		t.Fatalf("func ran %d times, want 1", n.Load())
	}
	if Pending() != before {
		t.Fatalf("Pending after the once call = %d, want %d", Pending(), before)
	}
	callC(id) // stale: must do nothing
	if n.Load() != 1 {
		t.Fatalf("stale id ran the func again")
	}
	if Stray() != strayBefore+1 {
		t.Errorf("Stray = %d, want %d", Stray(), strayBefore+1)
	}
}

func TestPersistentUntilUnregister(t *testing.T) {
	before := Pending()
	var n atomic.Int32
	id := Register(func() { n.Add(1) }, false)
	for i := 0; i < 3; i++ {
		callC(id)
	}
	if n.Load() != 3 {
		t.Fatalf("func ran %d times, want 3", n.Load())
	}
	Unregister(id)
	Unregister(id)
	callC(id)
	if n.Load() != 3 {
		t.Fatal("func ran after Unregister")
	}
	if Pending() != before {
		t.Fatalf("Pending = %d, want %d", Pending(), before)
	}
	Unregister(0)
	callC(0) // NULL userData: nothing registered under it
}

func TestIdsAreDistinct(t *testing.T) {
	seen := map[uintptr]bool{}
	var ids []uintptr
	for i := 0; i < 100; i++ {
		id := Register(nil, false)
		if seen[id] {
			t.Fatalf("id %d issued twice", id)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	for _, id := range ids {
		callC(id) // nil registers a no-op
		Unregister(id)
	}
}

func TestPanicIsRecoveredAndReported(t *testing.T) {
	var got any
	var stack []byte
	prev := SetPanicHandler(func(v any, s []byte) { got, stack = v, s })
	t.Cleanup(func() { SetPanicHandler(prev) }) // restores the handler; the one it returns is the test's

	ran := false
	id := Register(func() { ran = true; panic("boom from a host function") }, true)
	callC(id)
	if !ran {
		t.Fatal("func did not run")
	}
	if got != "boom from a host function" {
		t.Fatalf("handler got %v", got)
	}
	if !strings.Contains(string(stack), "callback") {
		t.Errorf("stack does not show the callback:\n%s", stack)
	}
	// The process goes on: another callback works.
	ok := false
	callC(Register(func() { ok = true }, true))
	if !ok {
		t.Fatal("callback after a panic did not run")
	}
}

// TestGrowsStack runs a func that needs far more stack than the goroutine
// has, from inside a C call on the same goroutine.
func TestGrowsStack(t *testing.T) {
	var depth int
	callC(Register(func() { depth = recurse(2000) }, true))
	if depth != 2000 {
		t.Fatalf("recurse = %d", depth)
	}
}

//go:noinline
func recurse(n int) int {
	var pad [128]byte
	pad[n%128] = 1
	if n == 0 {
		return 0
	}
	return recurse(n-1) + int(pad[n%128])
}

func TestConcurrentDispatch(t *testing.T) {
	before := Pending()
	const goroutines, each = 8, 200
	var total atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				callC(Register(func() { total.Add(1) }, true))
			}
		}()
	}
	wg.Wait()
	if total.Load() != goroutines*each {
		t.Fatalf("ran %d funcs, want %d", total.Load(), goroutines*each)
	}
	if Pending() != before {
		t.Fatalf("Pending = %d, want %d", Pending(), before)
	}
}

// TestForeignThread has a thread that Go did not create (made by
// pthread_create, as a driver makes its callback threads) call the pointer.
func TestForeignThread(t *testing.T) {
	lib, err := dl.Open("libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	create, err := lib.Sym("pthread_create")
	if err != nil {
		t.Skip("libc has no pthread_create:", err)
	}
	join, err := lib.Sym("pthread_join")
	if err != nil {
		t.Skip("libc has no pthread_join:", err)
	}
	done := make(chan struct{}, 1)
	id := Register(func() { done <- struct{}{} }, true)
	tid := new(uint64)
	// The thread's start routine is void *(*)(void *): the callback's
	// return register is ignored by pthread_join with a NULL result.
	if r := int32(ccall.Call4(create, uintptr(unsafe.Pointer(tid)), 0, Pointer(), id)); r != 0 {
		t.Fatalf("pthread_create = %d", r)
	}
	if r := int32(ccall.Call2(join, uintptr(*tid), 0)); r != 0 {
		t.Fatalf("pthread_join = %d", r)
	}
	runtime.KeepAlive(tid)
	select {
	case <-done:
	default:
		t.Fatal("the callback did not run on the foreign thread")
	}
}

// TestRegistrationsHoldShortCalls: while a func is registered, short calls
// are ordinary ones; a once func's run and an Unregister end the hold, and
// a second Unregister or a stray call does not end another's.
func TestRegistrationsHoldShortCalls(t *testing.T) {
	if Pending() != 0 || !ccall.ShortEnabled() {
		t.Skip("short calls are held already (another registration, the platform or GPUMEM_SHORT_CALLS=0)")
	}
	once := Register(func() {}, true)
	persistent := Register(func() {}, false)
	if ccall.ShortEnabled() {
		t.Fatal("short calls enabled with two funcs registered")
	}
	callC(once)
	callC(once) // stray: releases nothing
	if ccall.ShortEnabled() {
		t.Fatal("short calls enabled with a func still registered")
	}
	Unregister(once) // already gone: releases nothing
	if ccall.ShortEnabled() {
		t.Fatal("short calls enabled after unregistering an id already run")
	}
	Unregister(persistent)
	if !ccall.ShortEnabled() {
		t.Fatal("short calls still held with nothing registered")
	}
	Unregister(persistent)
	held := Register(nil, false)
	if ccall.ShortEnabled() {
		t.Fatal("a second Unregister unbalanced the holds")
	}
	Unregister(held)
}

// TestCallingThreadHoldsShortCalls: while C runs a func through Pointer,
// short calls are held by the calling thread itself, besides the
// registration's hold, and still after the registration is gone; the
// thread's hold ends when the call returns to C, for a stale id too.
func TestCallingThreadHoldsShortCalls(t *testing.T) {
	if Pending() != 0 || !ccall.ShortEnabled() {
		t.Skip("short calls are held already (another registration, the platform or GPUMEM_SHORT_CALLS=0)")
	}
	base := ccall.ShortHolds()
	var inOnce, afterUnregister int64
	once := Register(func() { inOnce = ccall.ShortHolds() }, true)
	callC(once)
	if inOnce != base+2 {
		t.Errorf("holds inside a once func: %d, want %d (its registration's and the thread's)", inOnce, base+2)
	}
	var self uintptr
	self = Register(func() {
		Unregister(self)
		afterUnregister = ccall.ShortHolds()
	}, false)
	callC(self)
	if afterUnregister != base+1 {
		t.Errorf("holds inside a func after it unregistered itself: %d, want %d (the thread's)", afterUnregister, base+1)
	}
	if got := ccall.ShortHolds(); got != base {
		t.Errorf("holds after the calls returned to C: %d, want %d", got, base)
	}
	callC(once) // stale: dispatch finds nothing
	if got := ccall.ShortHolds(); got != base || !ccall.ShortEnabled() {
		t.Errorf("holds after a stale call: %d, want %d", got, base)
	}
}
