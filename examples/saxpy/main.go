// Command saxpy runs the project's saxpy kernel end to end: it opens a
// backend (GPUMEM_BACKEND, the simulator when unset), allocates from the
// allocator GPUMEM_ALLOC_CONF asks for, gets the kernel (on the simulator
// the Go twin from kernels/simkernels; on a GPU compiled from
// kernels.Saxpy with rtc), launches it through package kernel, reads the
// result back and checks it.
//
//	go run ./examples/saxpy                        # on the simulator
//	GPUMEM_BACKEND=cuda go run ./examples/saxpy    # on an NVIDIA GPU (NVRTC needed)
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/gpumem/gpumem"
	_ "github.com/gpumem/gpumem/all" // every backend and allocator
	"github.com/gpumem/gpumem/kernel"
	"github.com/gpumem/gpumem/kernels"
	"github.com/gpumem/gpumem/kernels/simkernels"
	"github.com/gpumem/gpumem/rtc"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "saxpy:", err)
		os.Exit(1)
	}
}

// run computes y = 2*x + y over n floats on device 0 and prints a checked
// element.
func run(out io.Writer) error {
	const n, a = 1 << 16, float32(2)
	name := os.Getenv("GPUMEM_BACKEND")
	if name == "" {
		name = "sim"
	}
	b, err := gpumem.Open(gpumem.Options{Backend: name})
	if err != nil {
		return err
	}
	defer b.Close()
	alloc, err := gpumem.NewAllocatorFromEnv(b)
	if err != nil {
		return err
	}
	defer alloc.Close()

	// The kernel: its image and name.
	image, err := saxpyImage(b)
	if err != nil {
		return err
	}
	mod, err := b.ModuleLoadData(0, image)
	if err != nil {
		return err
	}
	defer b.ModuleUnload(mod)
	f, err := b.ModuleFunction(mod, "saxpy")
	if err != nil {
		return err
	}

	// Memory from the allocator, on a stream of our own.
	s, err := b.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		return err
	}
	defer b.StreamDestroy(s)
	x, err := alloc.Allocate(4*n, s)
	if err != nil {
		return err
	}
	defer alloc.Deallocate(x, s)
	y, err := alloc.Allocate(4*n, s)
	if err != nil {
		return err
	}
	defer alloc.Deallocate(y, s)
	host := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(host[4*i:], math.Float32bits(float32(i)))
	}
	if err := b.StreamSynchronize(s); err != nil {
		return err
	}
	if err := b.CopyToDevice(x, host); err != nil {
		return err
	}
	if err := b.CopyToDevice(y, host); err != nil {
		return err
	}

	// saxpy(float a, const float *x, float *y, size_t n)
	l, err := kernel.New(b, f, kernel.Float32, kernel.Ptr, kernel.Ptr, kernel.Uint64)
	if err != nil {
		return err
	}
	defer l.Close()
	l.SetF32(0, a)
	l.SetPtr(1, x)
	l.SetPtr(2, y)
	l.SetU64(3, n)
	if err := l.Launch(s, gpumem.Dim3{X: (n + 255) / 256}, gpumem.Dim3{X: 256}, 0); err != nil {
		return err
	}
	if err := b.StreamSynchronize(s); err != nil {
		return err
	}
	if err := b.CopyFromDevice(host, y); err != nil {
		return err
	}
	for i := range n {
		if got, want := math.Float32frombits(binary.LittleEndian.Uint32(host[4*i:])), a*float32(i)+float32(i); got != want {
			return fmt.Errorf("y[%d] = %g, want %g", i, got, want)
		}
	}
	last := math.Float32frombits(binary.LittleEndian.Uint32(host[4*(n-1):]))
	fmt.Fprintf(out, "saxpy on %s: %d elements checked, y[%d] = %g\n", b.Name(), n, n-1, last)
	return nil
}

// saxpyImage is a module holding saxpy: the simulator's Go kernels, or
// kernels.Saxpy compiled for device 0 by NVRTC or hipRTC.
func saxpyImage(b gpumem.Backend) ([]byte, error) {
	if b.Name() == "sim" {
		if err := simkernels.Register(); err != nil {
			return nil, err
		}
		return simkernels.Image(), nil
	}
	target, err := rtc.TargetOf(b, 0)
	if err != nil {
		return nil, err
	}
	res, err := rtc.Compile(context.Background(), kernels.Saxpy.Request(target))
	if err != nil {
		return nil, err
	}
	return res.Image, nil
}
