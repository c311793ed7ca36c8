package blas

import (
	"fmt"

	"github.com/gpumem/gpumem"
)

// Transpose says how a routine reads a matrix: as it is (NoTrans) or
// transposed (Trans). The matrices are real, so ConjTrans is Trans.
type Transpose int

// Transpose values.
const (
	NoTrans   Transpose = iota // op(A) = A
	Trans                      // op(A) = Aᵀ
	ConjTrans                  // op(A) = Aᴴ, which is Aᵀ for real matrices
)

// String names the value as BLAS does ("N", "T", "C").
func (t Transpose) String() string {
	switch t {
	case NoTrans:
		return "N"
	case Trans:
		return "T"
	case ConjTrans:
		return "C"
	}
	return fmt.Sprintf("Transpose(%d)", int(t))
}

func (t Transpose) valid() bool { return t == NoTrans || t == Trans || t == ConjTrans }

// transposed reports whether op(A) reads A transposed.
func (t Transpose) transposed() bool { return t != NoTrans }

// Type is an element type of the routines' matrices and vectors.
type Type int

// Element types. F16 and BF16 are the 16-bit types of GemmEx: IEEE half
// precision and bfloat16, stored as their bits (uint16) in memory.
const (
	F32 Type = iota + 1
	F64
	F16
	BF16
)

// String names the type ("f32", "bf16").
func (t Type) String() string {
	switch t {
	case F32:
		return "f32"
	case F64:
		return "f64"
	case F16:
		return "f16"
	case BF16:
		return "bf16"
	}
	return fmt.Sprintf("Type(%d)", int(t))
}

// Size is the type's size in bytes (0 for an unknown type).
func (t Type) Size() int {
	switch t {
	case F32:
		return 4
	case F64:
		return 8
	case F16, BF16:
		return 2
	}
	return 0
}

// PointerMode says where the scalars of a call live: alpha and beta, and
// the result of Dot and Nrm2. Host: in Go values (the routines without a
// Device suffix; a call returning a result blocks until it is known, as
// the libraries' host mode does). Device: in device memory the caller
// passes (the ...Device routines), so that nothing waits for the GPU.
type PointerMode int

// Pointer modes.
const (
	Host PointerMode = iota
	Device
)

// String names the mode.
func (m PointerMode) String() string {
	switch m {
	case Host:
		return "host"
	case Device:
		return "device"
	}
	return fmt.Sprintf("PointerMode(%d)", int(m))
}

// Errors of the package's own, each matching a gpumem sentinel.
func invalid(routine, format string, args ...any) error {
	return fmt.Errorf("gpumem: blas: %s: %s: %w", routine, fmt.Sprintf(format, args...), gpumem.ErrInvalidValue)
}
