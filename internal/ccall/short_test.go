package ccall

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gpumem/gpumem/internal/churn"
	"github.com/gpumem/gpumem/internal/dl"
)

// ucontextSP is the offset of the stack pointer in glibc's ucontext_t:
// uc_mcontext.gregs[REG_RSP] on x86_64, uc_mcontext.sp on aarch64.
var ucontextSP = map[string]uintptr{"amd64": 40 + 15*8, "arm64": 176 + 8 + 31*8}

// spOfCall returns the stack pointer C ran on in a call made by call,
// which is handed libc's getcontext and a buffer for its ucontext_t.
func spOfCall(t *testing.T, call func(getcontext, buf uintptr) uintptr) uintptr {
	t.Helper()
	off, ok := ucontextSP[runtime.GOARCH]
	if !ok {
		t.Skipf("no ucontext_t layout for %s", runtime.GOARCH)
	}
	lib, err := dl.Open("libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	getcontext, err := lib.Sym("getcontext")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	if r := call(getcontext, uintptr(unsafe.Pointer(&buf[0]))); int32(r) != 0 {
		t.Fatalf("getcontext = %d", int32(r))
	}
	sp := *(*uintptr)(unsafe.Pointer(&buf[off]))
	runtime.KeepAlive(buf)
	return sp
}

// onShortStack reports whether sp lies in some processor's short-call
// stack; its top counts (the stack pointer at the call, which getcontext
// records on amd64).
func onShortStack(sp uintptr) bool {
	for p := range maxShortProcs {
		if lo, hi, ok := ShortStack(p); ok && sp > lo && sp <= hi {
			return true
		}
	}
	return false
}

// warm makes a short call on every processor, so that each has its stack.
func warm(t *testing.T) {
	t.Helper()
	loadLibc(t)
	var wg sync.WaitGroup
	for range 4 * runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				Short6(libc.abs, 1, 0, 0, 0, 0, 0)
				runtime.Gosched()
			}
		}()
	}
	wg.Wait()
}

func requireShort(t *testing.T) {
	t.Helper()
	if !ShortEnabled() {
		t.Skip("short calls are off here (platform or GPUMEM_SHORT_CALLS=0)")
	}
}

func TestShortCallsLibc(t *testing.T) {
	loadLibc(t)
	for range 3 { // the first call on a processor is an ordinary one
		for _, v := range []int64{0, 1, -1, -123456789012, 1 << 62} {
			want := v
			if want < 0 {
				want = -want
			}
			if got := int64(Short6(libc.labs, uintptr(v), 0, 0, 0, 0, 0)); got != want {
				t.Errorf("Short6 labs(%d) = %d", v, got)
			}
			r, failed := ShortPre6(libc.abs, 0, libc.labs, uintptr(v), 0, 0, 0, 0, 0)
			if failed || int64(r) != want {
				t.Errorf("ShortPre6 labs(%d) = (%d, %v)", v, int64(r), failed)
			}
		}
		// Six arguments reach C in order: memcmp(a, b, n) and memset.
		buf := make([]byte, 64)
		if got := Short6(libc.memset, ptr(&buf[8]), 0xCD, 16, 0, 0, 0); got != ptr(&buf[8]) {
			t.Errorf("memset returned %#x, want %#x", got, ptr(&buf[8]))
		}
		for i, b := range buf {
			if want := byte(0); i >= 8 && i < 24 && b != 0xCD || (i < 8 || i >= 24) && b != want {
				t.Fatalf("buf[%d] = %#x after memset of [8, 24)", i, b)
			}
		}
		other := append([]byte(nil), buf...)
		other[20] = 0
		if got := int32(Short6(libc.memcmp, ptr(&buf[0]), ptr(&other[0]), 20, 0, 0, 0)); got != 0 {
			t.Errorf("memcmp of equal prefixes = %d", got)
		}
		if got := int32(Short6(libc.memcmp, ptr(&buf[0]), ptr(&other[0]), 21, 0, 0, 0)); got <= 0 {
			t.Errorf("memcmp past the difference = %d, want > 0", got)
		}
		runtime.KeepAlive(buf)
		runtime.KeepAlive(other)
		// A failing pre stops the call and returns pre's result.
		buf[0] = 'z'
		r, failed := ShortPre6(libc.abs, ^uintptr(6), libc.memset, ptr(&buf[0]), 0, 1, 0, 0, 0)
		if !failed || int32(r) != 7 || buf[0] != 'z' {
			t.Errorf("ShortPre6 with failing pre = (%d, %v), buf[0] %q; want (7, true), 'z'", int32(r), failed, buf[0])
		}
	}
}

// TestShortOut6: the first argument is a word the function writes and
// ShortOut6 returns, with the function's result; on the short path, with
// short calls held off, and on a processor's first call alike.
func TestShortOut6(t *testing.T) {
	loadLibc(t)
	lib, err := dl.Open("libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	memalign, err := lib.Sym("posix_memalign")
	if err != nil {
		t.Fatal(err)
	}
	free, err := lib.Sym("free")
	if err != nil {
		t.Fatal(err)
	}
	timeFn, err := lib.Sym("time")
	if err != nil {
		t.Fatal(err)
	}
	for _, held := range []bool{false, true, false} {
		if held {
			HoldShort()
		}
		for _, align := range []uintptr{16, 64, 4096} {
			r, p := ShortOut6(memalign, align, 1000, 0, 0, 0)
			if int32(r) != 0 || p == 0 || p%align != 0 {
				t.Errorf("held %v: posix_memalign(&p, %d, 1000) = %d, p %#x", held, align, int32(r), p)
			}
			Call1(free, p)
		}
		// EINVAL for an alignment that is not a power of two: p unwritten.
		if r, p := ShortOut6(memalign, 24, 1000, 0, 0, 0); int32(r) != int32(syscall.EINVAL) || p != 0 {
			t.Errorf("held %v: posix_memalign(&p, 24, 1000) = %d, p %#x; want EINVAL and 0", held, int32(r), p)
		}
		if r, out := ShortOut6(timeFn, 0, 0, 0, 0, 0); r != out || r == 0 {
			t.Errorf("held %v: time(&t) = %d, t %d", held, r, out)
		}
		if held {
			ReleaseShort()
		}
	}
	if a := testing.AllocsPerRun(100, func() { ShortOut6(timeFn, 0, 0, 0, 0, 0) }); a != 0 {
		t.Errorf("ShortOut6 allocates %v per call", a)
	}
}

// TestShortCallRunsOnItsStack: C runs on the processor's short-call stack,
// 16-byte aligned at the call, and on the system stack (cgocall) while a
// hold is taken.
func TestShortCallRunsOnItsStack(t *testing.T) {
	requireShort(t)
	warm(t)
	for _, tc := range []struct {
		name string
		call func(getcontext, buf uintptr) uintptr
	}{
		{"Short6", func(g, b uintptr) uintptr { return Short6(g, b, 0, 0, 0, 0, 0) }},
		{"ShortPre6", func(g, b uintptr) uintptr {
			r, failed := ShortPre6(libc.abs, 0, g, b, 0, 0, 0, 0, 0)
			if failed {
				t.Fatal("pre failed")
			}
			return r
		}},
	} {
		sp := spOfCall(t, tc.call)
		if !onShortStack(sp) {
			t.Errorf("%s: C ran at sp %#x, on no short-call stack", tc.name, sp)
		}
		if sp%16 != 0 {
			t.Errorf("%s: sp %#x at the call is not 16-byte aligned", tc.name, sp)
		}
		HoldShort()
		if ShortEnabled() {
			t.Error("ShortEnabled after HoldShort")
		}
		if sp := spOfCall(t, tc.call); onShortStack(sp) {
			t.Errorf("%s under a hold: C ran at sp %#x, on a short-call stack", tc.name, sp)
		}
		ReleaseShort()
		if !ShortEnabled() {
			t.Error("not ShortEnabled after ReleaseShort")
		}
	}
	// An unmatched release does not unbalance the holds.
	ReleaseShort()
	HoldShort()
	if ShortEnabled() {
		t.Error("a hold after an unmatched release did not hold")
	}
	ReleaseShort()
}

// TestShortCallsUnderGC: many goroutines make short calls while the
// collector runs and GOMAXPROCS changes; every result is right.
func TestShortCallsUnderGC(t *testing.T) {
	loadLibc(t)
	stop := churn.Start()
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20000 {
				v := int64(g*100000 + i)
				if got := int64(Short6(libc.labs, uintptr(-v), 0, 0, 0, 0, 0)); got != v {
					errs <- "Short6 wrong result"
					return
				}
				if r, failed := ShortPre6(libc.abs, 0, libc.labs, uintptr(-v), 0, 0, 0, 0, 0); failed || int64(r) != v {
					errs <- "ShortPre6 wrong result"
					return
				}
			}
		}()
	}
	wg.Wait()
	stop()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// deepShort makes a short call (Short6 with pre false, else ShortPre6)
// that writes into a local array, depth frames down a fresh goroutine's
// stack, so that the stack is near its limit when the address of the array
// is converted: if anything between the conversion and the C call grew the
// stack (a check in a function that is not inlined, as under -race), C would
// write to the old stack and the array would not be filled.
//
//go:noinline
func deepShort(depth int, pre bool) bool {
	if depth > 0 {
		var pad [64]byte
		ok := deepShort(depth-1, pre)
		runtime.KeepAlive(&pad)
		return ok
	}
	var buf [32]byte
	if pre {
		ShortPre6(libc.abs, 0, libc.memset, uintptr(unsafe.Pointer(&buf[0])), 0xAB, uintptr(len(buf)), 0, 0, 0)
	} else {
		Short6(libc.memset, uintptr(unsafe.Pointer(&buf[0])), 0xAB, uintptr(len(buf)), 0, 0, 0)
	}
	return buf[0] == 0xAB && buf[len(buf)-1] == 0xAB
}

// TestShortCallsKeepStackPointers: a pointer into the calling goroutine's
// stack, converted in the call's argument list, is where C writes, at every
// depth of a fresh goroutine's stack, for Short6 and ShortPre6.
func TestShortCallsKeepStackPointers(t *testing.T) {
	loadLibc(t)
	warm(t)
	for _, pre := range []bool{false, true} {
		bad := 0
		for i := range 2000 {
			done := make(chan bool)
			go func() { done <- deepShort(i%200, pre) }()
			if !<-done {
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("pre %v: %d of 2000 calls wrote to a stale stack address", pre, bad)
		}
	}
}

// TestShortCallsUnderProfiler: the CPU profiler's signals land while C runs
// on a short-call stack (the handler finds no Go frame there and counts the
// sample as external code); the calls still return the right results and
// the profile is written.
func TestShortCallsUnderProfiler(t *testing.T) {
	loadLibc(t)
	var prof bytes.Buffer
	if err := pprof.StartCPUProfile(&prof); err != nil {
		t.Skipf("a CPU profile is running already: %v", err)
	}
	deadline := time.Now().Add(300 * time.Millisecond)
	var wg sync.WaitGroup
	var bad atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			big := make([]byte, 1<<20) // C spends most of each call here
			for i := 0; time.Now().Before(deadline); i++ {
				if got := int64(Short6(libc.labs, uintptr(-int64(i)), 0, 0, 0, 0, 0)); got != int64(i) {
					bad.Add(1)
				}
				Short6(libc.memset, uintptr(unsafe.Pointer(&big[0])), uintptr(byte(i)), uintptr(len(big)), 0, 0, 0)
				if big[len(big)-1] != byte(i) {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	pprof.StopCPUProfile()
	if n := bad.Load(); n != 0 {
		t.Errorf("%d short calls under the profiler gave wrong results", n)
	}
	zr, err := gzip.NewReader(&prof)
	if err != nil {
		t.Fatalf("reading the CPU profile: %v", err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("reading the CPU profile: %v", err)
	}
	if !bytes.Contains(data, []byte("_ExternalCode")) {
		t.Error("no sample of the CPU profile landed in C during a short call (no _ExternalCode frame)")
	}
}

func TestShortCallsAllocateNothing(t *testing.T) {
	loadLibc(t)
	Short6(libc.abs, 0, 0, 0, 0, 0, 0)
	if a := testing.AllocsPerRun(100, func() { Short6(libc.labs, ^uintptr(4), 0, 0, 0, 0, 0) }); a != 0 {
		t.Errorf("Short6 allocates %v per call", a)
	}
	if a := testing.AllocsPerRun(100, func() { ShortPre6(libc.abs, 0, libc.labs, ^uintptr(4), 0, 0, 0, 0, 0) }); a != 0 {
		t.Errorf("ShortPre6 allocates %v per call", a)
	}
}

// TestShortCallsOffByEnvironment: with GPUMEM_SHORT_CALLS=0 every short
// call is an ordinary one (the test binary run again in a child).
func TestShortCallsOffByEnvironment(t *testing.T) {
	if os.Getenv("GPUMEM_SHORT_CALLS_CHILD") == "1" {
		warm(t)
		if ShortEnabled() {
			t.Fatal("ShortEnabled with GPUMEM_SHORT_CALLS=0")
		}
		if sp := spOfCall(t, func(g, b uintptr) uintptr { return Short6(g, b, 0, 0, 0, 0, 0) }); onShortStack(sp) {
			t.Fatalf("C ran on a short-call stack (sp %#x) with GPUMEM_SHORT_CALLS=0", sp)
		}
		return
	}
	requireShort(t)
	cmd := exec.Command(os.Args[0], "-test.run", "^TestShortCallsOffByEnvironment$", "-test.v")
	cmd.Env = append(os.Environ(), "GPUMEM_SHORT_CALLS=0", "GPUMEM_SHORT_CALLS_CHILD=1")
	out, err := cmd.CombinedOutput()
	if errors.Is(err, syscall.ENOEXEC) {
		// A foreign architecture's binary under qemu-user without
		// binfmt_misc: TestHeldAtStart covers the rule.
		t.Skipf("cannot run the test binary again here: %v", err)
	}
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// TestShortCallFaultReport: a fault in C during a short call kills the
// process with the runtime's report of the signal, naming the short-call
// trampoline (the unwinder stops there: it switched stacks), not with a
// second fault while printing it (the slack above the C stack's starting
// point keeps the report's reads mapped). Run in a child.
func TestShortCallFaultReport(t *testing.T) {
	if os.Getenv("GPUMEM_SHORT_FAULT_CHILD") == "1" {
		loadLibc(t)
		warm(t)
		Short6(libc.memset, 8, 1, 16, 0, 0, 0) // writes to address 8
		t.Fatal("memset to address 8 returned")
	}
	requireShort(t)
	cmd := exec.Command(os.Args[0], "-test.run", "^TestShortCallFaultReport$")
	cmd.Env = append(os.Environ(), "GPUMEM_SHORT_FAULT_CHILD=1")
	out, err := cmd.CombinedOutput()
	if errors.Is(err, syscall.ENOEXEC) {
		t.Skipf("cannot run the test binary again here: %v", err)
	}
	if err == nil {
		t.Fatalf("the child survived a fault in C:\n%s", out)
	}
	report := string(out)
	for _, want := range []string{"SIGSEGV", "addr=0x8", "ccall.shortcall6"} {
		if !strings.Contains(report, want) {
			t.Errorf("the crash report lacks %q:\n%s", want, report)
		}
	}
	if strings.Contains(report, "panic during panic") {
		t.Errorf("the crash report faulted again:\n%s", report)
	}
}

// heldInside is what heldFns' first function saw: the holds plus its
// userData.
var heldInside atomic.Int64

// heldFns are two C-callable Go functions for TestHeldCallback, made once
// (HeldCallback takes one function per process, however often the test
// runs).
var heldFns = sync.OnceValues(func() (uintptr, uintptr) {
	return purego.NewCallback(func(u uintptr) uintptr { heldInside.Store(ShortHolds() + int64(u)); return 0 }),
		purego.NewCallback(func(uintptr) uintptr { return 0 })
})

// TestHeldCallback: the wrapper holds short calls while the Go function
// runs and releases the hold when it returns; one function per process.
func TestHeldCallback(t *testing.T) {
	requireShort(t)
	fn, other := heldFns()
	held, ok := HeldCallback(fn)
	if !ok || held == 0 || held == fn {
		t.Fatalf("HeldCallback = %#x, %v", held, ok)
	}
	if again, ok := HeldCallback(fn); !ok || again != held {
		t.Errorf("HeldCallback of the same function again = %#x, %v; want %#x, true", again, ok, held)
	}
	if _, ok := HeldCallback(other); ok {
		t.Error("HeldCallback accepted a second function")
	}
	base := ShortHolds()
	Call1(held, 1000) // userData reaches fn
	if got := heldInside.Load(); got != base+1+1000 {
		t.Errorf("inside the wrapped function: holds+userData %d, want %d", got, base+1+1000)
	}
	if got := ShortHolds(); got != base {
		t.Errorf("holds after the call: %d, want %d", got, base)
	}
}

func TestHeldAtStart(t *testing.T) {
	for _, tc := range []struct {
		supported bool
		env       string
		want      bool
	}{
		{true, "", false}, {true, "1", false}, {true, "0", true}, {false, "", true}, {false, "1", true},
	} {
		if got := heldAtStart(tc.supported, tc.env); got != tc.want {
			t.Errorf("heldAtStart(%v, %q) = %v, want %v", tc.supported, tc.env, got, tc.want)
		}
	}
}

func BenchmarkShort6(b *testing.B) {
	loadLibc(b)
	b.ReportAllocs()
	var sum uintptr
	for i := 0; i < b.N; i++ {
		sum += Short6(libc.labs, uintptr(-i), 0, 0, 0, 0, 0)
	}
	sink = sum
}

func BenchmarkShortOut6(b *testing.B) {
	loadLibc(b)
	lib, err := dl.Open("libc.so.6")
	if err != nil {
		b.Fatal(err)
	}
	timeFn, err := lib.Sym("time")
	if err != nil {
		b.Fatal(err)
	}
	var sum uintptr
	for i := 0; i < b.N; i++ {
		_, out := ShortOut6(timeFn, 0, 0, 0, 0, 0)
		sum += out
	}
	sink = sum
}

func BenchmarkShortPre6(b *testing.B) {
	loadLibc(b)
	b.ReportAllocs()
	var sum uintptr
	for i := 0; i < b.N; i++ {
		r, _ := ShortPre6(libc.abs, 0, libc.labs, uintptr(-i), 0, 0, 0, 0, 0)
		sum += r
	}
	sink = sum
}
