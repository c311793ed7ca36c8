package tests

// Kernels on a real GPU: hand-written PTX loaded through the CUDA backend,
// launched through the kernel package on memory of the allocators, inside
// a stream capture, with attributes and occupancy read back. HIP needs a
// code object for its device (there is no text form to write by hand); its
// kernel tests come with run-time compilation.

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"runtime"
	"testing"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/kernel"
)

// testPTX has an empty kernel, a saxpy, a kernel taking a struct by value
// and a module global. PTX ISA 7.0 for sm_80: the driver compiles it for
// the device at load (sm_90 on an H100 or H200).
const testPTX = `
.version 7.0
.target sm_80
.address_size 64

.visible .global .align 4 .u32 counter;

.visible .entry empty()
{
	ret;
}

.visible .entry saxpy(
	.param .u64 saxpy_x,
	.param .u64 saxpy_y,
	.param .f32 saxpy_a,
	.param .u32 saxpy_n
)
{
	.reg .pred %p<2>;
	.reg .b32 %r<6>;
	.reg .f32 %f<5>;
	.reg .b64 %rd<8>;

	ld.param.u64 %rd1, [saxpy_x];
	ld.param.u64 %rd2, [saxpy_y];
	ld.param.f32 %f1, [saxpy_a];
	ld.param.u32 %r1, [saxpy_n];
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %ntid.x;
	mov.u32 %r4, %tid.x;
	mad.lo.s32 %r5, %r2, %r3, %r4;
	setp.ge.u32 %p1, %r5, %r1;
	@%p1 bra DONE;
	cvta.to.global.u64 %rd3, %rd1;
	cvta.to.global.u64 %rd4, %rd2;
	mul.wide.u32 %rd5, %r5, 4;
	add.s64 %rd6, %rd3, %rd5;
	add.s64 %rd7, %rd4, %rd5;
	ld.global.f32 %f2, [%rd6];
	ld.global.f32 %f3, [%rd7];
	fma.rn.f32 %f4, %f1, %f2, %f3;
	st.global.f32 [%rd7], %f4;
DONE:
	ret;
}

.visible .entry pairsum(
	.param .u64 pairsum_out,
	.param .align 8 .b8 pairsum_p[16],
	.param .u64 pairsum_k
)
{
	.reg .b32 %r<6>;
	.reg .f64 %fd<2>;
	.reg .b64 %rd<5>;

	ld.param.u64 %rd1, [pairsum_out];
	ld.param.u32 %r1, [pairsum_p];
	ld.param.f64 %fd1, [pairsum_p+8];
	ld.param.u64 %rd2, [pairsum_k];
	cvt.rzi.s32.f64 %r2, %fd1;
	cvt.u32.u64 %r3, %rd2;
	add.s32 %r4, %r1, %r2;
	add.s32 %r5, %r4, %r3;
	cvta.to.global.u64 %rd3, %rd1;
	st.global.u32 [%rd3], %r5;
	atom.global.add.u32 %r5, [counter], 1;
	ret;
}
`

type gpuKernels struct {
	b gpumem.Backend
	k gpumem.Kernels
	m gpumem.Module
	s gpumem.Stream
}

// openKernels opens the CUDA backend, loads testPTX on device 0 and makes a
// non-blocking stream; it skips, saying why, with no device.
func openKernels(t testing.TB) *gpuKernels {
	t.Helper()
	b := openGPU(t, "cuda")
	var k gpumem.Kernels = b
	m, err := k.ModuleLoadData(0, []byte(testPTX))
	if err != nil {
		b.Close()
		t.Fatalf("ModuleLoadData: %v", err)
	}
	s, err := b.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	g := &gpuKernels{b: b, k: k, m: m, s: s}
	t.Cleanup(func() {
		b.StreamSynchronize(s)
		b.StreamDestroy(s)
		if err := k.ModuleUnload(m); err != nil {
			t.Errorf("ModuleUnload: %v", err)
		}
		b.Close()
	})
	return g
}

func (g *gpuKernels) fn(t testing.TB, name string) gpumem.Function {
	t.Helper()
	f, err := g.k.ModuleFunction(g.m, name)
	if err != nil {
		t.Fatalf("ModuleFunction(%s): %v", name, err)
	}
	return f
}

func f32bytes(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

// saxpyOn runs y = a*x + y for n elements in memory of alloc and checks it.
func saxpyOn(t *testing.T, g *gpuKernels, alloc gpumem.Resource) {
	const n = 100_003
	x, err := alloc.Allocate(4*n, g.s)
	if err != nil {
		t.Fatal(err)
	}
	defer alloc.Deallocate(x, g.s)
	y, err := alloc.Allocate(4*n, g.s)
	if err != nil {
		t.Fatal(err)
	}
	defer alloc.Deallocate(y, g.s)
	hx, hy := make([]float32, n), make([]float32, n)
	for i := range hx {
		hx[i], hy[i] = float32(i), float32(2*i+1)
	}
	if err := g.b.StreamSynchronize(g.s); err != nil { // stream-ordered allocations ready
		t.Fatal(err)
	}
	if err := g.b.CopyToDevice(x, f32bytes(hx)); err != nil {
		t.Fatal(err)
	}
	if err := g.b.CopyToDevice(y, f32bytes(hy)); err != nil {
		t.Fatal(err)
	}
	l, err := kernel.New(g.k, g.fn(t, "saxpy"), kernel.Ptr, kernel.Ptr, kernel.Float32, kernel.Uint32)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i, err := range []error{l.SetPtr(0, x), l.SetPtr(1, y), l.SetF32(2, 3), l.SetU32(3, n)} {
		if err != nil {
			t.Fatalf("set %d: %v", i, err)
		}
	}
	if err := l.Launch(g.s, gpumem.Dim3{X: (n + 255) / 256}, gpumem.Dim3{X: 256}, 0); err != nil {
		t.Fatal(err)
	}
	if err := g.b.StreamSynchronize(g.s); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 4*n)
	if err := g.b.CopyFromDevice(out, y); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:]))
		if want := 3*hx[i] + hy[i]; got != want {
			t.Fatalf("y[%d] = %g, want %g", i, got, want)
		}
	}
}

func TestGPUKernelSaxpyCaching(t *testing.T) {
	g := openKernels(t)
	a, err := caching.New(g.b, caching.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	saxpyOn(t, g, a)
}

func TestGPUKernelSaxpyAsyncpool(t *testing.T) {
	g := openKernels(t)
	a, err := asyncpool.New(g.b, asyncpool.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	saxpyOn(t, g, a)
}

// TestGPUKernelStructAndGlobal passes a struct by value and reads a module
// global's address and size.
func TestGPUKernelStructAndGlobal(t *testing.T) {
	g := openKernels(t)
	cp, size, err := g.k.ModuleGlobal(g.m, "counter")
	if err != nil || cp == 0 || size != 4 {
		t.Fatalf("ModuleGlobal(counter) = %#x, %d, %v", cp, size, err)
	}
	if err := g.b.CopyToDevice(cp, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	out, err := g.b.Malloc(0, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer g.b.Free(0, out)
	l, err := kernel.New(g.k, g.fn(t, "pairsum"), kernel.Ptr, kernel.Struct(16, 8), kernel.Uint64)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	type pair struct {
		A int32
		_ int32
		B float64
	}
	p := pair{A: 40, B: 1.9}
	l.SetPtr(0, out)
	if err := l.SetStruct(1, unsafe.Slice((*byte)(unsafe.Pointer(&p)), unsafe.Sizeof(p))); err != nil {
		t.Fatal(err)
	}
	l.SetU64(2, 1)
	for i := 0; i < 3; i++ {
		if err := l.Launch(g.s, gpumem.Dim3{X: 1}, gpumem.Dim3{X: 1}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.b.StreamSynchronize(g.s); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	g.b.CopyFromDevice(got, out)
	cnt := make([]byte, 4)
	g.b.CopyFromDevice(cnt, cp)
	if v, c := binary.LittleEndian.Uint32(got), binary.LittleEndian.Uint32(cnt); v != 42 || c != 3 {
		t.Errorf("pairsum wrote %d (want 42), counter %d (want 3)", v, c)
	}
}

// TestGPUKernelCapture captures two launches into a graph and replays it.
func TestGPUKernelCapture(t *testing.T) {
	g := openKernels(t)
	const n = 4096
	x, err := g.b.Malloc(0, 4*n)
	if err != nil {
		t.Fatal(err)
	}
	defer g.b.Free(0, x)
	y, err := g.b.Malloc(0, 4*n)
	if err != nil {
		t.Fatal(err)
	}
	defer g.b.Free(0, y)
	hx := make([]float32, n)
	for i := range hx {
		hx[i] = float32(i)
	}
	g.b.CopyToDevice(x, f32bytes(hx))
	g.b.CopyToDevice(y, make([]byte, 4*n))
	l, err := kernel.New(g.k, g.fn(t, "saxpy"), kernel.Ptr, kernel.Ptr, kernel.Float32, kernel.Uint32)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.SetPtr(0, x)
	l.SetPtr(1, y)
	l.SetU32(3, n)
	if err := g.b.StreamBeginCapture(g.s, gpumem.CaptureModeGlobal); err != nil {
		t.Fatal(err)
	}
	l.SetF32(2, 1)
	err1 := l.Launch(g.s, gpumem.Dim3{X: n / 256}, gpumem.Dim3{X: 256}, 0)
	l.SetF32(2, 2) // the first node keeps a = 1: arguments are copied at capture
	err2 := l.Launch(g.s, gpumem.Dim3{X: n / 256}, gpumem.Dim3{X: 256}, 0)
	graph, err := g.b.StreamEndCapture(g.s)
	if err1 != nil || err2 != nil || err != nil {
		t.Fatalf("captured launches: %v, %v; end capture: %v", err1, err2, err)
	}
	defer g.b.GraphDestroy(graph)
	exec, err := g.b.GraphInstantiate(graph)
	if err != nil {
		t.Fatal(err)
	}
	defer g.b.GraphExecDestroy(exec)
	for i := 0; i < 3; i++ {
		if err := g.b.GraphLaunch(exec, g.s); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.b.StreamSynchronize(g.s); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 4*n)
	g.b.CopyFromDevice(out, y)
	for i := 0; i < n; i++ {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:])); got != 9*hx[i] {
			t.Fatalf("after three replays y[%d] = %g, want %g", i, got, 9*hx[i])
		}
	}
}

func TestGPUKernelAttributesAndOccupancy(t *testing.T) {
	g := openKernels(t)
	f := g.fn(t, "saxpy")
	attrs := map[gpumem.FuncAttribute]int{}
	for a := gpumem.FuncMaxThreadsPerBlock; a <= gpumem.FuncMaxDynamicSharedSizeBytes; a++ {
		v, err := g.k.FuncAttribute(f, a)
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		attrs[a] = v
		t.Logf("%s = %d", a, v)
	}
	if v := attrs[gpumem.FuncMaxThreadsPerBlock]; v < 32 || v > 1024 {
		t.Errorf("max threads per block %d", v)
	}
	if v := attrs[gpumem.FuncNumRegs]; v < 1 || v > 255 {
		t.Errorf("registers %d", v)
	}
	if v := attrs[gpumem.FuncPTXVersion]; v != 70 && v != 80 {
		t.Errorf("PTX version %d, want 70 (the text's) or the target's", v)
	}
	if v := attrs[gpumem.FuncBinaryVersion]; v < 80 {
		t.Errorf("binary version %d, want the device's (80 or more)", v)
	}
	if attrs[gpumem.FuncSharedSizeBytes] != 0 || attrs[gpumem.FuncLocalSizeBytes] != 0 {
		t.Errorf("saxpy uses no shared or local memory: %v", attrs)
	}
	if err := g.k.FuncSetMaxDynamicSharedMemory(f, 64<<10); err != nil {
		t.Fatal(err)
	}
	if v, _ := g.k.FuncAttribute(f, gpumem.FuncMaxDynamicSharedSizeBytes); v != 64<<10 {
		t.Errorf("max dynamic shared memory after setting 64 KiB: %d", v)
	}
	nb, err := g.k.OccupancyMaxActiveBlocks(f, 256, 0)
	if err != nil || nb < 1 || nb > 64 {
		t.Errorf("active blocks of 256 threads = %d, %v", nb, err)
	}
	grid, block, err := g.k.OccupancyMaxPotentialBlockSize(f, 0, 0)
	sms, _ := g.b.DeviceAttribute(0, gpumem.AttrMultiprocessorCount)
	if err != nil || block < 32 || block > 1024 || block%32 != 0 || grid < sms {
		t.Errorf("potential block size = grid %d, block %d, %v (%d multiprocessors)", grid, block, err, sms)
	}
	if _, block, err := g.k.OccupancyMaxPotentialBlockSize(f, 0, 128); err != nil || block > 128 {
		t.Errorf("limited to 128: block %d, %v", block, err)
	}
	t.Logf("occupancy: %d blocks of 256 per SM; suggested block %d, min grid %d", nb, block, grid)
}

func TestGPUKernelErrors(t *testing.T) {
	g := openKernels(t)
	if _, err := g.k.ModuleFunction(g.m, "nope"); err == nil {
		t.Error("a missing kernel was found")
	}
	// With lazy loading (CUDA 12's default through the library API) the
	// driver may accept an image at load and refuse it only when a kernel
	// is asked of it: either way, nothing of it can be launched.
	if bad, err := g.k.ModuleLoadData(0, []byte("not ptx")); err == nil {
		if _, err := g.k.ModuleFunction(bad, "empty"); err == nil {
			t.Error("a kernel was found in garbage")
		}
		if err := g.k.ModuleUnload(bad); err != nil {
			t.Errorf("unloading the garbage module: %v", err)
		}
	}
	f := g.fn(t, "empty")
	// A block larger than the device allows: the driver's error, no crash.
	err := g.k.LaunchKernel(f, gpumem.Dim3{X: 1}, gpumem.Dim3{X: 4096}, 0, g.s, gpumem.KernelParams{})
	var ge *gpumem.Error
	if !errors.As(err, &ge) || ge.Op != "cuLaunchKernel" {
		t.Errorf("block of 4096: %v", err)
	}
	l, err := kernel.New(g.k, g.fn(t, "saxpy"), kernel.Ptr, kernel.Ptr, kernel.Float32, kernel.Uint32)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.SetF64(2, 1); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("wrong kind: %v", err)
	}
	if err := l.Launch(g.s, gpumem.Dim3{X: 1}, gpumem.Dim3{X: 1}, 0); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("unset arguments: %v", err)
	}
	if err := g.b.StreamSynchronize(g.s); err != nil {
		t.Errorf("the stream is broken after refused launches: %v", err)
	}
	checkSaxpyParams(t, g)
}

// checkSaxpyParams: the driver reports saxpy's four parameters (CUDA 12.4
// and later), and kernel.New refuses a signature short of one, or with a
// parameter of another size, before any launch could read past the array.
func checkSaxpyParams(t *testing.T, g *gpuKernels) {
	pr, ok := g.k.(gpumem.ParamReporter)
	if !ok {
		t.Fatal("the CUDA backend does not implement gpumem.ParamReporter")
	}
	f := g.fn(t, "saxpy")
	ps, err := pr.FuncParams(f)
	if errors.Is(err, gpumem.ErrNotSupported) {
		t.Logf("FuncParams (a driver before CUDA 12.4): %v", err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("saxpy's parameters as the driver reports them: %v", ps)
	want := []gpumem.ParamInfo{{Offset: 0, Size: 8}, {Offset: 8, Size: 8}, {Offset: 16, Size: 4}, {Offset: 20, Size: 4}}
	if len(ps) != len(want) {
		t.Fatalf("%d parameters, want %v", len(ps), want)
	}
	for i := range want {
		if ps[i] != want[i] {
			t.Errorf("parameter %d: %+v, want %+v", i, ps[i], want[i])
		}
	}
	for _, sig := range [][]kernel.Arg{
		{kernel.Ptr, kernel.Ptr, kernel.Float32},
		{kernel.Ptr, kernel.Ptr, kernel.Float32, kernel.Uint64},
	} {
		if l, err := kernel.New(g.k, f, sig...); !errors.Is(err, gpumem.ErrInvalidValue) {
			if l != nil {
				l.Close()
			}
			t.Errorf("kernel.New(saxpy, %v): %v, want ErrInvalidValue", sig, err)
		}
	}
	// A raw launch is checked too: four valid arguments (n = 0: no work),
	// declared as three, are refused before the driver reads them.
	var x, y uint64
	var a, n uint32
	arr := [4]uintptr{uintptr(unsafe.Pointer(&x)), uintptr(unsafe.Pointer(&y)), uintptr(unsafe.Pointer(&a)), uintptr(unsafe.Pointer(&n))}
	params := gpumem.KernelParams{Array: uintptr(unsafe.Pointer(&arr)), Count: 3}
	if err := g.k.LaunchKernel(f, gpumem.Dim3{X: 1}, gpumem.Dim3{X: 32}, 0, g.s, params); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("a raw launch of saxpy with three arguments: %v, want ErrInvalidValue", err)
	}
	params.Count = 4
	if err := g.k.LaunchKernel(f, gpumem.Dim3{X: 1}, gpumem.Dim3{X: 32}, 0, g.s, params); err != nil {
		t.Errorf("a raw launch of saxpy with its four arguments: %v", err)
	}
	runtime.KeepAlive(&arr)
}

func TestGPUKernelNoAllocations(t *testing.T) {
	g := openKernels(t)
	l, err := kernel.New(g.k, g.fn(t, "empty"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if n := testing.AllocsPerRun(1000, func() {
		if err := l.Launch(g.s, gpumem.Dim3{X: 1}, gpumem.Dim3{X: 32}, 0); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("a launch allocates %v times", n)
	}
}

// TestGPUKernelWritePTX writes testPTX to $GPUMEM_KERNEL_PTX for the C
// launch anchor (scripts/gpu/launchbench.c), so that both load one text.
func TestGPUKernelWritePTX(t *testing.T) {
	path := os.Getenv("GPUMEM_KERNEL_PTX")
	if path == "" {
		t.Skip("GPUMEM_KERNEL_PTX is not set: nothing to write")
	}
	if err := os.WriteFile(path, []byte(testPTX), 0o644); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkGPULaunchEmpty launches the empty kernel (1 block of 32
// threads) on a non-blocking stream, synchronizing every launchSyncEvery
// launches; ns/op is the time per launch, launch rate included, comparable
// with scripts/gpu/launchbench.c's loop.
func BenchmarkGPULaunchEmpty(b *testing.B) {
	g := openKernels(b)
	l, err := kernel.New(g.k, g.fn(b, "empty"))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := l.Launch(g.s, gpumem.Dim3{X: 1}, gpumem.Dim3{X: 32}, 0); err != nil {
			b.Fatal(err)
		}
		if i++; i%launchSyncEvery == 0 {
			g.b.StreamSynchronize(g.s)
		}
	}
	g.b.StreamSynchronize(g.s)
}

const launchSyncEvery = 1000
