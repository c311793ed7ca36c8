package ccall

import (
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gpumem/gpumem/internal/dl"
)

// libc holds the addresses of the C functions the tests call.
var libc struct {
	once                                       sync.Once
	err                                        error
	labs, strlen, memset, memmove, abs, getpid uintptr
	strchr, memcmp                             uintptr
	clockGettime, clockGetres                  uintptr
}

func loadLibc(t testing.TB) {
	t.Helper()
	libc.once.Do(func() {
		lib, err := dl.Open("libc.so.6")
		if err != nil {
			libc.err = err
			return
		}
		for name, p := range map[string]*uintptr{
			"labs": &libc.labs, "strlen": &libc.strlen, "memset": &libc.memset,
			"memmove": &libc.memmove, "abs": &libc.abs, "getpid": &libc.getpid,
			"strchr": &libc.strchr, "memcmp": &libc.memcmp,
			"clock_gettime": &libc.clockGettime, "clock_getres": &libc.clockGetres,
		} {
			if *p, err = lib.Sym(name); err != nil {
				libc.err = err
				return
			}
		}
	})
	if libc.err != nil {
		t.Fatal(libc.err)
	}
}

func ptr[T any](p *T) uintptr { return uintptr(unsafe.Pointer(p)) }

func TestCallLibc(t *testing.T) {
	loadLibc(t)
	if got := Call0(libc.getpid); int(int32(got)) != syscallGetpid() {
		t.Errorf("getpid() = %d, want %d", int32(got), syscallGetpid())
	}
	for _, v := range []int64{0, 1, -1, -123456789012, 1 << 62} {
		want := v
		if want < 0 {
			want = -want
		}
		if got := int64(Call1(libc.labs, uintptr(v))); got != want {
			t.Errorf("labs(%d) = %d", v, got)
		}
	}
	s := []byte("hello, gpu\x00trailing")
	if got := Call1(libc.strlen, ptr(&s[0])); got != 10 {
		t.Errorf("strlen = %d, want 10", got)
	}
	// strchr returns a pointer into the argument: the full 64-bit result.
	if got := Call2(libc.strchr, ptr(&s[0]), 'g'); got != ptr(&s[7]) {
		t.Errorf("strchr = %#x, want %#x", got, ptr(&s[7]))
	}
	runtime.KeepAlive(s)

	buf := make([]byte, 64)
	if got := Call3(libc.memset, ptr(&buf[8]), 0xAB, 16); got != ptr(&buf[8]) {
		t.Errorf("memset returned %#x, want its destination %#x", got, ptr(&buf[8]))
	}
	for i, b := range buf {
		want := byte(0)
		if i >= 8 && i < 24 {
			want = 0xAB
		}
		if b != want {
			t.Fatalf("after memset buf[%d] = %#x, want %#x", i, b, want)
		}
	}
	src := []byte("0123456789")
	Call3(libc.memmove, ptr(&buf[0]), ptr(&src[0]), uintptr(len(src)))
	if string(buf[:10]) != "0123456789" {
		t.Errorf("memmove: %q", buf[:10])
	}
	if r := int32(Call3(libc.memcmp, ptr(&buf[0]), ptr(&src[0]), 10)); r != 0 {
		t.Errorf("memcmp equal = %d", r)
	}
	src[9] = 'x'
	if r := int32(Call3(libc.memcmp, ptr(&buf[0]), ptr(&src[0]), 10)); r >= 0 {
		t.Errorf("memcmp(\"...9\", \"...x\") = %d, want < 0", r)
	}
	runtime.KeepAlive(buf)
	runtime.KeepAlive(src)
}

// TestArgumentRegisters checks that every argument lands in its own register:
// memmove(dst, src, n) through Call4..Call6 with junk in the unused slots,
// and each argument position exercised by moving a distinct value.
func TestArgumentRegisters(t *testing.T) {
	loadLibc(t)
	calls := map[string]func(dst, src, n uintptr) uintptr{
		"Call3": func(d, s, n uintptr) uintptr { return Call3(libc.memmove, d, s, n) },
		"Call4": func(d, s, n uintptr) uintptr { return Call4(libc.memmove, d, s, n, 0xdead) },
		"Call5": func(d, s, n uintptr) uintptr { return Call5(libc.memmove, d, s, n, 1, 2) },
		"Call6": func(d, s, n uintptr) uintptr { return Call6(libc.memmove, d, s, n, 3, 4, 5) },
		"CallPre6": func(d, s, n uintptr) uintptr {
			r, failed := CallPre6(libc.abs, 0, libc.memmove, d, s, n, 6, 7, 8)
			if failed {
				t.Fatal("abs(0) reported failure")
			}
			return r
		},
		"CallGuard6": func(d, s, n uintptr) uintptr {
			r, stage := CallGuard6(libc.abs, 0, libc.clockGetres, 0, libc.memmove, d, s, n, 9, 10, 11)
			if stage != 0 {
				t.Fatalf("CallGuard6 stopped at stage %d", stage)
			}
			return r
		},
	}
	for name, call := range calls {
		src := []byte("abcdefghijklmnop")
		dst := make([]byte, 32)
		if r := call(ptr(&dst[3]), ptr(&src[2]), 7); r != ptr(&dst[3]) {
			t.Errorf("%s: memmove returned %#x, want %#x", name, r, ptr(&dst[3]))
		}
		if got := string(dst[3:10]); got != "cdefghi" || dst[2] != 0 || dst[10] != 0 {
			t.Errorf("%s: dst = %q", name, dst)
		}
		runtime.KeepAlive(src)
		runtime.KeepAlive(dst)
	}
	// Argument 2 and 3 distinguished from 1: labs ignores the others.
	if got := Call6(libc.labs, ^uintptr(41), 1, 2, 3, 4, 5); got != 42 {
		t.Errorf("labs(-42) via Call6 = %d", got)
	}
}

func TestCallPre6(t *testing.T) {
	loadLibc(t)
	dst := make([]byte, 8)
	src := []byte("ABCDEFGH")
	// pre = abs(-5) = 5: fails, so memmove must not run.
	r, failed := CallPre6(libc.abs, ^uintptr(4), libc.memmove, ptr(&dst[0]), ptr(&src[0]), 8, 0, 0, 0)
	if !failed || r != 5 {
		t.Errorf("CallPre6 with failing pre = (%d, %v), want (5, true)", r, failed)
	}
	if string(dst) != "\x00\x00\x00\x00\x00\x00\x00\x00" {
		t.Errorf("fn ran although pre failed: dst = %q", dst)
	}
	// pre = abs(0) = 0: succeeds, fn runs and its result comes back.
	r, failed = CallPre6(libc.abs, 0, libc.memmove, ptr(&dst[0]), ptr(&src[0]), 8, 0, 0, 0)
	if failed || r != ptr(&dst[0]) {
		t.Errorf("CallPre6 = (%#x, %v), want (%#x, false)", r, failed, ptr(&dst[0]))
	}
	if string(dst) != "ABCDEFGH" {
		t.Errorf("dst = %q", dst)
	}
	// pre's status is a 32-bit int: a non-zero low half fails, the
	// result is zero-extended.
	r, failed = CallPre6(libc.abs, uintptr(0xFFFFFFFF), libc.labs, 7, 0, 0, 0, 0, 0)
	if !failed || r != 1 {
		t.Errorf("CallPre6 with abs(-1) = (%d, %v), want (1, true)", r, failed)
	}
	runtime.KeepAlive(dst)
	runtime.KeepAlive(src)
}

func TestZeroAllocations(t *testing.T) {
	loadLibc(t)
	buf := make([]byte, 16)
	p := ptr(&buf[0])
	cases := map[string]func(){
		"Call0":    func() { Call0(libc.getpid) },
		"Call1":    func() { Call1(libc.labs, 3) },
		"Call2":    func() { Call2(libc.strchr, p, 1) },
		"Call3":    func() { Call3(libc.memset, p, 1, 8) },
		"Call4":    func() { Call4(libc.memset, p, 2, 8, 0) },
		"Call5":    func() { Call5(libc.memset, p, 3, 8, 0, 0) },
		"Call6":    func() { Call6(libc.memset, p, 4, 8, 0, 0, 0) },
		"CallPre6": func() { CallPre6(libc.abs, 0, libc.memset, p, 5, 8, 0, 0, 0) },
	}
	for name, fn := range cases {
		if n := testing.AllocsPerRun(200, fn); n != 0 {
			t.Errorf("%s allocates %v times per call", name, n)
		}
	}
	runtime.KeepAlive(buf)
}

func TestConcurrentCalls(t *testing.T) {
	loadLibc(t)
	const goroutines, calls = 16, 2000
	var wg sync.WaitGroup
	errs := make(chan string, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			buf := make([]byte, 32)
			for i := 0; i < calls; i++ {
				v := int64(g*calls + i)
				if got := int64(Call1(libc.labs, uintptr(-v))); got != v {
					errs <- "labs wrong"
					return
				}
				c := byte(i)
				r, failed := CallPre6(libc.abs, 0, libc.memset, ptr(&buf[0]), uintptr(c), 32, 0, 0, 0)
				if failed || r != ptr(&buf[0]) || buf[0] != c || buf[31] != c {
					errs <- "CallPre6 memset wrong"
					return
				}
				if i%100 == 0 {
					runtime.Gosched()
				}
			}
			runtime.KeepAlive(buf)
		}(g)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestStackArguments passes pointers to stack variables at many stack
// depths, so that some call happens just where the goroutine stack would
// have to grow: the path from CallN into C must not move the stack after
// the caller converted its pointers.
func TestStackArguments(t *testing.T) {
	loadLibc(t)
	done := make(chan int, 1)
	go func() { // a fresh goroutine starts with a small stack
		bad := 0
		for depth := 0; depth < 300; depth++ {
			bad += stackCall(depth)
		}
		done <- bad
	}()
	if bad := <-done; bad != 0 {
		t.Fatalf("%d calls wrote to a stale stack", bad)
	}
}

// stackCall recurses depth times, then has memset fill an array on its own
// stack and reports 1 if the array was not filled.
//
//go:noinline
func stackCall(depth int) int {
	var pad [24]byte // make each level's frame a little different
	if depth > 0 {
		return stackCall(depth-1) + int(pad[depth%len(pad)])
	}
	var a [64]byte
	c := byte(depth%200 + 1)
	if r, failed := CallPre6(libc.abs, 0, libc.memset, uintptr(unsafe.Pointer(&a[0])), uintptr(c), uintptr(len(a)), 0, 0, 0); failed || r == 0 {
		return 1
	}
	for _, b := range a {
		if b != c {
			return 1
		}
	}
	Call3(libc.memset, uintptr(unsafe.Pointer(&a[0])), 0, uintptr(len(a)))
	for _, b := range a {
		if b != 0 {
			return 1
		}
	}
	return 0
}

// growCallback is a C-callable Go function that needs much more stack than
// the calling goroutine has, so calling it from C on the same goroutine
// moves that goroutine's stack while the trampoline waits for its result.
var growCallback = sync.OnceValue(func() uintptr {
	return purego.NewCallback(func(x uintptr) uintptr { return x + uintptr(deep(1000)) })
})

//go:noinline
func deep(n int) int {
	var pad [256]byte
	pad[n%256] = 1
	if n == 0 {
		return 0
	}
	return deep(n-1) + int(pad[n%256])
}

// TestResultAfterStackMove checks that results reach the caller's frame when
// the callee called back into Go and the goroutine stack moved meanwhile.
func TestResultAfterStackMove(t *testing.T) {
	loadLibc(t)
	cb := growCallback()
	for i := uintptr(0); i < 3; i++ {
		done := make(chan [3]uintptr)
		go func() { // fresh goroutine: small stack, certain to move
			r1 := Call1(cb, 7+i)
			r2, failed := CallPre6(libc.abs, 0, cb, 11+i, 0, 0, 0, 0, 0)
			f := uintptr(0)
			if failed {
				f = 1
			}
			done <- [3]uintptr{r1, r2, f}
		}()
		got := <-done
		want := [3]uintptr{7 + i + 1000, 11 + i + 1000, 0}
		if got != want {
			t.Errorf("results after the stack moved = %v, want %v", got, want)
		}
	}
}

func TestGoString(t *testing.T) {
	if GoString(0) != "" {
		t.Error("GoString(0) is not empty")
	}
	for _, s := range []string{"", "CUDA_ERROR_OUT_OF_MEMORY", "hipErrorNoDevice with spaces"} {
		b := append([]byte(s), 0, 'x', 'y')
		got := GoString(ptr(&b[0]))
		if got != s {
			t.Errorf("GoString = %q, want %q", got, s)
		}
		// The result is a copy, not a view of C memory.
		if len(s) > 0 {
			b[0] = '!'
			if got[0] == '!' {
				t.Error("GoString aliases its argument")
			}
		}
		runtime.KeepAlive(b)
	}
}

// TestMatchesSyscallN checks results agree with purego's own path.
func TestMatchesSyscallN(t *testing.T) {
	loadLibc(t)
	for _, v := range []int64{5, -5, -1 << 40} {
		want, _, _ := purego.SyscallN(libc.labs, uintptr(v))
		if got := Call1(libc.labs, uintptr(v)); got != want {
			t.Errorf("labs(%d): Call1 %d, SyscallN %d", v, got, want)
		}
	}
}

//go:noinline
func goLabs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func BenchmarkCall1(b *testing.B) {
	loadLibc(b)
	b.ReportAllocs()
	var sum uintptr
	for i := 0; i < b.N; i++ {
		sum += Call1(libc.labs, uintptr(-i))
	}
	sink = sum
}

func BenchmarkSyscallN(b *testing.B) {
	loadLibc(b)
	b.ReportAllocs()
	var sum uintptr
	for i := 0; i < b.N; i++ {
		r, _, _ := purego.SyscallN(libc.labs, uintptr(-i))
		sum += r
	}
	sink = sum
}

func BenchmarkCallPre6(b *testing.B) {
	loadLibc(b)
	b.ReportAllocs()
	var sum uintptr
	for i := 0; i < b.N; i++ {
		r, _ := CallPre6(libc.abs, 0, libc.labs, uintptr(-i), 0, 0, 0, 0, 0)
		sum += r
	}
	sink = sum
}

// cudaFns holds CUDA driver functions for the benchmarks that time the call
// the project's CUDA anchor times from C.
type cudaFns struct {
	getCurrent, setCurrent uintptr
	ctx                    uintptr // the primary context of device 0
}

// openCUDA loads the driver, initialises it and retains device 0's primary
// context, or skips where there is no driver or no device.
func openCUDA(b *testing.B) cudaFns {
	lib, err := dl.Open(dl.CUDACandidates...)
	if err != nil {
		b.Skip("no CUDA driver:", err)
	}
	b.Cleanup(func() { lib.Close() })
	sym := func(name string) uintptr {
		p, err := lib.Sym(name)
		if err != nil {
			b.Skip(err)
		}
		return p
	}
	var f cudaFns
	cuInit, deviceGet, retain := sym("cuInit"), sym("cuDeviceGet"), sym("cuDevicePrimaryCtxRetain")
	release := sym("cuDevicePrimaryCtxRelease_v2")
	f.getCurrent, f.setCurrent = sym("cuCtxGetCurrent"), sym("cuCtxSetCurrent")
	if r := int32(Call1(cuInit, 0)); r != 0 {
		b.Skipf("cuInit = %d", r)
	}
	out := new([2]uintptr)
	if r := int32(Call2(deviceGet, uintptr(unsafe.Pointer(&out[0])), 0)); r != 0 {
		b.Skipf("cuDeviceGet = %d", r)
	}
	dev := out[0]
	if r := int32(Call2(retain, uintptr(unsafe.Pointer(&out[1])), dev)); r != 0 {
		b.Skipf("cuDevicePrimaryCtxRetain = %d", r)
	}
	f.ctx = out[1]
	b.Cleanup(func() { Call1(release, dev) })
	return f
}

// BenchmarkCuCtxGetCurrent times cuCtxGetCurrent with a context current,
// as anchors/drvbench.c does in C.
func BenchmarkCuCtxGetCurrent(b *testing.B) {
	f := openCUDA(b)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if r := int32(Call1(f.setCurrent, f.ctx)); r != 0 {
		b.Fatalf("cuCtxSetCurrent = %d", r)
	}
	ctx := new(uintptr)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if int32(Call1(f.getCurrent, uintptr(unsafe.Pointer(ctx)))) != 0 {
			b.Fatal("cuCtxGetCurrent failed")
		}
	}
	b.StopTimer()
	if *ctx != f.ctx {
		b.Fatalf("cuCtxGetCurrent gave %#x, want %#x", *ctx, f.ctx)
	}
}

func BenchmarkCuCtxGetCurrentSyscallN(b *testing.B) {
	f := openCUDA(b)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if r, _, _ := purego.SyscallN(f.setCurrent, f.ctx); int32(r) != 0 {
		b.Fatalf("cuCtxSetCurrent = %d", int32(r))
	}
	ctx := new(uintptr)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r, _, _ := purego.SyscallN(f.getCurrent, uintptr(unsafe.Pointer(ctx))); int32(r) != 0 {
			b.Fatal("cuCtxGetCurrent failed")
		}
	}
	b.StopTimer()
	if *ctx != f.ctx {
		b.Fatalf("cuCtxGetCurrent gave %#x, want %#x", *ctx, f.ctx)
	}
}

// BenchmarkCuCtxGetCurrentPre times the backends' pattern: make the context
// current on whatever thread runs the call, then call, in one transition
// and without locking the goroutine to a thread.
func BenchmarkCuCtxGetCurrentPre(b *testing.B) {
	f := openCUDA(b)
	ctx := new(uintptr)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r, failed := CallPre6(f.setCurrent, f.ctx, f.getCurrent, uintptr(unsafe.Pointer(ctx)), 0, 0, 0, 0, 0); failed || int32(r) != 0 {
			b.Fatal("cuCtxSetCurrent+cuCtxGetCurrent failed")
		}
	}
	b.StopTimer()
	if *ctx != f.ctx {
		b.Fatalf("cuCtxGetCurrent gave %#x, want %#x", *ctx, f.ctx)
	}
}

func BenchmarkGoBaseline(b *testing.B) {
	b.ReportAllocs()
	var sum int64
	for i := 0; i < b.N; i++ {
		sum += goLabs(int64(-i))
	}
	sink = uintptr(sum)
}

var sink uintptr

// CallGuard6 stops at each of its three stages, and calls fn only when pre
// and guard succeed and guard's answer is 0. The guards are clock_gettime
// (CLOCK_MONOTONIC: seconds since boot, non-zero; an unknown clock: -1) and
// clock_getres (CLOCK_REALTIME: a resolution of 0 seconds and some
// nanoseconds, so the answer read, the seconds, is 0).
func TestCallGuard6(t *testing.T) {
	loadLibc(t)
	const realtime, monotonic, unknown = 0, 1, 12345
	src := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	for _, c := range []struct {
		name          string
		preArg, guard uintptr
		guardArg      uintptr
		stage         int
		wantR         uintptr // 0: any non-zero value
		wantFnCalled  bool
	}{
		{"pre fails", ^uintptr(4), libc.clockGetres, realtime, StagePre, 5, false},
		{"guard fails", 0, libc.clockGettime, unknown, StageGuard, 0xFFFFFFFF, false},
		{"guard says no", 0, libc.clockGettime, monotonic, StageNo, 0, false},
		{"all clear", 0, libc.clockGetres, realtime, 0, 0, true},
	} {
		var dst [8]byte
		r, stage := CallGuard6(libc.abs, c.preArg, c.guard, c.guardArg, libc.memmove, ptr(&dst[0]), ptr(&src[0]), 8, 0, 0, 0)
		if stage != c.stage {
			t.Errorf("%s: stage %d, want %d (r %#x)", c.name, stage, c.stage, r)
			continue
		}
		switch {
		case c.wantFnCalled && r != ptr(&dst[0]):
			t.Errorf("%s: r %#x, want memmove's result %#x", c.name, r, ptr(&dst[0]))
		case !c.wantFnCalled && c.wantR != 0 && r != c.wantR:
			t.Errorf("%s: r %#x, want %#x", c.name, r, c.wantR)
		case !c.wantFnCalled && (r == 0 || r > 0xFFFFFFFF):
			t.Errorf("%s: r %#x, want a non-zero 32-bit status", c.name, r)
		}
		if called := dst == src; called != c.wantFnCalled {
			t.Errorf("%s: fn called %v, want %v", c.name, called, c.wantFnCalled)
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		var dst [8]byte
		CallGuard6(libc.abs, 0, libc.clockGetres, realtime, libc.memmove, ptr(&dst[0]), ptr(&src[0]), 8, 0, 0, 0)
	}); n != 0 {
		t.Errorf("CallGuard6 allocates %.1f times a call", n)
	}
}
