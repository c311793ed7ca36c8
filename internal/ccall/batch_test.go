package ccall

import (
	"runtime"
	"testing"
)

// TestCallBatch checks that every entry is called in order with its six
// arguments and gets its own result, that pre runs first, and that a failed
// pre stops the batch before any entry.
func TestCallBatch(t *testing.T) {
	loadLibc(t)
	buf := []byte("abcdefgh\x00")
	src := []byte("XY")
	entries := []Entry{
		{Fn: libc.labs, A1: uintptr(^uintptr(41))}, // labs(-42)
		{Fn: libc.memset, A1: ptr(&buf[0]), A2: 'z', A3: 3},
		{Fn: libc.strlen, A1: ptr(&buf[0])},
		{Fn: libc.memmove, A1: ptr(&buf[1]), A2: ptr(&src[0]), A3: 2}, // after memset: zXYdefgh
		{Fn: libc.strchr, A1: ptr(&buf[0]), A2: 'Y'},
		{Fn: libc.getpid},
	}
	for i := range entries {
		entries[i].R = 0xdead
	}
	r, failed := CallBatch(libc.labs, 0, entries) // labs(0) == 0: pre succeeds
	runtime.KeepAlive(buf)
	runtime.KeepAlive(src)
	if failed || r != 0 {
		t.Fatalf("CallBatch = %d, %v; want 0, false", r, failed)
	}
	want := []uintptr{42, ptr(&buf[0]), 8, ptr(&buf[1]), ptr(&buf[2]), uintptr(syscallGetpid())}
	for i, w := range want {
		got := entries[i].R
		if i == 5 {
			got = uintptr(uint32(got))
		}
		if got != w {
			t.Errorf("entry %d: R = %#x, want %#x", i, got, w)
		}
	}
	if string(buf[:8]) != "zXYdefgh" {
		t.Errorf("buffer after the batch = %q, want the memset, then the memmove", buf[:8])
	}

	// A pre that fails stops the batch: nothing is called.
	stopped := []Entry{{Fn: libc.memset, A1: ptr(&buf[0]), A2: 'q', A3: 8, R: 7}}
	r, failed = CallBatch(libc.abs, uintptr(^uintptr(4)), stopped) // abs(-5) == 5
	runtime.KeepAlive(buf)
	if !failed || r != 5 {
		t.Errorf("CallBatch with a failing pre = %d, %v; want 5, true", r, failed)
	}
	if stopped[0].R != 7 || buf[0] != 'z' {
		t.Errorf("an entry ran after pre failed (R %d, buffer %q)", stopped[0].R, buf[:8])
	}

	// No pre, no entries.
	if r, failed := CallBatch(0, 0, nil); r != 0 || failed {
		t.Errorf("empty batch = %d, %v", r, failed)
	}
	one := []Entry{{Fn: libc.labs, A1: uintptr(^uintptr(2))}}
	if _, failed := CallBatch(0, 0, one); failed || one[0].R != 3 {
		t.Errorf("batch of one without pre: R %d, failed %v", one[0].R, failed)
	}
}

// TestCallBatchAfterStackMove checks that the batch goes on, and reports to
// the caller's frame, when a callee called back into Go and the goroutine's
// stack moved meanwhile.
func TestCallBatchAfterStackMove(t *testing.T) {
	loadLibc(t)
	cb := growCallback()
	for i := uintptr(0); i < 3; i++ {
		done := make(chan []uintptr)
		go func() { // fresh goroutine: small stack, certain to move
			entries := make([]Entry, 3) // heap: the rule for callees that call back
			entries[0] = Entry{Fn: cb, A1: 5 + i}
			entries[1] = Entry{Fn: libc.labs, A1: ^uintptr(8)}
			entries[2] = Entry{Fn: cb, A1: 9 + i}
			r, failed := CallBatch(libc.abs, 0, entries)
			f := uintptr(0)
			if failed {
				f = 1
			}
			done <- []uintptr{entries[0].R, entries[1].R, entries[2].R, r, f}
		}()
		got := <-done
		want := []uintptr{5 + i + 1000, 9, 9 + i + 1000, 0, 0}
		for j := range want {
			if got[j] != want[j] {
				t.Errorf("round %d: results after the stack moved = %v, want %v", i, got, want)
				break
			}
		}
	}
}

// BenchmarkCallBatch4 is four calls in one batch, against
// BenchmarkCall1x4: what the transitions saved are worth.
func BenchmarkCallBatch4(b *testing.B) {
	loadLibc(b)
	entries := make([]Entry, 4)
	for i := range entries {
		entries[i].Fn = libc.labs
	}
	b.ReportAllocs()
	var sum uintptr
	for i := 0; i < b.N; i++ {
		for j := range entries {
			entries[j].A1 = uintptr(-i - j)
		}
		CallBatch(0, 0, entries)
		sum += entries[3].R
	}
	sink = sum
}

// BenchmarkCall1x4 is four calls of Call1, one transition each.
func BenchmarkCall1x4(b *testing.B) {
	loadLibc(b)
	b.ReportAllocs()
	var sum uintptr
	for i := 0; i < b.N; i++ {
		for j := 0; j < 4; j++ {
			sum += Call1(libc.labs, uintptr(-i-j))
		}
	}
	sink = sum
}
