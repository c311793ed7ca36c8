package driver

import (
	"errors"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/native"
	"github.com/gpumem/gpumem/kernel"
)

// The module and launch path against the fake libcuda: which symbols are
// called with which arguments, for the library API (CUDA 12.0+) and the
// module API, and what a launch passes through CallPre12.

func get[T any](addr uintptr) T { return *(*T)(*(*unsafe.Pointer)(unsafe.Pointer(&addr))) }

var kfake struct {
	mu       sync.Mutex
	image    string   // what the last load received, up to its NUL
	calls    []string // symbols called, in order
	launch   [11]uintptr
	arg0     uint64 // the first kernel argument's bytes, read through kernelParams
	attrAsk  uintptr
	setAttr  [3]uintptr
	occArgs  [6]uintptr
	launches int
}

func krec(sym string) { kfake.mu.Lock(); kfake.calls = append(kfake.calls, sym); kfake.mu.Unlock() }

func cstr(p uintptr) string {
	var b []byte
	for {
		c := get[byte](p)
		if c == 0 {
			return string(b)
		}
		b = append(b, c)
		p++
	}
}

var kernelFns = sync.OnceValue(func() map[string]uintptr {
	cb := purego.NewCallback
	return map[string]uintptr{
		"cuLibraryLoadData": cb(func(lib, code, jo, jov, njo, lo, lov, nlo uintptr) uintptr {
			krec("cuLibraryLoadData")
			kfake.image = cstr(code)
			if jo != 0 || jov != 0 || njo != 0 || lo != 0 || lov != 0 || nlo != 0 {
				return 1
			}
			put[uintptr](lib, 0x11b)
			return 0
		}),
		"cuLibraryUnload": cb(func(lib uintptr) uintptr { krec("cuLibraryUnload"); return 0 }),
		"cuLibraryGetKernel": cb(func(k, lib, name uintptr) uintptr {
			krec("cuLibraryGetKernel " + cstr(name))
			if cstr(name) != "saxpy" {
				return 500 // CUDA_ERROR_NOT_FOUND
			}
			put[uintptr](k, 0x4e4)
			return 0
		}),
		"cuKernelGetFunction": cb(func(f, k uintptr) uintptr {
			krec("cuKernelGetFunction")
			put(f, k+uintptr(fakeCurrent.Load()))
			return 0
		}),
		"cuLibraryGetGlobal": cb(func(p, n, lib, name uintptr) uintptr {
			krec("cuLibraryGetGlobal " + cstr(name))
			put[uintptr](p, 0x7000)
			put[uintptr](n, 64)
			return 0
		}),
		"cuModuleLoadData": cb(func(m, code uintptr) uintptr {
			krec("cuModuleLoadData")
			kfake.image = cstr(code)
			put[uintptr](m, 0x30d)
			return 0
		}),
		"cuModuleUnload": cb(func(m uintptr) uintptr { krec("cuModuleUnload"); return 0 }),
		"cuModuleGetFunction": cb(func(f, m, name uintptr) uintptr {
			krec("cuModuleGetFunction " + cstr(name))
			put[uintptr](f, 0xf00)
			return 0
		}),
		"cuModuleGetGlobal_v2": cb(func(p, n, m, name uintptr) uintptr {
			krec("cuModuleGetGlobal_v2 " + cstr(name))
			put[uintptr](p, 0x8000)
			put[uintptr](n, 4)
			return 0
		}),
		"cuFuncGetAttribute": cb(func(p, attr, f uintptr) uintptr {
			kfake.attrAsk = attr
			put(p, int32(1000+attr))
			return 0
		}),
		// saxpy (0x4e4 in some context) takes one pointer; other kernels
		// none. Index past the end: CUDA_ERROR_INVALID_VALUE.
		"cuFuncGetParamInfo": cb(func(f, i, off, size uintptr) uintptr {
			if f-0x4e4-fakeCtxBase < 16 && i == 0 {
				put[uintptr](off, 0)
				put[uintptr](size, 8)
				return 0
			}
			return 1
		}),
		"cuFuncSetAttribute": cb(func(f, attr, v uintptr) uintptr { kfake.setAttr = [3]uintptr{f, attr, v}; return 0 }),
		"cuLaunchKernel": cb(func(f, gx, gy, gz, bx, by, bz, smem, s, params, extra uintptr) uintptr {
			kfake.mu.Lock()
			defer kfake.mu.Unlock()
			kfake.launches++
			kfake.launch = [11]uintptr{f, gx, gy, gz, bx, by, bz, smem, s, params, extra}
			if params != 0 {
				kfake.arg0 = get[uint64](get[uintptr](params))
			}
			return 0
		}),
		"cuOccupancyMaxActiveBlocksPerMultiprocessor": cb(func(n, f, bs, smem uintptr) uintptr {
			kfake.occArgs = [6]uintptr{n, f, bs, smem}
			put(n, int32(bs/64))
			return 0
		}),
		"cuOccupancyMaxPotentialBlockSize": cb(func(g, bs, f, b2d, smem, limit uintptr) uintptr {
			kfake.occArgs = [6]uintptr{g, bs, f, b2d, smem, limit}
			put(g, int32(132))
			put(bs, int32(768))
			return 0
		}),
	}
})

// kernelLoader is fakeLoader with the kernel symbols, less without.
func kernelLoader(without ...string) native.Loader {
	base := fakeLoader(without...)
	return func(c ...string) (native.Library, error) {
		l, err := base(c...)
		if err != nil {
			return nil, err
		}
		fl := l.(*fakeLib)
		skip := map[string]bool{}
		for _, w := range without {
			skip[w] = true
		}
		for k, v := range kernelFns() {
			if !skip[k] {
				fl.syms[k] = v
			}
		}
		return fl, nil
	}
}

func openKernels(t *testing.T, without ...string) *native.Backend {
	t.Helper()
	b, err := open(kernelLoader(without...), "")
	if err != nil {
		t.Fatal(err)
	}
	kfake.mu.Lock()
	kfake.calls = nil
	kfake.mu.Unlock()
	return b.(*native.Backend)
}

func TestFakeLibraryAPI(t *testing.T) {
	b := openKernels(t)
	defer b.Close()
	m, err := b.ModuleLoadData(1, []byte(".version 7.0"))
	if err != nil {
		t.Fatal(err)
	}
	if m != (gpumem.Module{Device: 1, Handle: 0x11b}) || kfake.image != ".version 7.0" {
		t.Errorf("module %+v, image %q", m, kfake.image)
	}
	f, err := b.ModuleFunction(m, "saxpy")
	if err != nil {
		t.Fatal(err)
	}
	// The CUfunction is the one of device 1's context.
	if f.Handle != 0x4e4+fakeCtxBase+1 || f.Device != 1 || f.Name != "saxpy" {
		t.Errorf("function %+v", f)
	}
	if _, err := b.ModuleFunction(m, "nope"); err == nil || !errors.Is(err, gpumem.ErrNotSupported) && err.Error() == "" {
		t.Errorf("missing kernel: %v", err)
	}
	if _, err := b.ModuleFunction(m, "a\x00b"); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("name with NUL: %v", err)
	}
	p, n, err := b.ModuleGlobal(m, "table")
	if err != nil || p != 0x7000 || n != 64 {
		t.Errorf("global = %#x, %d, %v", p, n, err)
	}
	if v, err := b.FuncAttribute(f, gpumem.FuncNumRegs); err != nil || v != 1004 || kfake.attrAsk != 4 {
		t.Errorf("NumRegs = %d, %v (asked %d)", v, err, kfake.attrAsk)
	}
	if err := b.FuncSetMaxDynamicSharedMemory(f, 100<<10); err != nil || kfake.setAttr != [3]uintptr{f.Handle, 8, 100 << 10} {
		t.Errorf("set max dynamic smem: %v, %v", err, kfake.setAttr)
	}
	if nb, err := b.OccupancyMaxActiveBlocks(f, 256, 1024); err != nil || nb != 4 || kfake.occArgs[2] != 256 || kfake.occArgs[3] != 1024 {
		t.Errorf("occupancy = %d, %v, %v", nb, err, kfake.occArgs)
	}
	if g, bs, err := b.OccupancyMaxPotentialBlockSize(f, 512, 1024); err != nil || g != 132 || bs != 768 ||
		kfake.occArgs[2] != f.Handle || kfake.occArgs[3] != 0 || kfake.occArgs[4] != 512 || kfake.occArgs[5] != 1024 {
		t.Errorf("potential = %d, %d, %v, %v", g, bs, err, kfake.occArgs)
	}

	// A launch through the kernel package: eleven arguments reach C.
	l, err := kernel.New(b, f, kernel.Ptr)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.SetPtr(0, 0xabcdef)
	s := gpumem.Stream{Device: 1, Handle: 0x5}
	if err := l.Launch(s, gpumem.Dim3{X: 3, Y: 2}, gpumem.Dim3{X: 128}, 4096); err != nil {
		t.Fatal(err)
	}
	want := [11]uintptr{f.Handle, 3, 2, 1, 128, 1, 1, 4096, 5, kfake.launch[9], 0}
	if kfake.launch != want || kfake.launch[9] == 0 || kfake.arg0 != 0xabcdef {
		t.Errorf("cuLaunchKernel got %#x (arg0 %#x), want %#x", kfake.launch, kfake.arg0, want)
	}
	if fakeCurrent.Load() != fakeCtxBase+1 {
		t.Errorf("launch ran in context %#x, want device 1's", fakeCurrent.Load())
	}
	// (Allocations per launch are counted on a real driver, in tests/: a
	// purego callback, which the fake's functions are, allocates itself.)
	if err := b.LaunchKernel(f, gpumem.Dim3{}, gpumem.Dim3{}, 0, gpumem.Stream{Device: 0}, gpumem.KernelParams{}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("launch on another device's stream: %v", err)
	}
	if err := b.ModuleUnload(m); err != nil {
		t.Fatal(err)
	}
	kfake.mu.Lock()
	calls := append([]string(nil), kfake.calls...)
	kfake.mu.Unlock()
	wantCalls := []string{"cuLibraryLoadData", "cuLibraryGetKernel saxpy", "cuKernelGetFunction", "cuLibraryGetKernel nope", "cuLibraryGetGlobal table", "cuLibraryUnload"}
	if len(calls) != len(wantCalls) {
		t.Fatalf("calls %q, want %q", calls, wantCalls)
	}
	for i := range calls {
		if calls[i] != wantCalls[i] {
			t.Errorf("call %d: %q, want %q", i, calls[i], wantCalls[i])
		}
	}
}

func TestFakeModuleAPI(t *testing.T) {
	b := openKernels(t, "cuLibraryLoadData", "cuLibraryGetKernel", "cuKernelGetFunction", "cuLibraryUnload", "cuLibraryGetGlobal")
	defer b.Close()
	m, err := b.ModuleLoadData(0, []byte("ptx"))
	if err != nil || m.Handle != 0x30d {
		t.Fatalf("load = %+v, %v", m, err)
	}
	f, err := b.ModuleFunction(m, "k")
	if err != nil || f.Handle != 0xf00 {
		t.Fatalf("function = %+v, %v", f, err)
	}
	if p, n, err := b.ModuleGlobal(m, "g"); err != nil || p != 0x8000 || n != 4 {
		t.Errorf("global = %#x, %d, %v", p, n, err)
	}
	if err := b.ModuleUnload(m); err != nil {
		t.Fatal(err)
	}
	want := []string{"cuModuleLoadData", "cuModuleGetFunction k", "cuModuleGetGlobal_v2 g", "cuModuleUnload"}
	if len(kfake.calls) != len(want) {
		t.Fatalf("calls %q, want %q", kfake.calls, want)
	}
	if _, err := b.ModuleLoadData(0, nil); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("empty image: %v", err)
	}
}

func TestKernelSymbolsOptional(t *testing.T) {
	// A driver without any kernel symbol still opens; the operations say
	// ErrNotSupported, naming the symbol.
	b, err := open(fakeLoader(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var k gpumem.Kernels = b
	if _, err := k.ModuleLoadData(0, []byte("x")); !isNotSupportedNaming(err, "ModuleLoadData") {
		t.Errorf("load without symbols: %v", err)
	}
	f := gpumem.Function{Handle: 1}
	if err := k.LaunchKernel(f, gpumem.Dim3{}, gpumem.Dim3{}, 0, gpumem.Stream{}, gpumem.KernelParams{}); !isNotSupportedNaming(err, "LaunchKernel") {
		t.Errorf("launch without symbols: %v", err)
	}
}

// A raw launch of a kernel whose parameters the driver reports is refused,
// before the driver is called, when its array has another length; a
// kernel the backend did not look up, one of an unloaded module, or any
// kernel on a driver without the report is launched as given.
func TestFakeLaunchCheckedAgainstParams(t *testing.T) {
	launches := func() int {
		kfake.mu.Lock()
		defer kfake.mu.Unlock()
		return kfake.launches
	}
	arg := uint64(0xabc)
	argp := uintptr(unsafe.Pointer(&arg))
	arr := [2]uintptr{argp, argp}
	two := gpumem.KernelParams{Array: uintptr(unsafe.Pointer(&arr)), Count: 2}
	one := gpumem.KernelParams{Array: two.Array, Count: 1}
	s := gpumem.Stream{Device: 1}
	for _, reported := range []bool{true, false} {
		var without []string
		if !reported {
			without = []string{"cuFuncGetParamInfo"}
		}
		b := openKernels(t, without...)
		m, err := b.ModuleLoadData(1, []byte("ptx"))
		if err != nil {
			t.Fatal(err)
		}
		f, err := b.ModuleFunction(m, "saxpy")
		if err != nil {
			t.Fatal(err)
		}
		n := launches()
		err = b.LaunchKernel(f, gpumem.Dim3{}, gpumem.Dim3{}, 0, s, two)
		if reported && (!errors.Is(err, gpumem.ErrInvalidValue) || launches() != n) {
			t.Errorf("two arguments to a kernel of one: %v, %d launches", err, launches()-n)
		}
		if !reported && (err != nil || launches() != n+1) {
			t.Errorf("without the driver's report: %v, %d launches", err, launches()-n)
		}
		n = launches()
		if err := b.LaunchKernel(f, gpumem.Dim3{}, gpumem.Dim3{}, 0, s, one); err != nil || launches() != n+1 {
			t.Errorf("one argument: %v, %d launches", err, launches()-n)
		}
		foreign := gpumem.Function{Device: 1, Handle: 0x999, Name: "foreign"}
		if err := b.LaunchKernel(foreign, gpumem.Dim3{}, gpumem.Dim3{}, 0, s, two); err != nil {
			t.Errorf("a kernel not looked up through the backend: %v", err)
		}
		if err := b.ModuleUnload(m); err != nil {
			t.Fatal(err)
		}
		n = launches()
		if err := b.LaunchKernel(f, gpumem.Dim3{}, gpumem.Dim3{}, 0, s, two); err != nil || launches() != n+1 {
			t.Errorf("the handle after its module's unload (reusable by the driver): %v", err)
		}
		b.Close()
	}
}
