package blas_test

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/blas"
	"github.com/gpumem/gpumem/sim"
)

func f32s(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// A 2x3 times 3x2 product on the simulator, column-major: the same program
// runs on cuBLAS or hipBLAS with a CUDA or HIP backend in place of g.
func Example() {
	g, err := sim.New(sim.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Close()
	h, err := blas.Open(g, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()

	alloc := func(b []byte) gpumem.Ptr {
		p, _ := g.Malloc(0, uint64(len(b)))
		_ = g.CopyToDevice(p, b)
		return p
	}
	a := alloc(f32s(1, 4, 2, 5, 3, 6)) // [1 2 3; 4 5 6]
	b := alloc(f32s(7, 9, 11, 8, 10, 12))
	c := alloc(make([]byte, 16))
	if err := h.Sgemm(blas.NoTrans, blas.NoTrans, 2, 2, 3, 1, a, 2, b, 3, 0, c, 2); err != nil {
		fmt.Println(err)
		return
	}
	out := make([]byte, 16)
	_ = g.CopyFromDevice(out, c)
	for i := 0; i < 2; i++ {
		fmt.Println(math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:])), math.Float32frombits(binary.LittleEndian.Uint32(out[4*(i+2):])))
	}
	dot, err := h.Sdot(3, a, 2, a, 2) // the first row with itself
	fmt.Println(dot, err)

	// A leading dimension smaller than the rows never reaches the engine.
	err = h.Sgemm(blas.NoTrans, blas.NoTrans, 2, 2, 3, 1, a, 1, b, 3, 0, c, 2)
	fmt.Println(err)
	// Output:
	// 58 64
	// 139 154
	// 14 <nil>
	// gpumem: blas: Sgemm: lda = 1; A has 2 rows, so it must be at least 2 (and at most 2147483647): gpumem: invalid value
}
