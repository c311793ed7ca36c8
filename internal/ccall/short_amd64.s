//go:build linux

#include "textflag.h"

// The short-call trampolines are called from Go (ABI0) on the goroutine
// stack, with the goroutine pinned to its processor. They keep the
// goroutine's stack pointer in R12, which the SysV ABI makes the callee
// preserve, switch SP to the top of the processor's C stack (16-byte
// aligned, as the ABI wants at a call), call, and switch back. The
// arguments are read relative to R12 (the goroutine stack: 0(R12) is the
// return address, the arguments follow) once SP has moved. R14 (g) and
// R15 are callee-saved in C too; X15, which Go's internal ABI wants zero,
// the Go caller zeroes again (and reloads g) after a call to an ABI0
// function.

// func shortcall6(fn, a1, a2, a3, a4, a5, a6, stack uintptr) uintptr
TEXT ·shortcall6(SB), NOSPLIT|NOFRAME, $0-72
	MOVQ SP, R12
	MOVQ fn+0(FP), R10
	MOVQ a1+8(FP), DI
	MOVQ a2+16(FP), SI
	MOVQ a3+24(FP), DX
	MOVQ a4+32(FP), CX
	MOVQ a5+40(FP), R8
	MOVQ a6+48(FP), R9
	MOVQ stack+56(FP), R11
	ANDQ $~15, R11
	MOVQ R11, SP
	XORL AX, AX // no vector registers used (for variadic callees)
	CALL R10
	MOVQ R12, SP
	MOVQ AX, ret+64(FP)
	RET

// func shortpre6(pre, preArg, fn, a1, a2, a3, a4, a5, a6, stack uintptr) (r, failed uintptr)
TEXT ·shortpre6(SB), NOSPLIT|NOFRAME, $0-96
	MOVQ SP, R12
	MOVQ stack+72(FP), R11
	ANDQ $~15, R11
	MOVQ R11, SP
	MOVQ 16(R12), DI // preArg
	MOVQ 8(R12), R10 // pre
	XORL AX, AX
	CALL R10
	TESTL AX, AX
	JNE   prefailed
	MOVQ 32(R12), DI // a1
	MOVQ 40(R12), SI
	MOVQ 48(R12), DX
	MOVQ 56(R12), CX
	MOVQ 64(R12), R8
	MOVQ 72(R12), R9 // a6
	MOVQ 24(R12), R10 // fn
	XORL AX, AX
	CALL R10
	MOVQ R12, SP
	MOVQ AX, r+80(FP)
	MOVQ $0, failed+88(FP)
	RET

prefailed:
	MOVQ R12, SP
	MOVL AX, AX // zero-extend the 32-bit status, as CallPre6 does
	MOVQ AX, r+80(FP)
	MOVQ $1, failed+88(FP)
	RET

// func shortout6(fn, a2, a3, a4, a5, a6, stack uintptr) (r, out uintptr)
// out is the word at the top of the C stack: SP is set 16 bytes below the
// top (still 16-byte aligned), the word at 0(SP) zeroed and its address
// passed as the first argument.
TEXT ·shortout6(SB), NOSPLIT|NOFRAME, $0-72
	MOVQ SP, R12
	MOVQ fn+0(FP), R10
	MOVQ a2+8(FP), SI
	MOVQ a3+16(FP), DX
	MOVQ a4+24(FP), CX
	MOVQ a5+32(FP), R8
	MOVQ a6+40(FP), R9
	MOVQ stack+48(FP), R11
	ANDQ $~15, R11
	SUBQ $16, R11
	MOVQ R11, SP
	MOVQ $0, 0(SP)
	MOVQ SP, DI
	XORL AX, AX
	CALL R10
	MOVQ 0(SP), BX
	MOVQ R12, SP
	MOVQ AX, r+56(FP)
	MOVQ BX, out+64(FP)
	RET

// heldEntry is a C function, void (*)(void *userData), that holds short
// calls off (shortHeld += 1) for as long as it runs heldTarget(userData):
// a C-callable Go function (a purego callback). The hold is taken before
// the thread enters Go and released after it has left, so no short call
// starts while this thread may be waiting for a processor. SysV: on entry
// SP is 8 modulo 16; the SUBQ makes the inner call aligned. DI (userData)
// is passed through untouched.
GLOBL ·heldEntryABI0(SB), NOPTR|RODATA, $8
DATA ·heldEntryABI0(SB)/8, $heldEntry<>(SB)

TEXT heldEntry<>(SB), NOSPLIT|NOFRAME, $0
	LOCK
	INCQ ·shortHeld(SB)
	SUBQ $8, SP
	MOVQ ·heldTarget(SB), AX
	CALL AX
	ADDQ $8, SP
	LOCK
	DECQ ·shortHeld(SB)
	RET
