#include "textflag.h"

// func fpwalk(buf *uintptr, max int, skip int) int
//
// Walks the frame-pointer chain starting at the caller's frame and stores up
// to max return addresses after skipping skip frames. Every step must move
// up the stack (to a higher, 8-byte aligned address less than 1 MiB above)
// or the walk stops, so a broken chain ends it instead of wandering.
TEXT ·fpwalk(SB),NOSPLIT,$0-32
	MOVQ	BP, R8
	MOVQ	buf+0(FP), DI
	MOVQ	max+8(FP), CX
	MOVQ	skip+16(FP), DX
	XORQ	AX, AX
loop:
	TESTQ	R8, R8
	JZ	done
	CMPQ	AX, CX
	JGE	done
	MOVQ	8(R8), R9
	MOVQ	0(R8), R10
	TESTQ	R9, R9
	JZ	done
	TESTQ	DX, DX
	JZ	store
	DECQ	DX
	JMP	next
store:
	MOVQ	R9, (DI)(AX*8)
	INCQ	AX
next:
	CMPQ	R10, R8
	JBE	done
	MOVQ	R10, R11
	SUBQ	R8, R11
	CMPQ	R11, $0x100000
	JAE	done
	TESTQ	$7, R10
	JNZ	done
	MOVQ	R10, R8
	JMP	loop
done:
	MOVQ	AX, ret+24(FP)
	RET
