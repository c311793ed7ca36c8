//go:build linux && (amd64 || arm64)

package ccall

import (
	"fmt"
	"syscall"
	"unsafe"
)

const shortSupported = true

// shortcall6 switches to the C stack whose top is stack, calls
// fn(a1, ..., a6) there and returns its result (short_amd64.s,
// short_arm64.s).
//
//go:noescape
func shortcall6(fn, a1, a2, a3, a4, a5, a6, stack uintptr) uintptr

// shortpre6 is shortcall6 after pre(preArg), which must return 0 for fn to
// be called; failed is 1, and r pre's result, if it did not.
//
//go:noescape
func shortpre6(pre, preArg, fn, a1, a2, a3, a4, a5, a6, stack uintptr) (r, failed uintptr)

// shortout6 is shortcall6 for fn(&out, a2, ..., a6), out a zeroed word at
// the top of the C stack.
//
//go:noescape
func shortout6(fn, a2, a3, a4, a5, a6, stack uintptr) (r, out uintptr)

// mapStack maps size bytes of address space for a C stack, with no memory
// reserved, plus a guard page below it, and returns where a call's stack
// pointer starts: shortSlack below the top of the mapping.
func mapStack(size int) (uintptr, error) {
	page := syscall.Getpagesize()
	b, err := syscall.Mmap(-1, 0, size+page, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE|syscall.MAP_STACK)
	if err != nil {
		return 0, fmt.Errorf("ccall: mapping a C stack of %d bytes: %w", size, err)
	}
	if err := syscall.Mprotect(b[:page], syscall.PROT_NONE); err != nil {
		_ = syscall.Munmap(b)
		return 0, fmt.Errorf("ccall: guarding a C stack: %w", err)
	}
	// The mapping lives as long as the process: a processor's stack is
	// used by every later short call on it.
	return uintptr(unsafe.Pointer(&b[0])) + uintptr(size+page) - shortSlack, nil
}
