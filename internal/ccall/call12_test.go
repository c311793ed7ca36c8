package ccall

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/ebitengine/purego"

	"github.com/gpumem/gpumem/internal/dl"
)

// snprintf is libc's, for CallPre12: a C function with arguments on the
// stack (it is variadic, which both ABIs pass like named arguments of the
// same types on Linux).
var snprintf = sync.OnceValues(func() (uintptr, error) {
	lib, err := dl.Open("libc.so.6")
	if err != nil {
		return 0, err
	}
	return lib.Sym("snprintf")
})

// TestCallPre12Snprintf formats nine integers: arguments 4..12 reach C in
// their registers and stack slots, in order.
func TestCallPre12Snprintf(t *testing.T) {
	loadLibc(t)
	fn, err := snprintf()
	if err != nil {
		t.Fatal(err)
	}
	format := []byte("%ld %ld %ld %ld %ld %ld %ld %ld %ld\x00")
	buf := make([]byte, 128)
	vals := [9]int64{-1, 2, 1 << 40, 4, -5, 6, 7, 8, -(1 << 50)}
	r, failed := CallPre12(libc.abs, 0, fn, ptr(&buf[0]), uintptr(len(buf)), ptr(&format[0]),
		uintptr(vals[0]), uintptr(vals[1]), uintptr(vals[2]), uintptr(vals[3]), uintptr(vals[4]),
		uintptr(vals[5]), uintptr(vals[6]), uintptr(vals[7]), uintptr(vals[8]))
	runtime.KeepAlive(format)
	want := fmt.Sprintf("%d %d %d %d %d %d %d %d %d", vals[0], vals[1], vals[2], vals[3], vals[4], vals[5], vals[6], vals[7], vals[8])
	if failed || int(int32(r)) != len(want) {
		t.Fatalf("snprintf = (%d, %v), want (%d, false)", int32(r), failed, len(want))
	}
	if got := string(buf[:len(want)]); got != want {
		t.Errorf("snprintf wrote %q, want %q", got, want)
	}
	// A failing pre stops the call.
	buf[0] = 'z'
	r, failed = CallPre12(libc.abs, ^uintptr(6), fn, ptr(&buf[0]), uintptr(len(buf)), ptr(&format[0]), 0, 0, 0, 0, 0, 0, 0, 0, 0)
	runtime.KeepAlive(format)
	if !failed || r != 7 || buf[0] != 'z' {
		t.Errorf("CallPre12 with failing pre = (%d, %v), buf[0] %q; want (7, true), 'z'", r, failed, buf[0])
	}
}

// args12 is a C-callable Go function of twelve arguments that records them
// and returns their weighted sum; it grows the goroutine stack first, so
// that the stack moves while the trampoline waits for it.
var args12 = sync.OnceValue(func() uintptr {
	return purego.NewCallback(func(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12 uintptr) uintptr {
		got := [12]uintptr{a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12}
		seen.mu.Lock()
		seen.v = got
		seen.mu.Unlock()
		var sum uintptr
		for i, v := range got {
			sum += uintptr(i+1) * v
		}
		return sum + uintptr(deep(300)) - 300
	})
})

// seen is what args12 last received.
var seen struct {
	mu sync.Mutex
	v  [12]uintptr
}

// TestCallPre12Positions passes twelve distinct values, each argument
// position (register or stack slot) to its own parameter, from fresh
// goroutines whose stacks move during the call.
func TestCallPre12Positions(t *testing.T) {
	loadLibc(t)
	cb := args12()
	for round := uintptr(0); round < 4; round++ {
		var in [12]uintptr
		var want uintptr
		for i := range in {
			in[i] = (round+1)<<32 | uintptr(i+1)*0x1111
			want += uintptr(i+1) * in[i]
		}
		done := make(chan uintptr)
		go func() {
			r, failed := CallPre12(libc.abs, 0, cb, in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], in[8], in[9], in[10], in[11])
			if failed {
				r = 0
			}
			done <- r
		}()
		if r := <-done; r != want {
			t.Errorf("round %d: result %#x, want %#x", round, r, want)
		}
		seen.mu.Lock()
		got := seen.v
		seen.mu.Unlock()
		if got != in {
			t.Errorf("round %d: callee saw %#x, want %#x", round, got, in)
		}
	}
}

func TestCallPre12NoAllocations(t *testing.T) {
	loadLibc(t)
	fn, err := snprintf()
	if err != nil {
		t.Fatal(err)
	}
	format := []byte("%ld%ld%ld%ld%ld%ld%ld%ld%ld\x00")
	buf := make([]byte, 256)
	b, f := ptr(&buf[0]), ptr(&format[0])
	if n := testing.AllocsPerRun(200, func() {
		CallPre12(libc.abs, 0, fn, b, 256, f, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	}); n != 0 {
		t.Errorf("CallPre12 allocates %v times per call", n)
	}
	runtime.KeepAlive(buf)
	runtime.KeepAlive(format)
}

func BenchmarkCallPre12(b *testing.B) {
	loadLibc(b)
	for i := 0; i < b.N; i++ {
		CallPre12(libc.abs, 0, libc.labs, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
	}
}
