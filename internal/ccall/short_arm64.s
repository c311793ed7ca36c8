//go:build linux

#include "textflag.h"

// The short-call trampolines are called from Go (ABI0) on the goroutine
// stack, with the goroutine pinned to its processor. They keep the
// goroutine's stack pointer in R19 and their return address in R20, both
// callee-saved under AAPCS64, switch RSP to the top of the processor's C
// stack (16-byte aligned, as AAPCS64 requires), call, and switch back. The
// arguments are read relative to R19 once RSP has moved (8(R19) is the
// first: Go's arm64 frames keep the return address slot at 0). R28 (g) and
// R29 (the frame pointer) are callee-saved in C too; the C callee builds
// its own frame record.

// func shortcall6(fn, a1, a2, a3, a4, a5, a6, stack uintptr) uintptr
TEXT ·shortcall6(SB), NOSPLIT|NOFRAME, $0-72
	MOVD RSP, R19
	MOVD R30, R20
	MOVD fn+0(FP), R10
	MOVD a1+8(FP), R0
	MOVD a2+16(FP), R1
	MOVD a3+24(FP), R2
	MOVD a4+32(FP), R3
	MOVD a5+40(FP), R4
	MOVD a6+48(FP), R5
	MOVD stack+56(FP), R11
	AND  $~15, R11
	MOVD R11, RSP
	BL   (R10)
	MOVD R19, RSP
	MOVD R20, R30
	MOVD R0, ret+64(FP)
	RET

// func shortpre6(pre, preArg, fn, a1, a2, a3, a4, a5, a6, stack uintptr) (r, failed uintptr)
TEXT ·shortpre6(SB), NOSPLIT|NOFRAME, $0-96
	MOVD RSP, R19
	MOVD R30, R20
	MOVD stack+72(FP), R11
	AND  $~15, R11
	MOVD R11, RSP
	MOVD 16(R19), R0 // preArg
	MOVD 8(R19), R10 // pre
	BL   (R10)
	CBNZW R0, prefailed
	MOVD 32(R19), R0 // a1
	MOVD 40(R19), R1
	MOVD 48(R19), R2
	MOVD 56(R19), R3
	MOVD 64(R19), R4
	MOVD 72(R19), R5 // a6
	MOVD 24(R19), R10 // fn
	BL   (R10)
	MOVD R19, RSP
	MOVD R20, R30
	MOVD R0, r+80(FP)
	MOVD $0, R1
	MOVD R1, failed+88(FP)
	RET

prefailed:
	MOVD R19, RSP
	MOVD R20, R30
	MOVWU R0, R0 // zero-extend the 32-bit status, as CallPre6 does
	MOVD R0, r+80(FP)
	MOVD $1, R1
	MOVD R1, failed+88(FP)
	RET

// func shortout6(fn, a2, a3, a4, a5, a6, stack uintptr) (r, out uintptr)
// out is the word at the top of the C stack: RSP is set 16 bytes below the
// top (still 16-byte aligned), the word at 0(RSP) zeroed and its address
// passed as the first argument.
TEXT ·shortout6(SB), NOSPLIT|NOFRAME, $0-72
	MOVD RSP, R19
	MOVD R30, R20
	MOVD fn+0(FP), R10
	MOVD a2+8(FP), R1
	MOVD a3+16(FP), R2
	MOVD a4+24(FP), R3
	MOVD a5+32(FP), R4
	MOVD a6+40(FP), R5
	MOVD stack+48(FP), R11
	AND  $~15, R11
	SUB  $16, R11
	MOVD R11, RSP
	MOVD ZR, 0(RSP)
	MOVD RSP, R0
	BL   (R10)
	MOVD 0(RSP), R1
	MOVD R19, RSP
	MOVD R20, R30
	MOVD R0, r+56(FP)
	MOVD R1, out+64(FP)
	RET

// heldEntry is a C function, void (*)(void *userData), that holds short
// calls off (shortHeld += 1) for as long as it runs heldTarget(userData):
// a C-callable Go function (a purego callback). The hold is taken before
// the thread enters Go and released after it has left, so no short call
// starts while this thread may be waiting for a processor. It keeps an
// AAPCS64 frame record (R29, R30) for its inner call; R0 (userData) is
// passed through untouched.
GLOBL ·heldEntryABI0(SB), NOPTR|RODATA, $8
DATA ·heldEntryABI0(SB)/8, $heldEntry<>(SB)

TEXT heldEntry<>(SB), NOSPLIT|NOFRAME, $0
	STP.W (R29, R30), -16(RSP)
	MOVD  RSP, R29
	MOVD  $·shortHeld(SB), R9
inc:
	LDAXR (R9), R10
	ADD   $1, R10
	STLXR R10, (R9), R11
	CBNZW R11, inc
	MOVD  $·heldTarget(SB), R9
	MOVD  (R9), R10
	BL    (R10)
	MOVD  $·shortHeld(SB), R9
dec:
	LDAXR (R9), R10
	SUB   $1, R10
	STLXR R10, (R9), R11
	CBNZW R11, dec
	LDP.P 16(RSP), (R29, R30)
	RET
