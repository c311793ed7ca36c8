package ccall

import "unsafe"

// Entry is one call of a batch (CallBatch): the C function Fn with up to
// six integer or pointer arguments, and R, where its return register is
// stored. An Entry holds no Go pointers: what it passes to C follows the
// package's rules for callers.
type Entry struct {
	Fn                     uintptr
	A1, A2, A3, A4, A5, A6 uintptr
	R                      uintptr
}

// frameB is the block the batch trampoline reads: pre and its argument,
// the entries (a pointer to the first and their count), and pre's status
// when it failed. Its layout is shared with the assembly (see go_asm.h).
type frameB struct {
	pre     uintptr
	preArg  uintptr
	entries unsafe.Pointer
	n       uintptr
	r       uintptr
	failed  uintptr
}

// callBatchABI0 is the address of the batch trampoline, defined in the
// assembly files.
var callBatchABI0 uintptr

// CallBatch makes several C calls in one transition into C: pre(preArg)
// first when pre is not 0, and, only if it returned 0, each entry's
// Fn(A1, ..., A6) in order, storing its return register in the entry's R.
// Every entry is called whatever the ones before it returned; a caller that
// needs a call to depend on the one before makes two batches. It returns
// pre's non-zero 32-bit status (zero-extended) with preFailed true, in
// which case no entry was called and their R fields are as they were.
//
// A transition costs about 40 ns (BenchmarkCall1); a batch of n calls
// costs one, where n calls of Call6 cost n. The thread stays in C for the
// whole batch, so a batch should hold calls that return promptly.
//
// The entries may be anywhere in Go memory, the calling goroutine's stack
// included: the trampoline finds them again after every call, through the
// frame, so a callee that calls back into Go and moves the stack meanwhile
// is safe. They must hold no Go pointers. It allocates nothing; the other
// rules for callers are the package's.
//
//go:nosplit
func CallBatch(pre, preArg uintptr, entries []Entry) (r uintptr, preFailed bool) {
	var f frameB
	f.pre = pre
	f.preArg = preArg
	if len(entries) > 0 {
		f.entries = unsafe.Pointer(&entries[0])
		f.n = uintptr(len(entries))
	}
	runtime_cgocall(callBatchABI0, unsafe.Pointer(&f))
	return f.r, f.failed != 0
}
