//go:build unix

package sim_test

import (
	"encoding/binary"
	"math"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

// The parameter array may live outside the Go heap, as the kernel
// package's buffers do.
func TestKernelParamsInMappedMemory(t *testing.T) {
	r := newKernelRig(t, sim.Config{}, fill)
	g := r.g
	p := r.upload(t, make([]float32, 8))
	mem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	ok(t, err)
	defer func() { _ = unix.Munmap(mem) }()
	base := uintptr(unsafe.Pointer(&mem[0]))
	binary.LittleEndian.PutUint64(mem[64:], uint64(p))
	binary.LittleEndian.PutUint32(mem[72:], math.Float32bits(2.5))
	binary.LittleEndian.PutUint32(mem[76:], 8)
	for i, off := range []uintptr{64, 72, 76} {
		binary.LittleEndian.PutUint64(mem[8*i:], uint64(base+off))
	}
	ok(t, g.LaunchKernel(r.f["fill"], gpumem.Dim3{X: 1}, gpumem.Dim3{X: 8}, 0, gpumem.Stream{}, gpumem.KernelParams{Array: base, Count: 3}))
	for i, v := range r.download(t, p, 8) {
		if v != 2.5 {
			t.Fatalf("p[%d] = %v", i, v)
		}
	}
	r.close(t, p)
}
