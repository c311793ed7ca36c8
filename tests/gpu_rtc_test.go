package tests

// The compiled path on a real GPU: the project's saxpy and reduce_sum
// (package kernels) compiled at run time by NVRTC from this test binary,
// loaded through the CUDA backend and launched on memory from every
// allocator at 1 KiB to 1 GiB, each result checked in full against Go;
// and the same kernels built offline by nvcc into a fatbin
// (scripts/gpu/run.sh, GPUMEM_TEST_FATBIN), loaded from the file and
// launched. Both skip, saying why, without a device or a compiler.

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/kernels"
	"github.com/gpumem/gpumem/rtc"
)

// gpuSizes are the element counts of float32 the compiled kernels run
// over: 1 KiB, 1 MiB, 64 MiB and 1 GiB per buffer (the last not with
// -test.short).
func gpuSizes() []uint64 {
	s := []uint64{256, 256 << 10, 16 << 20, 256 << 20}
	if testing.Short() {
		s = s[:3]
	}
	return s
}

// compileKernelPair compiles saxpy and reduce_sum into one image for
// device 0 of b, skipping when no compiler is found.
func compileKernelPair(t *testing.T, b gpumem.Backend) []byte {
	t.Helper()
	target, err := rtc.TargetOf(b, 0)
	if err != nil {
		t.Skipf("no compile target for device 0: %v", err)
	}
	res, err := rtc.Compile(context.Background(), rtc.Request{
		Source: kernels.Saxpy.Source + "\n" + kernels.Reduce.Source,
		Name:   "saxpy_reduce.cu",
		Target: target,
	})
	if errors.Is(err, gpumem.ErrNotSupported) || errors.Is(err, gpumem.ErrLibraryNotFound) {
		t.Skipf("no run-time compiler (set GPUMEM_NVRTC_LIBRARY): %v", err)
	}
	if err != nil {
		t.Fatalf("compiling for %s: %v", target, err)
	}
	t.Logf("%s compiled saxpy and reduce_sum for %s: %d bytes of image", res.Compiler, res.Target, len(res.Image))
	return res.Image
}

// TestGPUCompiled: compile with NVRTC, then caching, asyncpool, managed
// (moved to the device) and deferrable (LockAndLaunch and
// LockAndLaunchAsync) feed saxpy and reduce_sum at every size of
// gpuSizes. Managed memory stays under a quarter of the free device
// memory; deferrable buffers are spilled to the host tier before the
// launch up to 64 MiB.
func TestGPUCompiled(t *testing.T) {
	b := openGPU(t, "cuda")
	t.Cleanup(func() { b.Close() }) // after the module's unload, registered later
	kp := loadKernelPair(t, b, compileKernelPair(t, b))
	free, _, err := b.MemInfo(0)
	must(t, err)
	feedAllocators(t, b, kp, gpuSizes(), free/4, 64<<20)
}

// TestGPUCompiledFatbin loads the fatbin nvcc built from kernels/saxpy.cu
// and kernels/reduce.cu (with the dialect header of `gpumem compile
// --print-header`), named by GPUMEM_TEST_FATBIN, and launches it on
// memory of the caching allocator at 1 KiB and 64 MiB.
func TestGPUCompiledFatbin(t *testing.T) {
	path := os.Getenv("GPUMEM_TEST_FATBIN")
	if path == "" {
		t.Skip("GPUMEM_TEST_FATBIN is not set (scripts/gpu/run.sh kernels builds the fatbin with nvcc)")
	}
	image, err := os.ReadFile(path)
	must(t, err)
	b := openGPU(t, "cuda")
	t.Cleanup(func() { b.Close() }) // after the module's unload, registered later
	kp := loadKernelPair(t, b, image)
	for _, n := range []uint64{256, 16 << 20} {
		t.Run(sizeName(4*n), func(t *testing.T) {
			a, err := caching.New(b, caching.Options{})
			must(t, err)
			defer closeAlloc(t, a)
			feedStreamOrdered(t, b, kp, a, n)
		})
	}
}
