package sim_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

// A kernel written in Go runs behind gpumem.Kernels as a compiled one runs
// on a GPU: register it, load a module that contains it, look it up and
// launch it with the vendor's parameter array.
func ExampleGPU_LaunchKernel() {
	g := sim.NewDefault()
	defer g.Close()
	_ = g.RegisterKernel(sim.Kernel{
		Name:   "saxpy", // y[i] = a*x[i] + y[i] for i < n
		Params: []sim.Param{sim.PtrParam, sim.PtrParam, sim.ScalarParam(4), sim.ScalarParam(4)},
		Run: func(k *sim.KernelCall) {
			x, y, a, n := k.Arg.Ptr(0), k.Arg.Ptr(1), k.Arg.Float32(2), int(k.Arg.Int32(3))
			k.Threads(func(t int) {
				if i := k.GlobalThread(t); i < n {
					sim.Store(k, y, i, a*sim.Load[float32](k, x, i)+sim.Load[float32](k, y, i))
				}
			})
		},
	})
	mod, _ := g.ModuleLoadData(0, sim.ModuleImage{Kernels: []string{"saxpy"}}.Bytes())
	f, _ := g.ModuleFunction(mod, "saxpy")

	const n = 5
	x, _ := g.Malloc(0, 4*n)
	y, _ := g.Malloc(0, 4*n)
	host := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(host[4*i:], math.Float32bits(float32(i)))
	}
	_ = g.CopyToDevice(x, host)
	_ = g.CopyToDevice(y, host)

	// The parameter array: one pointer to each argument's bytes. The
	// arguments are copied during the launch.
	a, count := float32(10), int32(n)
	args := []unsafe.Pointer{unsafe.Pointer(&x), unsafe.Pointer(&y), unsafe.Pointer(&a), unsafe.Pointer(&count)}
	params := gpumem.KernelParams{Array: uintptr(unsafe.Pointer(&args[0])), Count: len(args)}
	s, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	err := g.LaunchKernel(f, gpumem.Dim3{X: 1}, gpumem.Dim3{X: 32}, 0, s, params)
	runtime.KeepAlive(args)
	fmt.Println("launch:", err)
	fmt.Println("sync:", g.StreamSynchronize(s))

	_ = g.CopyFromDevice(host, y)
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(host[4*i:]))
	}
	fmt.Println(out)
	_ = g.Free(0, x)
	_ = g.Free(0, y)
	_ = g.StreamDestroy(s)
	_ = g.ModuleUnload(mod)
	fmt.Println("leaks:", len(g.Leaks()))
	// Output:
	// launch: <nil>
	// sync: <nil>
	// [0 11 22 33 44]
	// leaks: 0
}
