package kernel_test

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/kernel"
)

// printer stands in for a backend: it prints what a launch receives
// through the parameter array. With a real device or the simulator k is
// the backend itself (every gpumem.Backend is a gpumem.Kernels):
//
//	m, _ := b.ModuleLoadData(0, image)
//	f, _ := b.ModuleFunction(m, "saxpy")
type printer struct{ gpumem.Kernels }

func (printer) LaunchKernel(f gpumem.Function, grid, block gpumem.Dim3, smem uint32, s gpumem.Stream, p gpumem.KernelParams) error {
	arg := func(i int) unsafe.Pointer {
		a := p.Array + uintptr(i)*8
		return *(*unsafe.Pointer)(*(*unsafe.Pointer)(unsafe.Pointer(&a)))
	}
	fmt.Printf("%s<<<%d, %d>>>(x=%#x, y=%#x, a=%g, n=%d)\n", f.Name, grid.X, block.X,
		*(*uint64)(arg(0)), *(*uint64)(arg(1)), math.Float32frombits(*(*uint32)(arg(2))), *(*int32)(arg(3)))
	return nil
}

func Example() {
	var k gpumem.Kernels = printer{}
	f := gpumem.Function{Handle: 1, Name: "saxpy"}

	// void saxpy(const float *x, float *y, float a, int n)
	l, err := kernel.New(k, f, kernel.Ptr, kernel.Ptr, kernel.Float32, kernel.Int32)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()

	x, y, n := gpumem.Ptr(0x7f0000000000), gpumem.Ptr(0x7f0000100000), int32(1<<20)
	l.SetPtr(0, x)
	l.SetPtr(1, y)
	l.SetF32(2, 2.5)
	l.SetI32(3, n)
	block := uint32(256)
	grid := (uint32(n) + block - 1) / block
	if err := l.Launch(gpumem.Stream{}, gpumem.Dim3{X: grid}, gpumem.Dim3{X: block}, 0); err != nil {
		fmt.Println(err)
	}

	// A mismatch is an error, never a crash in the driver.
	fmt.Println(l.SetF64(2, 2.5))
	// Output:
	// saxpy<<<4096, 256>>>(x=0x7f0000000000, y=0x7f0000100000, a=2.5, n=1048576)
	// kernel: saxpy: argument 2 is declared Float32, set as Float64: gpumem: invalid value
}
