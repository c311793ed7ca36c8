package blas

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/bind"
)

// The native engine against a fake library: every symbol of the three
// tables is a Go callback that records its arguments, so that the words
// the engine passes (their order, the dialect's enum values, the host
// scalars behind the pointers, the pointer mode switches) are checked with
// no library and no GPU. A fake backend makes a do-nothing function
// "current".

type fakeCall struct {
	sym  string
	args []uintptr
}

var (
	fakeOnce  sync.Once
	fakeSyms  map[string]uintptr
	fakeMu    sync.Mutex
	fakeLog   []fakeCall
	fakeOmit  = map[string]bool{} // symbols the fake library lacks, by name
	fakeCur   uintptr             // the fake make-current function
	fakeFails atomic.Int32        // a status every routine returns, when not 0
	fakeWSErr atomic.Int32        // a status the workspace call returns, when not 0

	fakeDeviceMode atomic.Bool // the last pointer mode set: results go to host memory only in host mode
)

func fakeSymbols() {
	fakeOnce.Do(func() {
		fakeSyms = map[string]uintptr{}
		u := reflect.TypeOf(uintptr(0))
		for _, tab := range []*bind.Table{cublasTable, hipblasTable, rocblasTable} {
			for _, r := range tab.Rows {
				for _, name := range r.Symbol {
					if name == "" || fakeSyms[name] != 0 {
						continue
					}
					nargs, _ := r.Args.Words(bind.CUDA)
					in := make([]reflect.Type, nargs)
					for i := range in {
						in[i] = u
					}
					name, op := name, r.ID
					fn := reflect.MakeFunc(reflect.FuncOf(in, []reflect.Type{u}, false), func(args []reflect.Value) []reflect.Value {
						words := make([]uintptr, len(args))
						for i, a := range args {
							words[i] = uintptr(a.Uint())
						}
						fakeMu.Lock()
						fakeLog = append(fakeLog, fakeCall{name, words})
						fakeMu.Unlock()
						status := uintptr(0)
						switch {
						case op == opCreate:
							*(*uintptr)(ptr(words[0])) = 0xb1a5
						case op == opSetPointerMode:
							fakeDeviceMode.Store(words[1] == 1)
						case (op == opSdot || op == opDdot || op == opSnrm2 || op == opDnrm2) && !fakeDeviceMode.Load():
							if op == opSdot || op == opSnrm2 {
								*(*float32)(ptr(words[len(words)-1])) = 42
							} else {
								*(*float64)(ptr(words[len(words)-1])) = 42
							}
						case op == opStatusName:
							return []reflect.Value{reflect.ValueOf(uintptr(unsafe.Pointer(&fakeStatus[0])))}
						}
						if op >= opSaxpy {
							status = uintptr(fakeFails.Load())
						}
						if op == opSetWorkspace {
							status = uintptr(fakeWSErr.Load())
						}
						return []reflect.Value{reflect.ValueOf(status)}
					}).Interface()
					fakeSyms[name] = purego.NewCallback(fn)
				}
			}
		}
		fakeCur = purego.NewCallback(func(uintptr) uintptr { return 0 })
	})
}

var fakeStatus = []byte("FAKE_STATUS\x00")

// ptr converts a word the engine passed back into a pointer.
func ptr(w uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&w)) }

type fakeObject struct{ path string }

func (f fakeObject) Path() string { return f.path }
func (f fakeObject) Sym(name string) (uintptr, error) {
	fakeMu.Lock()
	omit := fakeOmit[name]
	fakeMu.Unlock()
	if a := fakeSyms[name]; a != 0 && !omit {
		return a, nil
	}
	return 0, &gpumem.NotSupportedError{Backend: "fake", Op: name, Reason: "not in the fake library"}
}
func (f fakeObject) Close() error { return nil }

// fakeBackend is a backend of one device whose context is "made current"
// by a function that does nothing.
type fakeBackend struct {
	gpumem.Backend
	name   string
	cur    uintptr // the make-current function; fakeCur when 0
	closed atomic.Bool
}

func (f *fakeBackend) Name() string              { return f.name }
func (f *fakeBackend) DeviceCount() (int, error) { return 1, nil }
func (f *fakeBackend) CurrentFunc(dev int) (uintptr, uintptr, *atomic.Bool, error) {
	if f.cur != 0 {
		return f.cur, 0, &f.closed, nil
	}
	return fakeCur, 0, &f.closed, nil
}

// openFake opens a handle over the fake library for backend name ("cuda",
// "hip") with the symbols omit left out; path keys the library cache.
func openFake(t *testing.T, name, path string, omit ...string) *Handle {
	t.Helper()
	fakeSymbols()
	fakeMu.Lock()
	fakeOmit = map[string]bool{}
	for _, o := range omit {
		fakeOmit[o] = true
	}
	fakeLog = nil
	fakeMu.Unlock()
	fakeDeviceMode.Store(false) // a new handle starts in host mode
	testLoader = func(c ...string) (bind.Object, error) { return fakeObject{path: c[0]}, nil }
	t.Cleanup(func() { testLoader = nil })
	h, err := Open(&fakeBackend{name: name}, 0, WithLibrary(path))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// calls returns and forgets the calls recorded.
func calls() []fakeCall {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	c := fakeLog
	fakeLog = nil
	return c
}

func f32at(w uintptr) float32 { return *(*float32)(ptr(w)) }
func f64at(w uintptr) float64 { return *(*float64)(ptr(w)) }

// want compares a call's words with the expected ones; -1 skips a word
// (a host scalar's address, checked apart).
func want(t *testing.T, c fakeCall, sym string, words ...int64) {
	t.Helper()
	if c.sym != sym || len(c.args) != len(words) {
		t.Fatalf("called %s with %d words, want %s with %d", c.sym, len(c.args), sym, len(words))
	}
	for i, w := range words {
		if w != -1 && c.args[i] != uintptr(w) {
			t.Errorf("%s word %d = %#x, want %#x (all: %#x)", sym, i, c.args[i], uintptr(w), c.args)
		}
	}
}

func TestNativeCUBLASArguments(t *testing.T) {
	h := openFake(t, "cuda", "fake-cublas")
	// Loading asks the version (cublasGetProperty), then the handle is made.
	if c := calls(); len(c) != 4 || c[0].sym != "cublasGetProperty" || c[3].sym != "cublasCreate_v2" {
		t.Fatalf("Open made %v", c)
	}
	if lib := h.Library(); lib != "cublas 0.0.0 (fake-cublas)" {
		t.Errorf("Library = %q", lib)
	}
	const A, B, C gpumem.Ptr = 0xa000, 0xb000, 0xc000
	if err := h.Sgemm(Trans, NoTrans, 3, 4, 5, 1.5, A, 6, B, 7, -2, C, 8); err != nil {
		t.Fatal(err)
	}
	c := calls()
	if len(c) != 1 {
		t.Fatalf("calls %v", c)
	}
	want(t, c[0], "cublasSgemm_v2", 0xb1a5, 1, 0, 3, 4, 5, -1, 0xa000, 6, 0xb000, 7, -1, 0xc000, 8)
	if a, b := f32at(c[0].args[6]), f32at(c[0].args[11]); a != 1.5 || b != -2 {
		t.Errorf("alpha, beta = %v, %v", a, b)
	}
	if err := h.DgemmStridedBatched(NoTrans, ConjTrans, 3, 4, 5, 0.25, A, 3, 15, B, 5, 0, 1, C, 3, 12, 9); err != nil {
		t.Fatal(err)
	}
	c = calls()
	want(t, c[0], "cublasDgemmStridedBatched", 0xb1a5, 0, 2, 3, 4, 5, -1, 0xa000, 3, 15, 0xb000, 5, 0, -1, 0xc000, 3, 12, 9)
	if a, b := f64at(c[0].args[6]), f64at(c[0].args[13]); a != 0.25 || b != 1 {
		t.Errorf("alpha, beta = %v, %v", a, b)
	}
	if err := h.GemmEx(NoTrans, Trans, 2, 3, 4, 1, A, 2, B, 3, 0, C, 2, BF16, F32); err != nil {
		t.Fatal(err)
	}
	c = calls()
	want(t, c[0], "cublasGemmEx", 0xb1a5, 0, 1, 2, 3, 4, -1, 0xa000, 14, 2, 0xb000, 14, 3, -1, 0xc000, 0, 2, 68, 0xffffffff)
	if err := h.Saxpy(5, 3, A, -2, B, 1); err != nil {
		t.Fatal(err)
	}
	c = calls()
	want(t, c[0], "cublasSaxpy_v2", 0xb1a5, 5, -1, 0xa000, -1, 0xb000, 1)
	if int32(c[0].args[4]) != -2 || f32at(c[0].args[2]) != 3 {
		t.Errorf("incx %d, alpha %v", int32(c[0].args[4]), f32at(c[0].args[2]))
	}
	if r, err := h.Ddot(4, A, 1, B, 2); r != 42 || err != nil {
		t.Errorf("Ddot = %v, %v (the library's result)", r, err)
	}
	calls()
	// Device scalars: the mode is switched once, then kept.
	const al, be, res gpumem.Ptr = 0xd000, 0xd008, 0xd010
	if err := h.GemvDevice(F32, Trans, 3, 2, al, A, 3, B, 1, be, C, 1); err != nil {
		t.Fatal(err)
	}
	if err := h.DotDevice(F64, 3, A, 1, B, 1, res); err != nil {
		t.Fatal(err)
	}
	c = calls()
	if len(c) != 3 {
		t.Fatalf("calls %v", c)
	}
	want(t, c[0], "cublasSetPointerMode_v2", 0xb1a5, 1)
	want(t, c[1], "cublasSgemv_v2", 0xb1a5, 1, 3, 2, 0xd000, 0xa000, 3, 0xb000, 1, 0xd008, 0xc000, 1)
	want(t, c[2], "cublasDdot_v2", 0xb1a5, 3, 0xa000, 1, 0xb000, 1, 0xd010)
	if _, err := h.Snrm2(3, A, 1); err != nil {
		t.Fatal(err)
	}
	c = calls()
	want(t, c[0], "cublasSetPointerMode_v2", 0xb1a5, 0)
	// A failing status comes back named, with its sentinel.
	fakeFails.Store(7)
	err := h.Sscal(3, 2, A, 1)
	fakeFails.Store(0)
	var be2 *bind.Error
	if !errors.As(err, &be2) || be2.Code != 7 || be2.Name != "FAKE_STATUS" || !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("failing status: %v", err)
	}
	calls()
	// Close destroys the handle; a closed backend's context refuses calls.
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if c := calls(); len(c) != 1 || c[0].sym != "cublasDestroy_v2" || c[0].args[0] != 0xb1a5 {
		t.Errorf("Close made %v", c)
	}
}

func TestNativeWorkspaceAndStream(t *testing.T) {
	h := openFake(t, "cuda", "fake-cublas-ws")
	calls()
	s := gpumem.Stream{Handle: 0x5150, Device: 0}
	if err := h.SetStream(s); err != nil {
		t.Fatal(err)
	}
	if c := calls(); len(c) != 1 {
		t.Fatalf("SetStream made %v", c)
	} else {
		want(t, c[0], "cublasSetStream_v2", 0xb1a5, 0x5150)
	}
	// A library without a workspace call refuses a workspace.
	fakeSymbols()
	testLoader = func(c ...string) (bind.Object, error) { return fakeObject{path: c[0]}, nil }
	fakeMu.Lock()
	fakeOmit = map[string]bool{"cublasSetWorkspace_v2": true}
	fakeMu.Unlock()
	_, err := Open(&fakeBackend{name: "cuda"}, 0, WithLibrary("fake-cublas-nows"), WithWorkspace(&countingResource{}, 1<<20))
	if !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("workspace with no cublasSetWorkspace_v2: %v", err)
	}
}

// countingResource hands out fake addresses: 0xe000, then 0xf000, and so
// on, one page apart.
type countingResource struct{ live, made atomic.Int64 }

func (r *countingResource) Allocate(size uint64, s gpumem.Stream) (gpumem.Ptr, error) {
	r.live.Add(1)
	return gpumem.Ptr(0xe000 + 0x1000*(r.made.Add(1)-1)), nil
}
func (r *countingResource) Deallocate(p gpumem.Ptr, s gpumem.Stream) error {
	r.live.Add(-1)
	return nil
}

func TestNativeHIPDialects(t *testing.T) {
	const A, B, C gpumem.Ptr = 0xa000, 0xb000, 0xc000
	gemmEx := func(h *Handle) fakeCall {
		t.Helper()
		calls()
		if err := h.GemmEx(Trans, NoTrans, 2, 3, 4, 1, A, 4, B, 4, 0.5, C, 2, F16, F16); err != nil {
			t.Fatal(err)
		}
		c := calls()
		if len(c) != 1 {
			t.Fatalf("calls %v", c)
		}
		return c[0]
	}
	// hipBLAS 2.x: GemmEx_v2 with hipDataType and HIPBLAS_COMPUTE_32F.
	h := openFake(t, "hip", "fake-hipblas2")
	c := gemmEx(h)
	want(t, c, "hipblasGemmEx_v2", 0xb1a5, 112, 111, 2, 3, 4, -1, 0xa000, 2, 4, 0xb000, 2, 4, -1, 0xc000, 2, 2, 2, 160)
	if f32at(c.args[6]) != 1 || f32at(c.args[13]) != 0.5 {
		t.Errorf("alpha, beta = %v, %v", f32at(c.args[6]), f32at(c.args[13]))
	}
	// hipBLAS 3.0: the plain name with the same types.
	h = openFake(t, "hip", "fake-hipblas3", "hipblasGemmEx_v2")
	want(t, gemmEx(h), "hipblasGemmEx", 0xb1a5, 112, 111, 2, 3, 4, -1, 0xa000, 2, 4, 0xb000, 2, 4, -1, 0xc000, 2, 2, 2, 160)
	// hipBLAS 0.x/1.x: hipblasDatatype_t, the compute type too.
	h = openFake(t, "hip", "fake-hipblas1", "hipblasGemmEx_v2", "hipblasSetWorkspace")
	want(t, gemmEx(h), "hipblasGemmEx", 0xb1a5, 112, 111, 2, 3, 4, -1, 0xa000, 150, 4, 0xb000, 150, 4, -1, 0xc000, 150, 2, 151, 160)
	// No hipBLAS: rocBLAS, 24 words with D = C.
	h = openFake(t, "hip", "fake-rocblas", "hipblasCreate")
	if lib := h.Library(); lib[:7] != "rocblas" {
		t.Errorf("Library = %q", lib)
	}
	want(t, gemmEx(h), "rocblas_gemm_ex", 0xb1a5, 112, 111, 2, 3, 4, -1, 0xa000, 150, 4, 0xb000, 150, 4, -1, 0xc000, 150, 2, 0xc000, 150, 2, 151, 0, 0, 0)
	if err := h.Dgemm(NoTrans, Trans, 1, 2, 3, 2, A, 1, B, 2, 0, C, 1); err != nil {
		t.Fatal(err)
	}
	want(t, calls()[0], "rocblas_dgemm", 0xb1a5, 111, 112, 1, 2, 3, -1, 0xa000, 1, 0xb000, 2, -1, 0xc000, 1)
}

// No library of the vendor: a load error naming every declaration tried.
func TestNativeNoLibrary(t *testing.T) {
	fakeSymbols()
	testLoader = func(c ...string) (bind.Object, error) {
		return nil, &gpumem.LoadError{Tried: []gpumem.LoadAttempt{{Name: fmt.Sprint(c), Message: "fake"}}}
	}
	defer func() { testLoader = nil }()
	_, err := Open(&fakeBackend{name: "hip"}, 0, WithLibrary("fake-none"))
	if !errors.Is(err, gpumem.ErrLibraryNotFound) {
		t.Errorf("no library: %v", err)
	}
	_, err = Open(&fakeBackend{name: "other"}, 0)
	if !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("unknown backend: %v", err)
	}
}

// A routine call allocates nothing on the native path. The Go callbacks
// allocate (purego calls them through reflect), so here every routine is
// libc's sched_yield, which ignores its arguments and returns 0.
func TestNativeNoAllocations(t *testing.T) {
	libc, err := bind.DL("libc.so.6")
	if err != nil {
		t.Skipf("no libc.so.6: %v", err)
	}
	defer libc.Close()
	yield, err := libc.Sym("sched_yield")
	if err != nil {
		t.Skip(err)
	}
	fakeSymbols()
	fakeMu.Lock()
	saved := fakeSyms
	fakeSyms = map[string]uintptr{}
	for name, addr := range saved {
		fakeSyms[name] = addr
	}
	fakeSyms["cublasSgemm_v2"], fakeSyms["cublasDgemmStridedBatched"] = yield, yield
	fakeOmit = map[string]bool{}
	fakeMu.Unlock()
	defer func() { fakeMu.Lock(); fakeSyms = saved; fakeMu.Unlock() }()
	testLoader = func(c ...string) (bind.Object, error) { return fakeObject{path: c[0]}, nil }
	defer func() { testLoader = nil }()
	h, err := Open(&fakeBackend{name: "cuda", cur: yield}, 0, WithLibrary("fake-cublas-allocs"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	const A gpumem.Ptr = 0xa000
	if n := testing.AllocsPerRun(200, func() {
		if err := h.Sgemm(NoTrans, Trans, 8, 8, 8, 1, A, 8, A, 8, 0, A, 8); err != nil {
			t.Fatal(err)
		}
		if err := h.DgemmStridedBatched(NoTrans, NoTrans, 8, 8, 8, 1, A, 8, 64, A, 8, 64, 0, A, 8, 64, 4); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per call pair", n)
	}
}

// A SetStream whose workspace the library refuses on the new stream puts
// the library back on the handle's stream, with its workspace: the stream
// the handle reports is the one its calls are queued on.
func TestNativeSetStreamRollsBack(t *testing.T) {
	fakeSymbols()
	fakeMu.Lock()
	fakeOmit = map[string]bool{}
	fakeMu.Unlock()
	testLoader = func(c ...string) (bind.Object, error) { return fakeObject{path: c[0]}, nil }
	defer func() { testLoader = nil }()
	r := &countingResource{}
	h, err := Open(&fakeBackend{name: "cuda"}, 0, WithLibrary("fake-cublas-rollback"), WithWorkspace(r, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	calls()
	fakeWSErr.Store(7)
	err = h.SetStream(gpumem.Stream{Handle: 0x5150})
	fakeWSErr.Store(0)
	if !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("SetStream with the workspace refused: %v", err)
	}
	if s := h.Stream(); s != (gpumem.Stream{}) {
		t.Errorf("Stream = %v, want the default stream", s)
	}
	var c []fakeCall
	for _, k := range calls() {
		if k.sym != "cublasGetStatusName" { // naming the status, once per process
			c = append(c, k)
		}
	}
	if len(c) != 4 {
		t.Fatalf("SetStream made %v", c)
	}
	want(t, c[0], "cublasSetStream_v2", 0xb1a5, 0x5150)
	want(t, c[1], "cublasSetWorkspace_v2", 0xb1a5, 0xf000, 1<<20) // the new stream's own
	want(t, c[2], "cublasSetStream_v2", 0xb1a5, 0)
	want(t, c[3], "cublasSetWorkspace_v2", 0xb1a5, 0xe000, 1<<20)
	if err := h.Close(); err != nil || r.live.Load() != 0 {
		t.Errorf("Close = %v with %d workspaces live", err, r.live.Load())
	}
}
