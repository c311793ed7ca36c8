// Package ccall calls C functions by address from Go without cgo, faster
// than purego.SyscallN and without allocating.
//
// # How a call is made
//
// Each CallN builds a small frame on its own stack (the function, six
// argument words, the result) and enters C once through runtime.cgocall,
// the same path cgo-generated code takes: the goroutine is marked as in a
// system call (so the scheduler runs other goroutines meanwhile), the OS
// thread switches to its system stack, and an assembly trampoline loads the
// six C argument registers (SysV amd64: RDI, RSI, RDX, RCX, R8, R9; AAPCS64:
// X0-X5) from the frame, calls the function and stores its return register
// back into the frame. runtime.cgocall is declared go:noescape here, so the
// frame stays on the goroutine stack and a call allocates nothing. With
// CGO_ENABLED=0 the Go runtime's C support comes from purego's fake cgo
// runtime, which this package links in by importing purego; with
// CGO_ENABLED=1 it is runtime/cgo.
//
// Passing more arguments than the C function takes is harmless on both
// ABIs, so CallN may be used for any function of at most N integer or
// pointer arguments. Floating-point arguments and structs passed by value
// (except those the ABI passes in one integer register) are not supported.
//
// CallPre12 takes up to twelve arguments (cuLaunchKernel and
// hipModuleLaunchKernel take eleven, cuLibraryLoadData eight): its
// trampolines pass the first six (amd64) or eight (arm64) in registers and
// the rest in 8-byte slots at the bottom of the C stack, 16-byte aligned at
// the call, as the two ABIs require. An argument narrower than 8 bytes
// (unsigned int) occupies a whole slot on both; its upper bits are ignored
// by the callee.
//
// # Results
//
// The result is the full C return register (RAX or X0). A C function that
// returns a 32-bit int or enum (CUresult, hipError_t) leaves the upper half
// undefined: callers convert with int32(r).
//
// # Rules for callers
//
//   - A pointer into Go memory is passed as uintptr(unsafe.Pointer(p)). The
//     garbage collector does not see a uintptr as a reference: keep a heap
//     object alive until the call returns with runtime.KeepAlive(p) after the
//     call. The callee must not keep the pointer after it returns.
//   - Go memory passed to C must not contain Go pointers that C reads or
//     writes (the usual cgo rule).
//   - Pointers to variables on the calling goroutine's stack are fine when
//     the conversion to uintptr is written in the call's own argument list
//     (with no other function call among the arguments): CallN and
//     runtime.cgocall are nosplit, so the stack cannot grow and move between
//     the conversion and the C call, and a goroutine's stack is not moved
//     while it is in C. A uintptr kept in a variable across other calls may
//     go stale.
//   - That holds only while C does not call back into Go on the same thread;
//     a callee that does (a callback run synchronously) may see the stack
//     move under it, so pass heap memory to such functions. The call's own
//     frame is safe in that case: the trampoline finds it again after the
//     call.
//   - The function must follow the platform C ABI and must not unwind
//     (longjmp, C++ exceptions) through the call.
package ccall

import (
	"unsafe"

	// purego provides the C runtime support (fake cgo) that
	// runtime.cgocall needs when the program is built with CGO_ENABLED=0.
	_ "github.com/ebitengine/purego"
)

// frame is the block a trampoline reads its arguments from and writes its
// results to. Its layout is shared with the assembly (see go_asm.h).
//
// The Call functions fill it field by field: from a composite literal the
// compiler builds the frame aside and copies it in 16-byte moves that
// stall on the 8-byte stores just before them (a failed store-to-load
// forward), which cost about 7 ns of a 46 ns call (BenchmarkCallPre6Status
// in the history; scripts/gpu/cgoanchor's BenchmarkTrampoline).
type frame struct {
	fn     uintptr
	a1     uintptr
	a2     uintptr
	a3     uintptr
	a4     uintptr
	a5     uintptr
	a6     uintptr
	pre    uintptr // CallPre6 only
	preArg uintptr // CallPre6 only
	r      uintptr // the function's return register
	failed uintptr // CallPre6: the stage that stopped the call (0: none)
}

// frameG is frame with CallGuard6's question: the same fields first, then
// the guard's. Its layout is shared with the assembly (see go_asm.h).
type frameG struct {
	fn       uintptr
	a1       uintptr
	a2       uintptr
	a3       uintptr
	a4       uintptr
	a5       uintptr
	a6       uintptr
	pre      uintptr
	preArg   uintptr
	r        uintptr
	failed   uintptr    // the stage that stopped the call (0: none)
	guard    uintptr    // guard function
	guardArg uintptr    // its first argument
	gout     [2]uintptr // where guard writes its answer (the first 32 bits are read)
}

// frame12 is frame for up to twelve arguments (CallPre12). Its layout is
// shared with the assembly (see go_asm.h).
type frame12 struct {
	fn                     uintptr
	a1, a2, a3, a4, a5, a6 uintptr
	a7, a8, a9, a10, a11   uintptr
	a12                    uintptr
	pre                    uintptr
	preArg                 uintptr
	r                      uintptr
	failed                 uintptr
}

// MaxArgs is the most argument words CallN passes: six (amd64) or eight
// (arm64) in registers and the rest in the C stack's argument slots. It
// covers the widest functions the shipped bindings call (cublasGemmEx's 19
// arguments, ncclCommInitRank's 128-byte id passed by value on amd64).
const MaxArgs = 24

// frameN is frame for up to MaxArgs arguments (CallN). Its layout is shared
// with the assembly (see go_asm.h).
//
// The arguments stay where the caller has them (args points at the first,
// n counts them): the trampoline copies them onto the system stack on
// entry, before pre runs, so CallN's own frame stays small (its callers are
// nosplit and share the goroutine stack's nosplit budget with
// runtime.cgocall, which is deepest on darwin) and a stack moved by a
// callback during pre cannot leave the trampoline reading the old one.
type frameN struct {
	fn     uintptr
	pre    uintptr
	preArg uintptr
	r      uintptr
	failed uintptr
	args   unsafe.Pointer
	n      uintptr
}

// Addresses of the trampolines (ABI0, entered with the C calling convention
// with a *frame as their only argument), defined in the assembly files.
var (
	call6ABI0      uintptr
	callPre6ABI0   uintptr
	callGuard6ABI0 uintptr
	callPre12ABI0  uintptr
	callNABI0      uintptr
)

// runtime_cgocall switches to the system stack and calls fn(arg) with the
// C calling convention, telling the scheduler the goroutine is in C. The
// frame is not retained after the call returns, hence noescape.
//
//go:linkname runtime_cgocall runtime.cgocall
//go:noescape
func runtime_cgocall(fn uintptr, arg unsafe.Pointer) int32

// Call0 calls the C function fn().
//
//go:nosplit
func Call0(fn uintptr) uintptr {
	var f frame
	f.fn = fn
	runtime_cgocall(call6ABI0, unsafe.Pointer(&f))
	return f.r
}

// Call1 calls the C function fn(a1).
//
//go:nosplit
func Call1(fn, a1 uintptr) uintptr {
	var f frame
	f.fn = fn
	f.a1 = a1
	runtime_cgocall(call6ABI0, unsafe.Pointer(&f))
	return f.r
}

// Call2 calls the C function fn(a1, a2).
//
//go:nosplit
func Call2(fn, a1, a2 uintptr) uintptr {
	var f frame
	f.fn = fn
	f.a1 = a1
	f.a2 = a2
	runtime_cgocall(call6ABI0, unsafe.Pointer(&f))
	return f.r
}

// Call3 calls the C function fn(a1, a2, a3).
//
//go:nosplit
func Call3(fn, a1, a2, a3 uintptr) uintptr {
	var f frame
	f.fn = fn
	f.a1 = a1
	f.a2 = a2
	f.a3 = a3
	runtime_cgocall(call6ABI0, unsafe.Pointer(&f))
	return f.r
}

// Call4 calls the C function fn(a1, a2, a3, a4).
//
//go:nosplit
func Call4(fn, a1, a2, a3, a4 uintptr) uintptr {
	var f frame
	f.fn = fn
	f.a1 = a1
	f.a2 = a2
	f.a3 = a3
	f.a4 = a4
	runtime_cgocall(call6ABI0, unsafe.Pointer(&f))
	return f.r
}

// Call5 calls the C function fn(a1, a2, a3, a4, a5).
//
//go:nosplit
func Call5(fn, a1, a2, a3, a4, a5 uintptr) uintptr {
	var f frame
	f.fn = fn
	f.a1 = a1
	f.a2 = a2
	f.a3 = a3
	f.a4 = a4
	f.a5 = a5
	runtime_cgocall(call6ABI0, unsafe.Pointer(&f))
	return f.r
}

// Call6 calls the C function fn(a1, a2, a3, a4, a5, a6).
//
//go:nosplit
func Call6(fn, a1, a2, a3, a4, a5, a6 uintptr) uintptr {
	var f frame
	f.fn = fn
	f.a1 = a1
	f.a2 = a2
	f.a3 = a3
	f.a4 = a4
	f.a5 = a5
	f.a6 = a6
	runtime_cgocall(call6ABI0, unsafe.Pointer(&f))
	return f.r
}

// CallPre6 calls pre(preArg) and, only if it returned 0, fn(a1, ..., a6),
// both on one OS thread within a single transition to C. It returns fn's
// result with preFailed false, or pre's non-zero result with preFailed true.
//
// pre's result is tested and returned as a 32-bit C int (zero-extended), as
// befits the status-returning functions it is meant for: cuCtxSetCurrent or
// hipSetDevice, which make a context or device current on whatever thread
// runs the call, so that callers never need runtime.LockOSThread.
//
//go:nosplit
func CallPre6(pre, preArg, fn, a1, a2, a3, a4, a5, a6 uintptr) (r uintptr, preFailed bool) {
	var f frame
	f.fn = fn
	f.a1 = a1
	f.a2 = a2
	f.a3 = a3
	f.a4 = a4
	f.a5 = a5
	f.a6 = a6
	f.pre = pre
	f.preArg = preArg
	runtime_cgocall(callPre6ABI0, unsafe.Pointer(&f))
	return f.r, f.failed != 0
}

// CallPre12 is CallPre6 for functions of up to twelve integer or pointer
// arguments: pre(preArg) and, only if it returned 0, fn(a1, ..., a12), in
// one transition into C. It returns fn's result with preFailed false, or
// pre's non-zero 32-bit status (zero-extended) with preFailed true. It
// allocates nothing; the rules for callers are the package's.
//
//go:nosplit
func CallPre12(pre, preArg, fn, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12 uintptr) (r uintptr, preFailed bool) {
	var f frame12
	f.fn = fn
	f.a1 = a1
	f.a2 = a2
	f.a3 = a3
	f.a4 = a4
	f.a5 = a5
	f.a6 = a6
	f.a7 = a7
	f.a8 = a8
	f.a9 = a9
	f.a10 = a10
	f.a11 = a11
	f.a12 = a12
	f.pre = pre
	f.preArg = preArg
	runtime_cgocall(callPre12ABI0, unsafe.Pointer(&f))
	return f.r, f.failed != 0
}

// CallN calls pre(preArg) when pre is not 0 and, only if it returned 0,
// fn(args...), in one transition into C. args holds at most MaxArgs integer
// or pointer words in the C order (a struct the ABI passes in memory is
// laid out by the caller as the words the ABI puts on the stack); more are
// not passed and the call is not made (ok false). It returns fn's result
// with preFailed false, or pre's non-zero 32-bit status (zero-extended)
// with preFailed true. It allocates nothing; the rules for callers are the
// package's, and since CallN is nosplit, a pointer to the caller's stack
// converted in the argument list of a nosplit caller stays valid.
//
//go:nosplit
func CallN(pre, preArg, fn uintptr, args []uintptr) (r uintptr, preFailed, ok bool) {
	if len(args) > MaxArgs {
		return 0, false, false
	}
	var f frameN
	f.fn, f.pre, f.preArg = fn, pre, preArg
	if len(args) > 0 {
		f.args, f.n = unsafe.Pointer(&args[0]), uintptr(len(args))
	}
	runtime_cgocall(callNABI0, unsafe.Pointer(&f))
	return f.r, f.failed != 0, true
}

// Stages of CallGuard6 that stop before fn is called.
const (
	StagePre   = 1 // pre returned non-zero; r is its status
	StageGuard = 2 // guard returned non-zero; r is its status
	StageNo    = 3 // guard answered non-zero; r is the answer, fn was not called
)

// CallGuard6 is CallPre6 with a question asked in between, all on one OS
// thread within a single transition to C: pre(preArg); then
// guard(guardArg, &answer), where guard stores a 32-bit answer; then, only if
// both returned 0 and the answer is 0, fn(a1, ..., a6). It returns fn's
// result and stage 0, or the stage that stopped it (StagePre, StageGuard,
// StageNo) with that stage's status or answer, zero-extended from 32 bits.
//
// It is meant for calls that must not be made while a stream is being
// captured into a graph: guard is cuStreamIsCapturing or
// hipStreamIsCapturing, guardArg the stream, and a non-zero answer (capture
// active or invalidated) leaves the decision to the caller.
//
//go:nosplit
func CallGuard6(pre, preArg, guard, guardArg, fn, a1, a2, a3, a4, a5, a6 uintptr) (r uintptr, stage int) {
	var f frameG
	f.fn = fn
	f.a1 = a1
	f.a2 = a2
	f.a3 = a3
	f.a4 = a4
	f.a5 = a5
	f.a6 = a6
	f.pre = pre
	f.preArg = preArg
	f.guard = guard
	f.guardArg = guardArg
	runtime_cgocall(callGuard6ABI0, unsafe.Pointer(&f))
	return f.r, int(f.failed)
}

// MaxGoString is the most bytes GoString copies: a name, a version or a
// compiler log, never a runaway read of memory without a NUL.
const MaxGoString = 1 << 20

// GoString copies the NUL-terminated C string at p (for example the
// const char* that cuGetErrorName stores) into a Go string, at most
// MaxGoString bytes of it. A zero p gives "". p must point to readable
// memory holding a NUL-terminated string.
func GoString(p uintptr) string {
	if p == 0 {
		return ""
	}
	// Convert without a uintptr->unsafe.Pointer conversion that vet
	// flags: p is C memory the garbage collector does not manage.
	ptr := *(*unsafe.Pointer)(unsafe.Pointer(&p))
	n := 0
	for n < MaxGoString && *(*byte)(unsafe.Add(ptr, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(ptr), n))
}
