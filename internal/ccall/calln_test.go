package ccall

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// TestCallNSnprintf formats MaxArgs-3 integers through snprintf: every
// register and every stack slot CallN fills reaches C, in order, with and
// without a pre function.
func TestCallNSnprintf(t *testing.T) {
	loadLibc(t)
	fn, err := snprintf()
	if err != nil {
		t.Fatal(err)
	}
	n := MaxArgs - 3
	format := []byte(strings.Repeat("%ld ", n-1) + "%ld\x00")
	buf := make([]byte, 1024)
	heap = append(heap, buf, format) // the addresses below outlive calls that may move the stack
	args := make([]uintptr, 0, MaxArgs)
	args = append(args, ptr(&buf[0]), uintptr(len(buf)), ptr(&format[0]))
	var want []string
	for i := 0; i < n; i++ {
		v := int64(i*i+1) * int64(1-2*(i%2))
		if i == n-1 {
			v = -(1 << 50)
		}
		args = append(args, uintptr(v))
		want = append(want, fmt.Sprint(v))
	}
	w := strings.Join(want, " ")
	for _, pre := range []uintptr{0, libc.abs} {
		clear(buf)
		r, failed, ok := CallN(pre, 0, fn, args)
		runtime.KeepAlive(format)
		if !ok || failed || int(int32(r)) != len(w) {
			t.Fatalf("pre %#x: CallN = (%d, %v, %v), want (%d, false, true)", pre, int32(r), failed, ok, len(w))
		}
		if got := string(buf[:len(w)]); got != w {
			t.Errorf("pre %#x: snprintf wrote %q, want %q", pre, got, w)
		}
	}
	// A failing pre stops the call.
	buf[0] = 'z'
	r, failed, ok := CallN(libc.abs, ^uintptr(6), fn, args)
	runtime.KeepAlive(format)
	if !ok || !failed || r != 7 || buf[0] != 'z' {
		t.Errorf("CallN with failing pre = (%d, %v, %v), buf[0] %q; want (7, true, true), 'z'", r, failed, ok, buf[0])
	}
	// Too many arguments: no call.
	if _, _, ok := CallN(0, 0, fn, make([]uintptr, MaxArgs+1)); ok {
		t.Error("CallN with MaxArgs+1 arguments made the call")
	}
}

// heap keeps the test's buffers off the goroutine stack.
var heap [][]byte

// TestCallNAllocs: a call allocates nothing.
func TestCallNAllocs(t *testing.T) {
	loadLibc(t)
	a := testing.AllocsPerRun(100, func() {
		CallN(0, 0, libc.abs, []uintptr{^uintptr(4)})
	})
	if a != 0 {
		t.Errorf("CallN allocates %v per call", a)
	}
}
