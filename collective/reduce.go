package collective

import (
	"fmt"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/half"
)

// This file is the simulator engine's arithmetic: a reduction of equal
// buffers element by element, in rank order, for every type the library
// reduces but the 8-bit floats.

type number interface {
	~int8 | ~uint8 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

// view is b as a slice of T; b is aligned for T (a Go allocation, cut at
// multiples of T's size).
func view[T number](b []byte) []T {
	var zero T
	n := len(b) / int(unsafe.Sizeof(zero))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

// combine folds in into acc with op (Avg sums; finish divides).
func combine[T number](op Op, acc, in []T) {
	switch op {
	case Sum, Avg:
		for i := range acc {
			acc[i] += in[i]
		}
	case Prod:
		for i := range acc {
			acc[i] *= in[i]
		}
	case Max:
		for i := range acc {
			acc[i] = max(acc[i], in[i])
		}
	case Min:
		for i := range acc {
			acc[i] = min(acc[i], in[i])
		}
	}
}

func divide[T number](acc []T, n int) {
	for i := range acc {
		acc[i] /= T(n)
	}
}

// reducible reports whether the simulator reduces dt.
func reducible(dt DataType) error {
	if dt == Float8E4M3 || dt == Float8E5M2 {
		return &gpumem.NotSupportedError{Backend: "sim", Op: "collective reduction", Reason: fmt.Sprintf("the simulator does not reduce %v", dt)}
	}
	return nil
}

// reduce returns the reduction of ins (equal lengths, rank order) with op.
func reduce(dt DataType, op Op, ins [][]byte) []byte {
	acc := append([]byte(nil), ins[0]...)
	switch dt {
	case Int8:
		fold[int8](op, acc, ins)
	case Uint8:
		fold[uint8](op, acc, ins)
	case Int32:
		fold[int32](op, acc, ins)
	case Uint32:
		fold[uint32](op, acc, ins)
	case Int64:
		fold[int64](op, acc, ins)
	case Uint64:
		fold[uint64](op, acc, ins)
	case Float32:
		fold[float32](op, acc, ins)
	case Float64:
		fold[float64](op, acc, ins)
	case Float16, Bfloat16:
		dec, enc := half.ToFloat32, half.FromFloat32
		if dt == Bfloat16 {
			dec, enc = half.BToFloat32, half.BFromFloat32
		}
		wide := make([][]byte, len(ins))
		for r, in := range ins {
			wide[r] = make([]byte, 2*len(in))
			w := view[float32](wide[r])
			for i := range w {
				w[i] = dec(uint16(in[2*i]) | uint16(in[2*i+1])<<8)
			}
		}
		sum := make([]byte, len(wide[0]))
		copy(sum, wide[0])
		fold[float32](op, sum, wide)
		for i, f := range view[float32](sum) {
			h := enc(f)
			acc[2*i], acc[2*i+1] = byte(h), byte(h>>8)
		}
	}
	return acc
}

// fold reduces ins[1:] into acc (a copy of ins[0]) as T.
func fold[T number](op Op, acc []byte, ins [][]byte) {
	a := view[T](acc)
	for _, in := range ins[1:] {
		combine(op, a, view[T](in))
	}
	if op == Avg {
		divide(a, len(ins))
	}
}
