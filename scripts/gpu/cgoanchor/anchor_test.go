//go:build cgoanchor && cgo

package cgoanchor

import (
	"os"
	"testing"
	"unsafe"

	"github.com/gpumem/gpumem/driver"
	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/native"
	"github.com/gpumem/gpumem/internal/symtab"
)

var sink uintptr

func BenchmarkTransition(b *testing.B) {
	lib := os.Getenv("GPUMEM_CUDA_LIBRARY")
	if lib == "" {
		lib = "libcuda.so.1"
	}
	if r := load(lib); r != 0 {
		b.Skipf("no CUDA device through %s (status %d)", lib, r)
	}
	be, err := driver.Open("")
	if err != nil {
		b.Skipf("no CUDA backend: %v", err)
	}
	defer be.Close()
	nb := be.(*native.Backend)
	p := uintptr(unsafe.Pointer(&sink))
	b.Run("gpumem", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := nb.CallCurrent(0, symtab.GetCurrent, p); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The trampoline alone on the same driver functions, without the
	// backend's layers: what the layers cost, and what the trampoline does.
	setFn, getFn, ctx, out := driverAddrs()
	b.Run("ccall-alone", func(b *testing.B) {
		for b.Loop() {
			if r, failed := ccall.CallPre6(setFn, ctx, getFn, out, 0, 0, 0, 0, 0); failed || int32(r) != 0 {
				b.Fatal(r, failed)
			}
		}
	})
	b.Run("ccall-get-only", func(b *testing.B) {
		for b.Loop() {
			if r := ccall.Call1(getFn, out); int32(r) != 0 {
				b.Fatal(r)
			}
		}
	})
	b.Run("cgo-get-only", func(b *testing.B) {
		for b.Loop() {
			if get() != 0 {
				b.Fatal("cuCtxGetCurrent failed")
			}
		}
	})
	b.Run("cgo-one-call", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if setGet() != 0 {
				b.Fatal("cuCtxSetCurrent+cuCtxGetCurrent failed")
			}
		}
	})
	b.Run("cgo-two-calls", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if set() != 0 || get() != 0 {
				b.Fatal("cuCtxSetCurrent or cuCtxGetCurrent failed")
			}
		}
	})
	b.Run("C", func(b *testing.B) {
		ns := cLoop(b.N)
		if ns < 0 {
			b.Fatal("the C loop failed")
		}
		b.ReportMetric(ns, "C-ns/op")
	})
}

// BenchmarkTrampoline is the call path alone, on any machine: a function
// made "current" and a call, both labs, through gpumem's one-transition
// trampoline and through one cgo call.
func BenchmarkTrampoline(b *testing.B) {
	fn := labsAddr()
	b.Run("gpumem", func(b *testing.B) {
		for b.Loop() {
			if r, failed := ccall.CallPre6(fn, 0, fn, ^uintptr(4), 0, 0, 0, 0, 0); failed || r != 5 {
				b.Fatal(r, failed)
			}
		}
	})
	b.Run("cgo-one-call", func(b *testing.B) {
		for b.Loop() {
			if labs2(-5) != 5 {
				b.Fatal("labs")
			}
		}
	})
}
