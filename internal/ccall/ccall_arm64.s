//go:build linux

#include "textflag.h"
#include "go_asm.h"

// The trampolines are entered from runtime.cgocall on the system stack with
// the AAPCS64 calling convention: R0 holds a *frame. They use only
// caller-saved registers (R0-R10) and build a standard AAPCS64 frame by
// hand (NOFRAME): Go's own prologue would save the frame pointer below the
// new stack pointer, where the C callee's frame would overwrite it.
//
// Frame (48 bytes, 16-byte aligned): 0(RSP) saved R29, 8(RSP) saved R30,
// 16(RSP) frame pointer at entry, 24(RSP) stack top at entry, 32(RSP) result.
//
// The *frame lives on the goroutine stack. If the C function calls back into
// Go on this thread, that stack may grow and move before the call returns,
// so the frame is found again by the move of the goroutine stack's top
// (_cgo_topofstack, which preserves the C callee-saved registers), as
// cgo-generated wrappers do.

GLOBL ·call6ABI0(SB), NOPTR|RODATA, $8
DATA ·call6ABI0(SB)/8, $call6<>(SB)

TEXT call6<>(SB), NOSPLIT|NOFRAME, $0
	STP.W (R29, R30), -48(RSP)
	MOVD  RSP, R29
	MOVD R0, 16(RSP)
	BL   _cgo_topofstack(SB)
	MOVD R0, 24(RSP)

	MOVD 16(RSP), R9
	MOVD frame_a1(R9), R0
	MOVD frame_a2(R9), R1
	MOVD frame_a3(R9), R2
	MOVD frame_a4(R9), R3
	MOVD frame_a5(R9), R4
	MOVD frame_a6(R9), R5
	MOVD frame_fn(R9), R10
	BL   (R10)
	MOVD R0, 32(RSP)

	BL   _cgo_topofstack(SB)
	MOVD 24(RSP), R1
	SUB  R1, R0, R0
	MOVD 16(RSP), R1
	ADD  R1, R0, R0
	MOVD 32(RSP), R1
	MOVD R1, frame_r(R0)
	LDP.P 48(RSP), (R29, R30)
	RET

GLOBL ·callPre6ABI0(SB), NOPTR|RODATA, $8
DATA ·callPre6ABI0(SB)/8, $callPre6<>(SB)

TEXT callPre6<>(SB), NOSPLIT|NOFRAME, $0
	STP.W (R29, R30), -48(RSP)
	MOVD  RSP, R29
	MOVD R0, 16(RSP)
	BL   _cgo_topofstack(SB)
	MOVD R0, 24(RSP)

	MOVD 16(RSP), R9
	MOVD frame_preArg(R9), R0
	MOVD frame_pre(R9), R10
	BL   (R10)
	CBNZW R0, prefailed

	BL   _cgo_topofstack(SB)
	MOVD 24(RSP), R1
	SUB  R1, R0, R0
	MOVD 16(RSP), R1
	ADD  R1, R0, R9
	MOVD frame_a1(R9), R0
	MOVD frame_a2(R9), R1
	MOVD frame_a3(R9), R2
	MOVD frame_a4(R9), R3
	MOVD frame_a5(R9), R4
	MOVD frame_a6(R9), R5
	MOVD frame_fn(R9), R10
	BL   (R10)
	MOVD R0, 32(RSP)

	BL   _cgo_topofstack(SB)
	MOVD 24(RSP), R1
	SUB  R1, R0, R0
	MOVD 16(RSP), R1
	ADD  R1, R0, R0
	MOVD 32(RSP), R1
	MOVD R1, frame_r(R0)
	MOVD ZR, frame_failed(R0)
	LDP.P 48(RSP), (R29, R30)
	RET

prefailed:
	MOVWU R0, R0 // zero-extend the 32-bit status
	MOVD R0, 32(RSP)
	BL   _cgo_topofstack(SB)
	MOVD 24(RSP), R1
	SUB  R1, R0, R0
	MOVD 16(RSP), R1
	ADD  R1, R0, R0
	MOVD 32(RSP), R1
	MOVD R1, frame_r(R0)
	MOVD $1, R1
	MOVD R1, frame_failed(R0)
	LDP.P 48(RSP), (R29, R30)
	RET

GLOBL ·callGuard6ABI0(SB), NOPTR|RODATA, $8
DATA ·callGuard6ABI0(SB)/8, $callGuard6<>(SB)

// callGuard6: pre(preArg); guard(guardArg, &gout); if gout == 0, fn(a1..a6).
// Frame (64 bytes): as callPre6's, plus 40(RSP): the stage that stopped the
// call.
TEXT callGuard6<>(SB), NOSPLIT|NOFRAME, $0
	STP.W (R29, R30), -64(RSP)
	MOVD  RSP, R29
	MOVD R0, 16(RSP)
	BL   _cgo_topofstack(SB)
	MOVD R0, 24(RSP)

	MOVD 16(RSP), R9
	MOVD frameG_preArg(R9), R0
	MOVD frameG_pre(R9), R10
	BL   (R10)
	MOVD $1, R1
	MOVD R1, 40(RSP)
	CBNZW R0, gstop

	BL   _cgo_topofstack(SB)
	MOVD 24(RSP), R1
	SUB  R1, R0, R0
	MOVD 16(RSP), R1
	ADD  R1, R0, R9
	MOVD frameG_guardArg(R9), R0
	ADD  $frameG_gout, R9, R1
	MOVD frameG_guard(R9), R10
	BL   (R10)
	MOVD $2, R1
	MOVD R1, 40(RSP)
	CBNZW R0, gstop

	BL   _cgo_topofstack(SB)
	MOVD 24(RSP), R1
	SUB  R1, R0, R0
	MOVD 16(RSP), R1
	ADD  R1, R0, R9
	MOVWU frameG_gout(R9), R0
	MOVD $3, R1
	MOVD R1, 40(RSP)
	CBNZW R0, gstop

	MOVD frameG_a1(R9), R0
	MOVD frameG_a2(R9), R1
	MOVD frameG_a3(R9), R2
	MOVD frameG_a4(R9), R3
	MOVD frameG_a5(R9), R4
	MOVD frameG_a6(R9), R5
	MOVD frameG_fn(R9), R10
	BL   (R10)
	MOVD R0, 32(RSP)

	BL   _cgo_topofstack(SB)
	MOVD 24(RSP), R1
	SUB  R1, R0, R0
	MOVD 16(RSP), R1
	ADD  R1, R0, R0
	MOVD 32(RSP), R1
	MOVD R1, frameG_r(R0)
	MOVD ZR, frameG_failed(R0)
	LDP.P 64(RSP), (R29, R30)
	RET

gstop:
	MOVWU R0, R0 // zero-extend the 32-bit status or answer
	MOVD R0, 32(RSP)
	BL   _cgo_topofstack(SB)
	MOVD 24(RSP), R1
	SUB  R1, R0, R0
	MOVD 16(RSP), R1
	ADD  R1, R0, R0
	MOVD 32(RSP), R1
	MOVD R1, frameG_r(R0)
	MOVD 40(RSP), R1
	MOVD R1, frameG_failed(R0)
	LDP.P 64(RSP), (R29, R30)
	RET

GLOBL ·callPre12ABI0(SB), NOPTR|RODATA, $8
DATA ·callPre12ABI0(SB)/8, $callPre12<>(SB)

// callPre12: pre(preArg); if it returned 0, fn(a1..a12) with a1..a8 in
// R0-R7 and a9..a12 in the C stack's argument slots: 32 bytes pushed below
// the frame just before the call (RSP stays 16-byte aligned) and popped
// after it. Frame (48 bytes) as callPre6's.
TEXT callPre12<>(SB), NOSPLIT|NOFRAME, $0
	STP.W (R29, R30), -48(RSP)
	MOVD  RSP, R29
	MOVD R0, 16(RSP)
	BL   _cgo_topofstack(SB)
	MOVD R0, 24(RSP)

	MOVD 16(RSP), R9
	MOVD frame12_preArg(R9), R0
	MOVD frame12_pre(R9), R10
	BL   (R10)
	CBNZW R0, prefailed12

	BL   _cgo_topofstack(SB)
	MOVD 24(RSP), R1
	SUB  R1, R0, R0
	MOVD 16(RSP), R1
	ADD  R1, R0, R9
	SUB  $32, RSP, RSP
	MOVD frame12_a9(R9), R0
	MOVD R0, 0(RSP)
	MOVD frame12_a10(R9), R0
	MOVD R0, 8(RSP)
	MOVD frame12_a11(R9), R0
	MOVD R0, 16(RSP)
	MOVD frame12_a12(R9), R0
	MOVD R0, 24(RSP)
	MOVD frame12_a1(R9), R0
	MOVD frame12_a2(R9), R1
	MOVD frame12_a3(R9), R2
	MOVD frame12_a4(R9), R3
	MOVD frame12_a5(R9), R4
	MOVD frame12_a6(R9), R5
	MOVD frame12_a7(R9), R6
	MOVD frame12_a8(R9), R7
	MOVD frame12_fn(R9), R10
	BL   (R10)
	ADD  $32, RSP, RSP
	MOVD R0, 32(RSP)

	BL   _cgo_topofstack(SB)
	MOVD 24(RSP), R1
	SUB  R1, R0, R0
	MOVD 16(RSP), R1
	ADD  R1, R0, R0
	MOVD 32(RSP), R1
	MOVD R1, frame12_r(R0)
	MOVD ZR, frame12_failed(R0)
	LDP.P 48(RSP), (R29, R30)
	RET

prefailed12:
	MOVWU R0, R0 // zero-extend the 32-bit status
	MOVD R0, 32(RSP)
	BL   _cgo_topofstack(SB)
	MOVD 24(RSP), R1
	SUB  R1, R0, R0
	MOVD 16(RSP), R1
	ADD  R1, R0, R0
	MOVD 32(RSP), R1
	MOVD R1, frame12_r(R0)
	MOVD $1, R1
	MOVD R1, frame12_failed(R0)
	LDP.P 48(RSP), (R29, R30)
	RET

GLOBL ·callNABI0(SB), NOPTR|RODATA, $8
DATA ·callNABI0(SB)/8, $callN<>(SB)

// callN: pre(preArg) unless pre is 0; if that returned 0, fn(a[0..23]) with
// a[0..7] in R0-R7 and a[8..23] in the C stack's argument slots: 128 bytes
// pushed below the frame just before the call (RSP stays 16-byte aligned)
// and popped after it. On entry, before pre can run, fn and the frame's n
// argument words are copied to this (system) stack. Frame (240 bytes): 0
// R29, 8 R30, 16 the frame pointer at entry, 24 the stack top at entry, 32
// the result, 40 fn, 48..232 the argument words.
TEXT callN<>(SB), NOSPLIT|NOFRAME, $0
	STP.W (R29, R30), -240(RSP)
	MOVD  RSP, R29
	MOVD R0, 16(RSP)
	MOVD frameN_fn(R0), R1
	MOVD R1, 40(RSP)
	MOVD frameN_args(R0), R8
	MOVD frameN_n(R0), R3
	ADD  $48, RSP, R2
	CBZ  R3, copiedN
copyInN:
	MOVD.P 8(R8), R4
	MOVD.P R4, 8(R2)
	SUBS $1, R3, R3
	BNE  copyInN
copiedN:
	BL   _cgo_topofstack(SB)
	MOVD R0, 24(RSP)

	MOVD 16(RSP), R9
	MOVD frameN_pre(R9), R10
	CBZ  R10, nopreN
	MOVD frameN_preArg(R9), R0
	BL   (R10)
	CBNZW R0, prefailedN

nopreN:
	SUB  $128, RSP, RSP
	// the argument words are now at 176(RSP); a[8..23] at 240(RSP)
	ADD  $240, RSP, R8
	MOVD RSP, R2
	MOVD $16, R3
copyN:
	MOVD.P 8(R8), R4
	MOVD.P R4, 8(R2)
	SUBS $1, R3, R3
	BNE  copyN
	ADD  $176, RSP, R8
	MOVD 0(R8), R0
	MOVD 8(R8), R1
	MOVD 16(R8), R2
	MOVD 24(R8), R3
	MOVD 32(R8), R4
	MOVD 40(R8), R5
	MOVD 48(R8), R6
	MOVD 56(R8), R7
	MOVD 168(RSP), R10
	BL   (R10)
	ADD  $128, RSP, RSP
	MOVD R0, 32(RSP)

	BL   _cgo_topofstack(SB)
	MOVD 24(RSP), R1
	SUB  R1, R0, R0
	MOVD 16(RSP), R1
	ADD  R1, R0, R0
	MOVD 32(RSP), R1
	MOVD R1, frameN_r(R0)
	MOVD ZR, frameN_failed(R0)
	LDP.P 240(RSP), (R29, R30)
	RET

prefailedN:
	MOVWU R0, R0 // zero-extend the 32-bit status
	MOVD R0, 32(RSP)
	BL   _cgo_topofstack(SB)
	MOVD 24(RSP), R1
	SUB  R1, R0, R0
	MOVD 16(RSP), R1
	ADD  R1, R0, R0
	MOVD 32(RSP), R1
	MOVD R1, frameN_r(R0)
	MOVD $1, R1
	MOVD R1, frameN_failed(R0)
	LDP.P 240(RSP), (R29, R30)
	RET
