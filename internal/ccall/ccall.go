// Package ccall calls C functions, found with internal/dl, from Go without cgo.
package ccall

import (
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Call0 calls fn().
func Call0(fn uintptr) uintptr { r, _, _ := purego.SyscallN(fn); return r }

// Call1 calls fn(a1).
func Call1(fn, a1 uintptr) uintptr { r, _, _ := purego.SyscallN(fn, a1); return r }

// Call2 calls fn(a1, a2).
func Call2(fn, a1, a2 uintptr) uintptr { r, _, _ := purego.SyscallN(fn, a1, a2); return r }

// Call3 calls fn(a1, a2, a3).
func Call3(fn, a1, a2, a3 uintptr) uintptr { r, _, _ := purego.SyscallN(fn, a1, a2, a3); return r }

// Call4 calls fn(a1, ..., a4).
func Call4(fn, a1, a2, a3, a4 uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, a1, a2, a3, a4)
	return r
}

// Call5 calls fn(a1, ..., a5).
func Call5(fn, a1, a2, a3, a4, a5 uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, a1, a2, a3, a4, a5)
	return r
}

// Call6 calls fn(a1, ..., a6).
func Call6(fn, a1, a2, a3, a4, a5, a6 uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, a1, a2, a3, a4, a5, a6)
	return r
}

// CallPre6 calls pre(preArg) and, only if it returned 0, fn(a1, ..., a6), both
// on the same OS thread. It returns fn's result, or pre's non-zero result with
// preFailed set.
func CallPre6(pre, preArg, fn, a1, a2, a3, a4, a5, a6 uintptr) (r uintptr, preFailed bool) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if p, _, _ := purego.SyscallN(pre, preArg); p != 0 {
		return p, true
	}
	r, _, _ = purego.SyscallN(fn, a1, a2, a3, a4, a5, a6)
	return r, false
}

// GoString copies the NUL-terminated C string at p into a Go string. A zero p
// gives "".
func GoString(p uintptr) string {
	if p == 0 {
		return ""
	}
	ptr := *(*unsafe.Pointer)(unsafe.Pointer(&p))
	n := 0
	for *(*byte)(unsafe.Add(ptr, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(ptr), n))
}
