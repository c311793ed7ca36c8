package sim_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/kernels/simkernels"
	"github.com/gpumem/gpumem/sim"
)

// args is a kernel parameter array built in Go memory: each argument's
// bytes in a slice of its own, the array of their addresses beside them.
type args struct {
	vals [][]byte
	ptrs []unsafe.Pointer
}

func newArgs(vs ...any) *args {
	a := &args{}
	for _, v := range vs {
		var b []byte
		switch v := v.(type) {
		case gpumem.Ptr:
			b = binary.LittleEndian.AppendUint64(nil, uint64(v))
		case uint64:
			b = binary.LittleEndian.AppendUint64(nil, v)
		case int32:
			b = binary.LittleEndian.AppendUint32(nil, uint32(v))
		case float32:
			b = binary.LittleEndian.AppendUint32(nil, math.Float32bits(v))
		case []byte:
			b = append([]byte(nil), v...)
		default:
			panic(fmt.Sprintf("newArgs: %T", v))
		}
		a.vals = append(a.vals, b)
		a.ptrs = append(a.ptrs, unsafe.Pointer(&b[0]))
	}
	return a
}

func (a *args) params() gpumem.KernelParams {
	if len(a.ptrs) == 0 {
		return gpumem.KernelParams{}
	}
	return gpumem.KernelParams{Array: uintptr(unsafe.Pointer(&a.ptrs[0])), Count: len(a.ptrs)}
}

// launch launches f with the arguments vs.
func launch(g *sim.GPU, f gpumem.Function, grid, block uint32, s gpumem.Stream, vs ...any) error {
	a := newArgs(vs...)
	err := g.LaunchKernel(f, gpumem.Dim3{X: grid}, gpumem.Dim3{X: block}, 0, s, a.params())
	runtime.KeepAlive(a)
	return err
}

func f32bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func bytesF32(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

var saxpy = sim.Kernel{
	Name:   "saxpy",
	Params: []sim.Param{sim.PtrParam, sim.PtrParam, sim.ScalarParam(4), sim.ScalarParam(4)},
	Run: func(k *sim.KernelCall) {
		x, y, a, n := k.Arg.Ptr(0), k.Arg.Ptr(1), k.Arg.Float32(2), int(k.Arg.Int32(3))
		k.Threads(func(t int) {
			if i := k.GlobalThread(t); i < n {
				sim.Store(k, y, i, a*sim.Load[float32](k, x, i)+sim.Load[float32](k, y, i))
			}
		})
	},
}

// blockSum writes the sum of each block's elements of in[:n] to out[block],
// by a tree reduction in shared memory.
var blockSum = sim.Kernel{
	Name:   "block_sum",
	Params: []sim.Param{sim.PtrParam, sim.PtrParam, sim.ScalarParam(4)},
	Run: func(k *sim.KernelCall) {
		in, out, n := k.Arg.Ptr(0), k.Arg.Ptr(1), int(k.Arg.Int32(2))
		sh := sim.Shared[float32](k)
		k.Threads(func(t int) {
			sh[t] = 0
			if i := k.GlobalThread(t); i < n {
				sh[t] = sim.Load[float32](k, in, i)
			}
		})
		for s := k.BlockThreads() / 2; s > 0; s /= 2 {
			k.Threads(func(t int) {
				if t < s {
					sh[t] += sh[t+s]
				}
			})
		}
		sim.Store(k, out, k.BlockIndex(), sh[0])
	},
	SharedBytes: 256 * 4,
}

// kernelRig is a GPU with the test kernels registered and loaded.
type kernelRig struct {
	g   *sim.GPU
	mod gpumem.Module
	f   map[string]gpumem.Function
}

func newKernelRig(t *testing.T, cfg sim.Config, ks ...sim.Kernel) *kernelRig {
	t.Helper()
	r := &kernelRig{g: newSim(t, cfg), f: map[string]gpumem.Function{}}
	var img sim.ModuleImage
	for _, k := range ks {
		ok(t, r.g.RegisterKernel(k))
		img.Kernels = append(img.Kernels, k.Name)
	}
	var err error
	r.mod, err = r.g.ModuleLoadData(0, img.Bytes())
	ok(t, err)
	for _, k := range ks {
		r.f[k.Name], err = r.g.ModuleFunction(r.mod, k.Name)
		ok(t, err)
	}
	return r
}

// close frees ps, unloads the module and checks that nothing leaked.
func (r *kernelRig) close(t *testing.T, ps ...gpumem.Ptr) {
	t.Helper()
	for _, p := range ps {
		ok(t, r.g.Free(0, p))
	}
	ok(t, r.g.ModuleUnload(r.mod))
	noLeaks(t, r.g)
}

func (r *kernelRig) upload(t *testing.T, v []float32) gpumem.Ptr {
	t.Helper()
	p, err := r.g.Malloc(0, uint64(4*len(v)))
	ok(t, err)
	ok(t, r.g.CopyToDevice(p, f32bytes(v)))
	return p
}

func (r *kernelRig) download(t *testing.T, p gpumem.Ptr, n int) []float32 {
	t.Helper()
	b := make([]byte, 4*n)
	ok(t, r.g.CopyFromDevice(b, p))
	return bytesF32(b)
}

func TestKernelSaxpyOverAPartialGrid(t *testing.T) {
	r := newKernelRig(t, sim.Config{}, saxpy)
	g := r.g
	const n = 1000 // not a multiple of the block
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(i), float32(2*i+1)
	}
	px, py := r.upload(t, x), r.upload(t, y)
	s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	ok(t, err)
	ok(t, launch(g, r.f["saxpy"], (n+255)/256, 256, s, px, py, float32(3), int32(n)))
	ok(t, g.StreamSynchronize(s))
	got := r.download(t, py, n)
	for i := range got {
		if want := 3*x[i] + y[i]; got[i] != want {
			t.Fatalf("y[%d] = %v, want %v", i, got[i], want)
		}
	}
	ok(t, g.StreamDestroy(s))
	r.close(t, px, py)
}

func TestKernelBlockReduction(t *testing.T) {
	r := newKernelRig(t, sim.Config{}, blockSum)
	g := r.g
	const n, block = 5000, 256
	blocks := (n + block - 1) / block
	in := make([]float32, n)
	for i := range in {
		in[i] = float32(i%17) * 0.5
	}
	pin := r.upload(t, in)
	pout := r.upload(t, make([]float32, blocks))
	ok(t, launch(g, r.f["block_sum"], uint32(blocks), block, gpumem.Stream{}, pin, pout, int32(n)))
	got := r.download(t, pout, blocks)
	var total, want float64
	for _, v := range in {
		want += float64(v)
	}
	for b := 0; b < blocks; b++ {
		var want float32
		for i := b * block; i < min(n, (b+1)*block); i++ {
			want += in[i]
		}
		if got[b] != want { // small integers and halves: exact in any order
			t.Errorf("block %d: %v, want %v", b, got[b], want)
		}
		total += float64(got[b])
	}
	if total != want {
		t.Errorf("total %v, want %v", total, want)
	}
	r.close(t, pin, pout)
}

// fill writes v to every element of out[:n]; copy copies in to out.
var (
	fill = sim.Kernel{Name: "fill", Params: []sim.Param{sim.PtrParam, sim.ScalarParam(4), sim.ScalarParam(4)},
		Run: func(k *sim.KernelCall) {
			out, v, n := k.Arg.Ptr(0), k.Arg.Float32(1), int(k.Arg.Int32(2))
			k.Threads(func(t int) {
				if i := k.GlobalThread(t); i < n {
					sim.Store(k, out, i, v)
				}
			})
		}}
	copyK = sim.Kernel{Name: "copy", Params: []sim.Param{sim.PtrParam, sim.PtrParam, sim.ScalarParam(4)},
		Run: func(k *sim.KernelCall) {
			out, in, n := k.Arg.Ptr(0), k.Arg.Ptr(1), int(k.Arg.Int32(2))
			k.Threads(func(t int) {
				if i := k.GlobalThread(t); i < n {
					sim.Store(k, out, i, sim.Load[float32](k, in, i))
				}
			})
		}}
)

// A kernel on stream B that waits for an event recorded after a kernel on
// stream A sees A's result, however the streams are stepped.
func TestKernelStreamsAndEvents(t *testing.T) {
	r := newKernelRig(t, sim.Config{Manual: true}, fill, copyK)
	g := r.g
	const n = 300
	pa, pb := r.upload(t, make([]float32, n)), r.upload(t, make([]float32, n))
	a, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	b, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	e, _ := g.EventCreate(0, gpumem.EventDisableTiming)
	ok(t, launch(g, r.f["fill"], 3, 128, a, pa, float32(7), int32(n)))
	ok(t, g.EventRecord(e, a))
	ok(t, g.StreamWaitEvent(b, e))
	ok(t, launch(g, r.f["copy"], 3, 128, b, pb, pa, int32(n)))
	if !g.Step(b) { // the wait is a queued op; it cannot complete before a
		t.Log("the wait ran at once")
	}
	if g.Step(b) {
		t.Fatal("the copy kernel on b ran before the fill on a")
	}
	ok(t, g.StreamSynchronize(b)) // drives a first
	for i, v := range r.download(t, pb, n) {
		if v != 7 {
			t.Fatalf("b[%d] = %v", i, v)
		}
	}
	ok(t, g.EventDestroy(e))
	ok(t, g.StreamDestroy(a))
	ok(t, g.StreamDestroy(b))
	r.close(t, pa, pb)
}

// A captured launch replays with the arguments as they were at capture.
func TestKernelCaptureAndReplay(t *testing.T) {
	r := newKernelRig(t, sim.Config{}, saxpy)
	g := r.g
	const n = 64
	x := make([]float32, n)
	for i := range x {
		x[i] = 1
	}
	px, py := r.upload(t, x), r.upload(t, make([]float32, n))
	s, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	ok(t, g.StreamBeginCapture(s, gpumem.CaptureModeGlobal))
	a := newArgs(px, py, float32(2), int32(n))
	ok(t, g.LaunchKernel(r.f["saxpy"], gpumem.Dim3{X: 1}, gpumem.Dim3{X: 64}, 0, s, a.params()))
	binary.LittleEndian.PutUint32(a.vals[2], math.Float32bits(100)) // too late: captured
	gr, err := g.StreamEndCapture(s)
	ok(t, err)
	runtime.KeepAlive(a)
	ok(t, g.StreamSynchronize(s))
	if y := r.download(t, py, n); y[0] != 0 {
		t.Fatalf("the kernel ran during capture: y[0] = %v", y[0])
	}
	ge, err := g.GraphInstantiate(gr)
	ok(t, err)
	for range 3 {
		ok(t, g.GraphLaunch(ge, s))
	}
	ok(t, g.StreamSynchronize(s))
	for i, v := range r.download(t, py, n) {
		if v != 6 {
			t.Fatalf("y[%d] = %v after 3 replays of y += 2x, want 6", i, v)
		}
	}
	ok(t, g.GraphExecDestroy(ge))
	ok(t, g.GraphDestroy(gr))
	ok(t, g.StreamDestroy(s))
	r.close(t, px, py)
}

// The detector checks every pointer argument: a launch whose input was
// freed by another stream before it ran is reported.
func TestKernelUseAfterFree(t *testing.T) {
	r := newKernelRig(t, sim.Config{Manual: true}, copyK)
	g := r.g
	a, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	b, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	out := r.upload(t, make([]float32, 16))
	in, err := g.MallocAsync(64, a)
	ok(t, err)
	ok(t, g.StreamSynchronize(a))
	ok(t, launch(g, r.f["copy"], 1, 16, b, out, in, int32(16)))
	ok(t, g.FreeAsync(in, a)) // not ordered after the launch on b: a bug
	ok(t, g.StreamSynchronize(a))
	err = g.StreamSynchronize(b)
	vs := g.Violations()
	if len(vs) == 0 || vs[0].Op != "LaunchKernel" || !strings.Contains(vs[0].What, "use after free") {
		t.Fatalf("violations: %v", vs)
	}
	if code(err) != 700 {
		t.Fatalf("the kernel's memory is gone: StreamSynchronize = %v, want the sticky code 700", err)
	}
	g.ClearViolations()
	ok(t, g.StreamDestroy(a))
	ok(t, g.StreamDestroy(b))
	r.close(t, out)
}

// A tagged block returned while a kernel that uses it is queued is caught,
// though the memory itself is still allocated (and the kernel runs).
func TestKernelUseOfUntaggedBlock(t *testing.T) {
	r := newKernelRig(t, sim.Config{Manual: true}, fill)
	g := r.g
	s, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	seg, _ := g.Malloc(0, 1<<20)
	ok(t, g.Tag(seg, 4096, 1))
	ok(t, launch(g, r.f["fill"], 1, 32, s, seg, float32(1), int32(32)))
	ok(t, g.Untag(seg))
	ok(t, g.StreamSynchronize(s))
	if vs := g.Violations(); len(vs) != 1 || vs[0].Op != "LaunchKernel" || !strings.Contains(vs[0].What, "owner 1") {
		t.Fatalf("violations: %v", vs)
	}
	g.ClearViolations()
	ok(t, g.StreamDestroy(s))
	r.close(t, seg)
}

func TestKernelArgumentMismatch(t *testing.T) {
	wide := sim.Kernel{Name: "wide", Params: []sim.Param{sim.PtrParam, sim.ScalarParam(8), sim.ScalarParam(4)},
		Run: func(k *sim.KernelCall) {}}
	misread := sim.Kernel{Name: "misread", Params: []sim.Param{sim.ScalarParam(8)},
		Run: func(k *sim.KernelCall) { _ = k.Arg.Float32(0) }}
	r := newKernelRig(t, sim.Config{}, saxpy, wide, misread)
	g := r.g
	p, _ := g.Malloc(0, 4096)
	host, _ := g.MallocHost(4096)
	f := r.f["saxpy"]
	cases := map[string]error{
		"too few":              launch(g, f, 1, 32, gpumem.Stream{}, p, p, float32(1)),
		"too many":             launch(g, f, 1, 32, gpumem.Stream{}, p, p, float32(1), int32(1), int32(2)),
		"not device memory":    launch(g, f, 1, 32, gpumem.Stream{}, p, gpumem.Ptr(0xdead0000), float32(1), int32(1)),
		"past the allocation":  launch(g, f, 1, 32, gpumem.Stream{}, p.Add(8192), p, float32(1), int32(1)),
		"block over 1024":      launch(g, f, 1, 2048, gpumem.Stream{}, p, p, float32(1), int32(1)),
		"null array":           g.LaunchKernel(f, gpumem.Dim3{X: 1}, gpumem.Dim3{X: 1}, 0, gpumem.Stream{}, gpumem.KernelParams{Count: 4}),
		"too much shared":      g.LaunchKernel(f, gpumem.Dim3{X: 1}, gpumem.Dim3{X: 1}, 64<<10, gpumem.Stream{}, newArgs(p, p, float32(1), int32(1)).params()),
		"null argument":        g.LaunchKernel(f, gpumem.Dim3{X: 1}, gpumem.Dim3{X: 1}, 0, gpumem.Stream{}, nullArg()),
		"no such stream":       launch(g, f, 1, 1, gpumem.Stream{Handle: 12345}, p, p, float32(1), int32(1)),
		"an unknown function":  g.LaunchKernel(gpumem.Function{Handle: 99}, gpumem.Dim3{}, gpumem.Dim3{}, 0, gpumem.Stream{}, gpumem.KernelParams{}),
		"a 4-byte 8-byte arg":  packed(g, r.f["wide"], p, 4),
		"a packed 8-byte arg+": packed(g, r.f["wide"], p, 8),
	}
	for name, err := range cases {
		if name == "a packed 8-byte arg+" {
			ok(t, err) // laid out right
			continue
		}
		if !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("%s: %v, want ErrInvalidValue", name, err)
		}
		// The stream and pointer checks name LaunchKernel as the rest do.
		var ve *gpumem.Error
		if err == nil || !strings.HasPrefix(err.Error(), "sim: LaunchKernel: ") || strings.Contains(err.Error(), "sim: Launch:") ||
			!errors.As(err, &ve) || ve.Op != "cuLaunchKernel" {
			t.Errorf("%s: %v does not name LaunchKernel (cuLaunchKernel)", name, err)
		}
	}
	// Pinned host memory is memory a kernel may touch.
	ok(t, launch(g, f, 1, 32, gpumem.Stream{}, host, host, float32(1), int32(8)))
	ok(t, g.DeviceSynchronize(0))
	// A kernel that reads an argument as a type of another size faults.
	ok(t, launch(g, r.f["misread"], 1, 1, gpumem.Stream{}, uint64(1)))
	if err := g.DeviceSynchronize(0); code(err) != 1 || !strings.Contains(err.Error(), "argument 0 is a 8-byte scalar, read as 4 bytes") {
		t.Errorf("misread argument: %v", err)
	}
	g.ClearViolations()
	ok(t, g.FreeHost(host))
	r.close(t, p)
}

// packed launches wide with its arguments in one buffer, the scalar given
// gap bytes before the next argument.
func packed(g *sim.GPU, f gpumem.Function, p gpumem.Ptr, gap int) error {
	buf := make([]byte, 8+gap+4)
	binary.LittleEndian.PutUint64(buf, uint64(p))
	ptrs := []unsafe.Pointer{unsafe.Pointer(&buf[0]), unsafe.Pointer(&buf[8]), unsafe.Pointer(&buf[8+gap])}
	err := g.LaunchKernel(f, gpumem.Dim3{X: 1}, gpumem.Dim3{X: 1}, 0, gpumem.Stream{}, gpumem.KernelParams{Array: uintptr(unsafe.Pointer(&ptrs[0])), Count: 3})
	runtime.KeepAlive(buf)
	runtime.KeepAlive(ptrs)
	return err
}

var nullArgs = make([]unsafe.Pointer, 4)

func nullArg() gpumem.KernelParams {
	return gpumem.KernelParams{Array: uintptr(unsafe.Pointer(&nullArgs[0])), Count: 4}
}

// Reading past the end of a buffer stops the kernel with the sticky
// CUDA_ERROR_ILLEGAL_ADDRESS; nothing panics in the program.
func TestKernelOutOfBounds(t *testing.T) {
	r := newKernelRig(t, sim.Config{}, saxpy)
	g := r.g
	const n = 250 // 1000 bytes: the overrun lands in the allocation's rounding
	px, py := r.upload(t, make([]float32, n)), r.upload(t, make([]float32, n))
	s, _ := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	ok(t, launch(g, r.f["saxpy"], 1, 256, s, px, py, float32(1), int32(n+1))) // a guard off by one
	err := g.StreamSynchronize(s)
	var ge *gpumem.Error
	if !errors.As(err, &ge) || ge.Code != 700 || ge.Name != "CUDA_ERROR_ILLEGAL_ADDRESS" || !strings.Contains(err.Error(), "past the end") {
		t.Fatalf("StreamSynchronize after an overrun: %v", err)
	}
	if vs := g.Violations(); len(vs) != 1 || vs[0].Op != "LaunchKernel" {
		t.Fatalf("violations: %v", vs)
	}
	// The error is sticky, as CUDA's: later launches and synchronizations
	// on the device report it.
	if err := launch(g, r.f["saxpy"], 1, 1, s, px, py, float32(1), int32(1)); code(err) != 700 {
		t.Errorf("launch after the fault: %v", err)
	}
	if err := g.DeviceSynchronize(0); code(err) != 700 {
		t.Errorf("DeviceSynchronize after the fault: %v", err)
	}
	g.ClearViolations()
	ok(t, g.StreamDestroy(s))
	r.close(t, px, py)
}

func TestKernelPanicIsAStreamError(t *testing.T) {
	boom := sim.Kernel{Name: "boom", Run: func(k *sim.KernelCall) {
		if k.BlockIndex() == 2 {
			var s []int
			s[k.BlockIndex()]++
		}
	}}
	wild := sim.Kernel{Name: "wild", Params: []sim.Param{sim.PtrParam}, Run: func(k *sim.KernelCall) {
		defer func() { _ = recover() }() // a kernel that swallows its fault is still reported
		sim.Store(k, k.Arg.Ptr(0), 1<<30, 1.0)
	}}
	r := newKernelRig(t, sim.Config{}, boom, wild)
	s, _ := r.g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	ok(t, r.g.LaunchKernel(r.f["boom"], gpumem.Dim3{X: 4}, gpumem.Dim3{X: 1}, 0, s, gpumem.KernelParams{}))
	err := r.g.StreamSynchronize(s)
	if code(err) != 999 || !strings.Contains(err.Error(), "block 2 panicked: runtime error: index out of range [2] with length 0") {
		t.Fatalf("StreamSynchronize after a panic: %v", err)
	}

	r2 := newKernelRig(t, sim.Config{}, wild)
	p, _ := r2.g.Malloc(0, 512)
	ok(t, launch(r2.g, r2.f["wild"], 1, 1, gpumem.Stream{}, p))
	if err := r2.g.DeviceSynchronize(0); code(err) != 700 {
		t.Fatalf("a recovered fault: %v", err)
	}
}

func TestKernelFaultInjection(t *testing.T) {
	ran := 0
	count := sim.Kernel{Name: "count", Run: func(*sim.KernelCall) { ran++ }}
	r := newKernelRig(t, sim.Config{}, count)
	g := r.g
	before, other := g.Calls("LaunchKernel"), g.Calls("Launch")
	g.InjectFault("LaunchKernel", 2, nil)
	for i := range 3 {
		err := g.LaunchKernel(r.f["count"], gpumem.Dim3{}, gpumem.Dim3{}, 0, gpumem.Stream{}, gpumem.KernelParams{})
		if (i == 1) != errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("launch %d: %v", i, err)
		}
	}
	ok(t, g.DeviceSynchronize(0))
	if ran != 2 || g.Calls("LaunchKernel") != before+3 || g.Calls("Launch") != other {
		t.Errorf("ran %d kernels; LaunchKernel calls %d, Launch calls %d", ran, g.Calls("LaunchKernel")-before, g.Calls("Launch")-other)
	}
	injected := errors.New("injected")
	g.InjectFault("LaunchKernel", 1, injected)
	if err := g.LaunchKernel(r.f["count"], gpumem.Dim3{}, gpumem.Dim3{}, 0, gpumem.Stream{}, gpumem.KernelParams{}); err != injected {
		t.Errorf("injected error: %v", err)
	}
	r.close(t)
}

// Many goroutines launch on their own streams into one counter.
func TestKernelConcurrentLaunches(t *testing.T) {
	add := sim.Kernel{Name: "add", Params: []sim.Param{sim.PtrParam},
		Run: func(k *sim.KernelCall) {
			p := k.Arg.Ptr(0)
			k.Threads(func(int) { sim.AtomicAdd(k, p, 0, uint64(1)) })
		}}
	r := newKernelRig(t, sim.Config{}, add)
	g := r.g
	p, _ := g.Malloc(0, 8)
	ok(t, g.Memset(p, 0, 8))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
			if err != nil {
				t.Error(err)
				return
			}
			for range 20 {
				if err := launch(g, r.f["add"], 2, 64, s, p); err != nil {
					t.Error(err)
				}
			}
			if err := g.StreamSynchronize(s); err != nil {
				t.Error(err)
			}
			_ = g.StreamDestroy(s)
		}()
	}
	wg.Wait()
	b := make([]byte, 8)
	ok(t, g.CopyFromDevice(b, p))
	if got := binary.LittleEndian.Uint64(b); got != 8*20*2*64 {
		t.Errorf("counter %d, want %d", got, 8*20*2*64)
	}
	r.close(t, p)
}

// TestKernelFailf: a Go kernel that finds it was launched wrongly stops as
// a failed device-side assert: CUDA_ERROR_ASSERT at the next synchronize,
// a Violation naming the kernel. reduce_sum (kernels/simkernels) refuses a
// block that is not a power of two, whose tree would drop elements.
func TestKernelFailf(t *testing.T) {
	picky := sim.Kernel{Name: "picky", Params: []sim.Param{sim.ScalarParam(8)}, Run: func(k *sim.KernelCall) {
		if n := k.Arg.Uint64(0); n%2 != 0 {
			k.Failf("odd argument %d", n)
		}
	}}
	for _, kc := range []struct {
		k     sim.Kernel
		block uint32
		args  []any
		want  string
	}{
		{picky, 32, []any{uint64(3)}, "odd argument 3"},
		{simkernels.Reduce, 100, []any{gpumem.Ptr(0), gpumem.Ptr(0), uint64(0)}, "power-of-two block"},
	} {
		r := newKernelRig(t, sim.Config{}, kc.k)
		args := kc.args
		if kc.k.Name == "reduce_sum" {
			in, err := r.g.Malloc(0, 400)
			ok(t, err)
			out, err := r.g.Malloc(0, 4)
			ok(t, err)
			args = []any{in, out, uint64(100)}
			defer func() { _ = r.g.Free(0, in); _ = r.g.Free(0, out) }()
		}
		ok(t, launch(r.g, r.f[kc.k.Name], 1, kc.block, gpumem.Stream{}, args...))
		err := r.g.DeviceSynchronize(0)
		if err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_ASSERT") || !strings.Contains(err.Error(), kc.want) {
			t.Errorf("%s: synchronize after a failed assert: %v, want CUDA_ERROR_ASSERT naming %q", kc.k.Name, err, kc.want)
		}
		if len(r.g.Violations()) == 0 {
			t.Errorf("%s: no violation recorded", kc.k.Name)
		}
	}
}
