package blas

import "github.com/gpumem/gpumem/internal/half"

// The 16-bit element types of GemmEx, converted in Go (the simulator's
// engine, and programs preparing data): IEEE 754 half precision (F16) and
// bfloat16 (BF16), each rounded to nearest, ties to even, as the GPUs'
// conversion instructions do.

// F16FromFloat32 returns the half-precision bits nearest to f: out of range
// is ±Inf, NaN stays NaN (quiet).
func F16FromFloat32(f float32) uint16 { return half.FromFloat32(f) }

// F16ToFloat32 returns the value of half-precision bits h (exact).
func F16ToFloat32(h uint16) float32 { return half.ToFloat32(h) }

// BF16FromFloat32 returns the bfloat16 bits nearest to f; NaN stays NaN.
func BF16FromFloat32(f float32) uint16 { return half.BFromFloat32(f) }

// BF16ToFloat32 returns the value of bfloat16 bits h (exact).
func BF16ToFloat32(h uint16) float32 { return half.BToFloat32(h) }
