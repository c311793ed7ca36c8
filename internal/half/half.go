// Package half converts between float32 and the 16-bit floating-point
// formats the GPU libraries take: IEEE 754 half precision (binary16) and
// bfloat16, each rounded to nearest, ties to even, as the GPUs' conversion
// instructions do. The BLAS binding and the collectives' simulator share it.
package half

import "math"

// FromFloat32 returns the half-precision bits nearest to f: out of range
// is ±Inf, NaN stays NaN (quiet).
func FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b >> 23 & 0xff)
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 { // a subnormal half, or zero
		if e < -10 {
			return sign
		}
		m := mant | 0x800000
		shift := uint(14 - e)
		h := m >> shift
		rem, half := m&(1<<shift-1), uint32(1)<<(shift-1)
		if rem > half || (rem == half && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // a carry into the exponent is the right rounding, up to Inf
	}
	return sign | uint16(h)
}

// ToFloat32 returns the value of half-precision bits h (exact).
func ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		v := float32(mant) / (1 << 24)
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// BFromFloat32 returns the bfloat16 bits nearest to f; NaN stays NaN.
func BFromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7f800000 == 0x7f800000 && b&0x7fffff != 0 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b >> 16 & 1)
	return uint16(b >> 16)
}

// BToFloat32 returns the value of bfloat16 bits h (exact).
func BToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
