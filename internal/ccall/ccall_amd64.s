//go:build linux

#include "textflag.h"
#include "go_asm.h"

// The trampolines are entered from runtime.cgocall on the system stack with
// the SysV C calling convention: DI holds a *frame. They use only
// caller-saved registers; the assembler saves BP in the prologue. A frame of
// 32 bytes keeps SP 16-byte aligned at the inner CALLs.
//
// The *frame lives on the goroutine stack. If the C function calls back into
// Go on this thread, that stack may grow and move before the call returns,
// so the frame is found again by the move of the goroutine stack's top
// (_cgo_topofstack), as cgo-generated wrappers do.
//
// Local slots: 0(SP) frame pointer at entry, 8(SP) stack top at entry,
// 16(SP) result.

GLOBL ·call6ABI0(SB), NOPTR|RODATA, $8
DATA ·call6ABI0(SB)/8, $call6<>(SB)

TEXT call6<>(SB), NOSPLIT, $32
	MOVQ DI, 0(SP)
	CALL _cgo_topofstack(SB)
	MOVQ AX, 8(SP)

	MOVQ 0(SP), R11
	MOVQ frame_a1(R11), DI
	MOVQ frame_a2(R11), SI
	MOVQ frame_a3(R11), DX
	MOVQ frame_a4(R11), CX
	MOVQ frame_a5(R11), R8
	MOVQ frame_a6(R11), R9
	MOVQ frame_fn(R11), R10
	XORL AX, AX // no vector registers used (for variadic callees)
	CALL R10
	MOVQ AX, 16(SP)

	CALL _cgo_topofstack(SB)
	SUBQ 8(SP), AX
	ADDQ 0(SP), AX
	MOVQ 16(SP), DX
	MOVQ DX, frame_r(AX)
	RET

GLOBL ·callPre6ABI0(SB), NOPTR|RODATA, $8
DATA ·callPre6ABI0(SB)/8, $callPre6<>(SB)

TEXT callPre6<>(SB), NOSPLIT, $32
	MOVQ DI, 0(SP)
	CALL _cgo_topofstack(SB)
	MOVQ AX, 8(SP)

	MOVQ 0(SP), R11
	MOVQ frame_preArg(R11), DI
	MOVQ frame_pre(R11), R10
	XORL AX, AX
	CALL R10
	TESTL AX, AX
	JNE  prefailed

	CALL _cgo_topofstack(SB)
	SUBQ 8(SP), AX
	ADDQ 0(SP), AX
	MOVQ AX, R11
	MOVQ frame_a1(R11), DI
	MOVQ frame_a2(R11), SI
	MOVQ frame_a3(R11), DX
	MOVQ frame_a4(R11), CX
	MOVQ frame_a5(R11), R8
	MOVQ frame_a6(R11), R9
	MOVQ frame_fn(R11), R10
	XORL AX, AX
	CALL R10
	MOVQ AX, 16(SP)

	CALL _cgo_topofstack(SB)
	SUBQ 8(SP), AX
	ADDQ 0(SP), AX
	MOVQ 16(SP), DX
	MOVQ DX, frame_r(AX)
	MOVQ $0, frame_failed(AX)
	RET

prefailed:
	MOVL AX, AX // zero-extend the 32-bit status
	MOVQ AX, 16(SP)
	CALL _cgo_topofstack(SB)
	SUBQ 8(SP), AX
	ADDQ 0(SP), AX
	MOVQ 16(SP), DX
	MOVQ DX, frame_r(AX)
	MOVQ $1, frame_failed(AX)
	RET

GLOBL ·callGuard6ABI0(SB), NOPTR|RODATA, $8
DATA ·callGuard6ABI0(SB)/8, $callGuard6<>(SB)

// callGuard6: pre(preArg); guard(guardArg, &gout); if gout == 0, fn(a1..a6).
// Local slots as in call6, plus 24(SP): the stage that stopped the call.
TEXT callGuard6<>(SB), NOSPLIT, $32
	MOVQ DI, 0(SP)
	CALL _cgo_topofstack(SB)
	MOVQ AX, 8(SP)

	MOVQ 0(SP), R11
	MOVQ frameG_preArg(R11), DI
	MOVQ frameG_pre(R11), R10
	XORL AX, AX
	CALL R10
	MOVQ $1, 24(SP)
	TESTL AX, AX
	JNE  gstop

	CALL _cgo_topofstack(SB)
	SUBQ 8(SP), AX
	ADDQ 0(SP), AX
	MOVQ AX, R11
	MOVQ frameG_guardArg(R11), DI
	LEAQ frameG_gout(R11), SI
	MOVQ frameG_guard(R11), R10
	XORL AX, AX
	CALL R10
	MOVQ $2, 24(SP)
	TESTL AX, AX
	JNE  gstop

	CALL _cgo_topofstack(SB)
	SUBQ 8(SP), AX
	ADDQ 0(SP), AX
	MOVQ AX, R11
	MOVL frameG_gout(R11), AX
	MOVQ $3, 24(SP)
	TESTL AX, AX
	JNE  gstop

	MOVQ frameG_a1(R11), DI
	MOVQ frameG_a2(R11), SI
	MOVQ frameG_a3(R11), DX
	MOVQ frameG_a4(R11), CX
	MOVQ frameG_a5(R11), R8
	MOVQ frameG_a6(R11), R9
	MOVQ frameG_fn(R11), R10
	XORL AX, AX
	CALL R10
	MOVQ AX, 16(SP)

	CALL _cgo_topofstack(SB)
	SUBQ 8(SP), AX
	ADDQ 0(SP), AX
	MOVQ 16(SP), DX
	MOVQ DX, frameG_r(AX)
	MOVQ $0, frameG_failed(AX)
	RET

gstop:
	MOVL AX, AX // zero-extend the 32-bit status or answer
	MOVQ AX, 16(SP)
	CALL _cgo_topofstack(SB)
	SUBQ 8(SP), AX
	ADDQ 0(SP), AX
	MOVQ 16(SP), DX
	MOVQ DX, frameG_r(AX)
	MOVQ 24(SP), DX
	MOVQ DX, frameG_failed(AX)
	RET

GLOBL ·callPre12ABI0(SB), NOPTR|RODATA, $8
DATA ·callPre12ABI0(SB)/8, $callPre12<>(SB)

// callPre12: pre(preArg); if it returned 0, fn(a1..a12) with a1..a6 in
// registers and a7..a12 in the C stack's argument slots 0(SP)..40(SP),
// which the callee finds just above its return address. Local slots:
// 48(SP) frame pointer at entry, 56(SP) stack top at entry, 64(SP) result.
// A frame of 80 bytes keeps SP 16-byte aligned at the inner CALLs.
TEXT callPre12<>(SB), NOSPLIT, $80
	MOVQ DI, 48(SP)
	CALL _cgo_topofstack(SB)
	MOVQ AX, 56(SP)

	MOVQ 48(SP), R11
	MOVQ frame12_preArg(R11), DI
	MOVQ frame12_pre(R11), R10
	XORL AX, AX
	CALL R10
	TESTL AX, AX
	JNE  prefailed12

	CALL _cgo_topofstack(SB)
	SUBQ 56(SP), AX
	ADDQ 48(SP), AX
	MOVQ AX, R11
	MOVQ frame12_a7(R11), AX
	MOVQ AX, 0(SP)
	MOVQ frame12_a8(R11), AX
	MOVQ AX, 8(SP)
	MOVQ frame12_a9(R11), AX
	MOVQ AX, 16(SP)
	MOVQ frame12_a10(R11), AX
	MOVQ AX, 24(SP)
	MOVQ frame12_a11(R11), AX
	MOVQ AX, 32(SP)
	MOVQ frame12_a12(R11), AX
	MOVQ AX, 40(SP)
	MOVQ frame12_a1(R11), DI
	MOVQ frame12_a2(R11), SI
	MOVQ frame12_a3(R11), DX
	MOVQ frame12_a4(R11), CX
	MOVQ frame12_a5(R11), R8
	MOVQ frame12_a6(R11), R9
	MOVQ frame12_fn(R11), R10
	XORL AX, AX
	CALL R10
	MOVQ AX, 64(SP)

	CALL _cgo_topofstack(SB)
	SUBQ 56(SP), AX
	ADDQ 48(SP), AX
	MOVQ 64(SP), DX
	MOVQ DX, frame12_r(AX)
	MOVQ $0, frame12_failed(AX)
	RET

prefailed12:
	MOVL AX, AX // zero-extend the 32-bit status
	MOVQ AX, 64(SP)
	CALL _cgo_topofstack(SB)
	SUBQ 56(SP), AX
	ADDQ 48(SP), AX
	MOVQ 64(SP), DX
	MOVQ DX, frame12_r(AX)
	MOVQ $1, frame12_failed(AX)
	RET

GLOBL ·callNABI0(SB), NOPTR|RODATA, $8
DATA ·callNABI0(SB)/8, $callN<>(SB)

// callN: pre(preArg) unless pre is 0; if that returned 0, fn(a[0..23]) with
// a[0..5] in registers and a[6..23] in the C stack's argument slots
// 0(SP)..136(SP). On entry, before pre can run, fn and the frame's n
// argument words are copied to this (system) stack. Local slots: 144(SP)
// frame pointer at entry, 152(SP) stack top at entry, 160(SP) result,
// 168(SP) fn, 176(SP)..360(SP) the argument words. A frame of 368 bytes
// keeps SP 16-byte aligned at the inner CALLs.
TEXT callN<>(SB), NOSPLIT, $368
	MOVQ DI, 144(SP)
	MOVQ frameN_fn(DI), AX
	MOVQ AX, 168(SP)
	MOVQ frameN_args(DI), SI
	MOVQ frameN_n(DI), CX
	LEAQ 176(SP), DX
	TESTQ CX, CX
	JEQ  copiedN
copyInN:
	MOVQ 0(SI), AX
	MOVQ AX, 0(DX)
	ADDQ $8, SI
	ADDQ $8, DX
	DECQ CX
	JNE  copyInN
copiedN:
	CALL _cgo_topofstack(SB)
	MOVQ AX, 152(SP)

	MOVQ 144(SP), R11
	MOVQ frameN_pre(R11), R10
	TESTQ R10, R10
	JEQ  nopreN
	MOVQ frameN_preArg(R11), DI
	XORL AX, AX
	CALL R10
	TESTL AX, AX
	JNE  prefailedN

nopreN:
	// a[6..23] to the argument slots
	MOVQ $0, CX
copyN:
	MOVQ 224(SP)(CX*8), AX
	MOVQ AX, 0(SP)(CX*8)
	INCQ CX
	CMPQ CX, $18
	JLT  copyN
	MOVQ 176(SP), DI
	MOVQ 184(SP), SI
	MOVQ 192(SP), DX
	MOVQ 200(SP), CX
	MOVQ 208(SP), R8
	MOVQ 216(SP), R9
	MOVQ 168(SP), R10
	XORL AX, AX
	CALL R10
	MOVQ AX, 160(SP)

	CALL _cgo_topofstack(SB)
	SUBQ 152(SP), AX
	ADDQ 144(SP), AX
	MOVQ 160(SP), DX
	MOVQ DX, frameN_r(AX)
	MOVQ $0, frameN_failed(AX)
	RET

prefailedN:
	MOVL AX, AX // zero-extend the 32-bit status
	MOVQ AX, 160(SP)
	CALL _cgo_topofstack(SB)
	SUBQ 152(SP), AX
	ADDQ 144(SP), AX
	MOVQ 160(SP), DX
	MOVQ DX, frameN_r(AX)
	MOVQ $1, frameN_failed(AX)
	RET
