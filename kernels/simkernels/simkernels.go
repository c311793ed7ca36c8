// Package simkernels is the project's kernels (package kernels) written in
// Go for the simulator: the same entry names and parameter lists, so that a
// program loads and launches them through gpumem.Kernels and package kernel
// exactly as it launches the compiled ones on a GPU.
//
//	if err := simkernels.Register(); err != nil { ... }   // once per process
//	m, err := b.ModuleLoadData(0, simkernels.Image())      // b: a simulator backend
//	f, err := b.ModuleFunction(m, kernels.Saxpy.Names[0])
//
// Saxpy and Reduce follow kernels.Saxpy and kernels.Reduce; the templated
// Scale has no Go twin.
package simkernels

import (
	"sync"

	"github.com/gpumem/gpumem/sim"
)

// ReduceThreads is the block size Reduce is written for, as
// kernels.ReduceThreads.
const ReduceThreads = 256

// Saxpy is saxpy(float a, const float *x, float *y, size_t n): y = a*x + y,
// one element per thread.
var Saxpy = sim.Kernel{
	Name:   "saxpy",
	Params: []sim.Param{sim.ScalarParam(4), sim.PtrParam, sim.PtrParam, sim.ScalarParam(8)},
	Run: func(k *sim.KernelCall) {
		a, x, y, n := k.Arg.Float32(0), k.Arg.Ptr(1), k.Arg.Ptr(2), k.Arg.Uint64(3)
		k.Threads(func(t int) {
			if i := k.GlobalThread(t); uint64(i) < n {
				sim.Store(k, y, i, a*sim.Load[float32](k, x, i)+sim.Load[float32](k, y, i))
			}
		})
	},
}

// Reduce is reduce_sum(const float *in, float *out, size_t n): *out += the
// sum of in, launched with ReduceThreads threads per block and any number
// of blocks (a grid-stride loop); each block sums in shared memory and adds
// its sum atomically. *out must be zeroed first.
var Reduce = sim.Kernel{
	Name:        "reduce_sum",
	Params:      []sim.Param{sim.PtrParam, sim.PtrParam, sim.ScalarParam(8)},
	MaxThreads:  ReduceThreads,
	SharedBytes: ReduceThreads * 4,
	Run: func(k *sim.KernelCall) {
		in, out, n := k.Arg.Ptr(0), k.Arg.Ptr(1), k.Arg.Uint64(2)
		if bt := k.BlockThreads(); bt&(bt-1) != 0 {
			// The tree below halves the block: with a block of another
			// size it drops elements, here as on a GPU.
			k.Failf("reduce_sum needs a power-of-two block (ReduceThreads), launched with %d threads", bt)
		}
		partial := sim.Shared[float32](k)
		stride := uint64(k.GridBlocks() * k.BlockThreads())
		k.Threads(func(t int) {
			var s float32
			for i := uint64(k.GlobalThread(t)); i < n; i += stride {
				s += sim.Load[float32](k, in, int(i))
			}
			partial[t] = s
		})
		for step := k.BlockThreads() / 2; step > 0; step /= 2 {
			k.Threads(func(t int) {
				if t < step {
					partial[t] += partial[t+step]
				}
			})
		}
		sim.AtomicAdd(k, out, 0, partial[0])
	},
}

// All lists the Go kernels.
func All() []sim.Kernel { return []sim.Kernel{Saxpy, Reduce} }

// Register registers the Go kernels for every simulated GPU of the process
// (sim.RegisterKernel). Only the first call registers; later calls return
// its result. It fails (matching gpumem.ErrInvalidValue) when another
// kernel of one of the names was registered before.
func Register() error { return register() }

var register = sync.OnceValue(func() error {
	for _, k := range All() {
		if err := sim.RegisterKernel(k); err != nil {
			return err
		}
	}
	return nil
})

// Image is a simulator module image that declares the Go kernels, for
// ModuleLoadData.
func Image() []byte {
	var img sim.ModuleImage
	for _, k := range All() {
		img.Kernels = append(img.Kernels, k.Name)
	}
	return img.Bytes()
}
