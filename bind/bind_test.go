package bind_test

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/bind"
	"github.com/gpumem/gpumem/sim"
)

// Rows of the libc table the tests bind: C's own library stands in for a
// vendor's, on every machine.
const (
	opStrlen bind.Op = iota
	opAbs
	opStrerror
	opSnprintf
	opMissingOptional
	opHIPOnly
)

func libcTable() *bind.Table {
	return bind.NewTable("libc",
		bind.Func{Op: "Strlen", Symbol: bind.Symbols("strlen", "strlen"), Args: bind.Args(1), Required: bind.Both},
		bind.Func{Op: "Abs", Symbol: bind.Symbols("labs", "labs"), Args: bind.Args(1), Required: bind.Both, Notes: "stands in for a status-returning call"},
		bind.Func{Op: "Strerror", Symbol: bind.Symbols("strerror", "strerror"), Args: bind.Args(1)},
		bind.Func{Op: "Snprintf", Symbol: bind.Symbols("snprintf", "snprintf"), Notes: "variadic: argument count unchecked"},
		bind.Func{Op: "Missing", Symbol: bind.Symbols("gpumem_no_such_function", "gpumem_no_such_function"), Args: bind.Args(2)},
		bind.Func{Op: "HIPOnly", Symbol: bind.Symbols("", "strlen"), Args: bind.Args(1)},
	)
}

func libc() *bind.Library {
	return &bind.Library{
		Name:  "libc",
		Files: [bind.NumVendors][]string{{"libgpumem-none.so.1", "libc.so.6"}, {"libc.so.6"}},
		Env:   "GPUMEM_TEST_LIBC",
		Table: libcTable(),
		Status: bind.Status{
			Name: bind.NameFunc(opStrerror),
			Sentinel: func(code int) error {
				if code == int(syscall.ENOMEM) {
					return gpumem.ErrOutOfMemory
				}
				return nil
			},
		},
		Version: func(l *bind.Lib) (string, error) { return "libc", nil },
	}
}

func open(t *testing.T) *bind.Lib {
	t.Helper()
	l, err := bind.Open(libc(), bind.CUDA)
	if err != nil {
		t.Skipf("no libc.so.6 here: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestCall(t *testing.T) {
	l := open(t)
	s := []byte("hello, gpu\x00")
	r, err := l.Call(opStrlen, uintptr(unsafe.Pointer(&s[0])))
	runtime.KeepAlive(s)
	if err != nil || r != 10 {
		t.Fatalf("strlen = %d, %v; want 10, nil", r, err)
	}
	if l.Path() != "libc.so.6" || l.Vendor() != bind.CUDA {
		t.Errorf("Path, Vendor = %q, %v", l.Path(), l.Vendor())
	}
	if v, err := l.Version(); v != "libc" || err != nil {
		t.Errorf("Version = %q, %v", v, err)
	}
	// Twelve integers through a variadic function: stack arguments.
	buf := make([]byte, 64)
	format := []byte("%ld %ld %ld %ld %ld %ld %ld %ld %ld\x00")
	r, err = l.Call(opSnprintf, uintptr(unsafe.Pointer(&buf[0])), 64, uintptr(unsafe.Pointer(&format[0])), 1, 2, 3, 4, 5, 6, 7, 8, ^uintptr(8))
	runtime.KeepAlive(format)
	if err != nil || string(buf[:int(r)]) != "1 2 3 4 5 6 7 8 -9" {
		t.Errorf("snprintf wrote %q (%d, %v)", buf[:max(int(int32(r)), 0)], r, err)
	}
}

func TestCheckStatus(t *testing.T) {
	l := open(t)
	if err := l.Check(opAbs, 0); err != nil {
		t.Fatalf("labs(0) = %v, want success", err)
	}
	err := l.Check(opAbs, ^uintptr(int(syscall.ENOENT)-1))
	var be *bind.Error
	if !errors.As(err, &be) {
		t.Fatalf("labs(-ENOENT) = %v, want *bind.Error", err)
	}
	if be.Code != int(syscall.ENOENT) || be.Op != "labs" || be.Library != "libc" || !strings.EqualFold(be.Name, syscall.ENOENT.Error()) {
		t.Errorf("error = %+v", be)
	}
	if !strings.Contains(strings.ToLower(err.Error()), "labs failed: "+syscall.ENOENT.Error()) {
		t.Errorf("message %q", err)
	}
	if err := l.Check(opAbs, uintptr(syscall.ENOMEM)); !errors.Is(err, gpumem.ErrOutOfMemory) {
		t.Errorf("ENOMEM status = %v, want ErrOutOfMemory", err)
	}
}

func TestRefusals(t *testing.T) {
	l := open(t)
	if _, err := l.Call(opStrlen); !errors.Is(err, gpumem.ErrInvalidValue) || !strings.Contains(err.Error(), "strlen takes 1 arguments, called with 0") {
		t.Errorf("wrong argument count: %v", err)
	}
	if _, err := l.Call(opStrlen, make([]uintptr, bind.MaxArgs+1)...); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("too many arguments: %v", err)
	}
	_, err := l.Call(opMissingOptional, 1, 2)
	if !errors.Is(err, gpumem.ErrNotSupported) || !strings.Contains(err.Error(), "gpumem_no_such_function") {
		t.Errorf("missing optional: %v", err)
	}
	if l.Has(opMissingOptional) || !l.Has(opStrlen) || l.Has(99) || l.Has(-1) {
		t.Error("Has is wrong")
	}
	if _, err := l.Call(opHIPOnly, 0); !errors.Is(err, gpumem.ErrNotSupported) || !strings.Contains(err.Error(), "cuda has no HIPOnly function") {
		t.Errorf("absent for the vendor: %v", err)
	}
	for _, op := range []bind.Op{-1, 42} {
		if _, err := l.Call(op); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("row %d: %v", op, err)
		}
		if _, err := l.Addr(op); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("Addr(%d): %v", op, err)
		}
	}
	if err := l.CheckOn(bind.Context{}, opAbs, 0); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("zero context: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := l.Call(opStrlen, 0); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	if err := l.Check(opAbs, 0); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("Check after Close: %v", err)
	}
	var nl *bind.Lib
	if _, err := nl.Call(opStrlen, 0); err == nil {
		t.Error("call on a nil Lib succeeded")
	}
}

func TestOpenErrors(t *testing.T) {
	open(t)
	lib := libc()
	lib.Table = bind.NewTable("libc", append(libcTable().Rows,
		bind.Func{Op: "Needed", Symbol: bind.Symbols("gpumem_needed_a", "x"), Args: bind.Args(1), Required: bind.Both},
		bind.Func{Op: "Needed2", Symbol: bind.Symbols("gpumem_needed_b", "x"), Args: bind.Args(1), Required: bind.CUDAOnly})...)
	_, err := bind.Open(lib, bind.CUDA)
	var ms *gpumem.MissingSymbolsError
	if !errors.As(err, &ms) || len(ms.Symbols) != 2 || ms.Symbols[0] != "gpumem_needed_a" || ms.Symbols[1] != "gpumem_needed_b" || ms.Backend != "libc" {
		t.Errorf("missing required: %v", err)
	}
	rep, err := bind.Resolve(lib, bind.CUDA)
	if err != nil || rep.MissingRequired != 2 || rep.Library != "libc.so.6" || rep.Version != "libc" || rep.Backend != "libc" {
		t.Errorf("Resolve = %+v, %v", rep, err)
	}
	for _, r := range rep.Rows {
		if r.Symbol == "" || (r.Name == "Strlen") != (r.Resolved && r.Symbol == "strlen") && r.Name == "Strlen" {
			t.Errorf("row %+v", r)
		}
	}

	_, err = bind.Open(libc(), bind.CUDA, bind.WithPath("libgpumem-none.so.9"))
	var le *gpumem.LoadError
	if !errors.As(err, &le) || !errors.Is(err, gpumem.ErrLibraryNotFound) || !strings.Contains(err.Error(), "libgpumem-none.so.9") || !strings.Contains(err.Error(), "libc") {
		t.Errorf("bad path: %v", err)
	}
	t.Setenv("GPUMEM_TEST_LIBC", "libgpumem-env.so.3")
	if _, err := bind.Open(libc(), bind.HIP); !errors.Is(err, gpumem.ErrLibraryNotFound) || !strings.Contains(err.Error(), "libgpumem-env.so.3") {
		t.Errorf("environment variable not honoured: %v", err)
	}
	if got := libc().Candidates(bind.HIP); len(got) != 1 || got[0] != "libgpumem-env.so.3" {
		t.Errorf("Candidates = %v", got)
	}

	if _, err := bind.Open(nil, bind.CUDA); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("nil library: %v", err)
	}
	if _, err := bind.Open(libc(), bind.Vendor(7)); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("bad vendor: %v", err)
	}
	bad := libc()
	bad.Table = &bind.Table{Name: "x", Rows: []bind.Func{{ID: 3, Op: "X"}}}
	if _, err := bind.Open(bad, bind.CUDA); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("misnumbered table: %v", err)
	}
	for _, a := range []bind.Arity{bind.Args(bind.MaxArgs + 1), bind.ArgsPer(1, bind.MaxArgs+1), {bind.NoArgs - 1, 1}} {
		bad.Table = bind.NewTable("x", bind.Func{Op: "X", Args: a})
		if _, err := bind.Open(bad, bind.CUDA); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("row of argument words %v: %v", a, err)
		}
	}
	bad.Table = nil
	if _, err := bind.Open(bad, bind.CUDA); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("no table: %v, want ErrInvalidValue", err)
	}
	// A row required for a vendor must name that vendor's symbol.
	bad.Table = bind.NewTable("x", bind.Func{Op: "Y", Symbol: bind.Symbols("strlen", ""), Args: bind.Args(1), Required: bind.Both})
	if _, err := bind.Open(bad, bind.HIP); !errors.Is(err, gpumem.ErrInvalidValue) || !strings.Contains(err.Error(), "Y is required for hip but names no hip symbol") {
		t.Errorf("required row without the vendor's symbol: %v", err)
	}
	// WithPath stands for the candidates when the library declares none.
	bare := libc()
	bare.Files, bare.Env = [bind.NumVendors][]string{}, ""
	if _, err := bind.Open(bare, bind.CUDA); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("no file names and no path: %v, want ErrNotSupported", err)
	}
	l, err := bind.Open(bare, bind.CUDA, bind.WithPath("libc.so.6"))
	if err != nil {
		t.Fatalf("WithPath with no declared file names: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Error(err)
	}
	var none *bind.Lib
	if none.Has(opStrlen) {
		t.Error("a nil library has a function")
	}
	if err := none.Close(); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("Close of a nil library: %v, want ErrInvalidValue", err)
	}
}

// fakeBackend answers ContextOf with labs as its make-current function:
// labs(0) is 0 (current), labs(x) not.
type fakeBackend struct {
	gpumem.Backend
	abs    uintptr
	arg    uintptr
	closed atomic.Bool
}

func (f *fakeBackend) Name() string { return "fake" }

func (f *fakeBackend) CurrentFunc(dev int) (uintptr, uintptr, *atomic.Bool, error) {
	if dev != 0 {
		return 0, 0, nil, gpumem.ErrInvalidValue
	}
	return f.abs, f.arg, &f.closed, nil
}

func TestCallOn(t *testing.T) {
	l := open(t)
	abs, _ := l.Addr(opAbs)
	fb := &fakeBackend{abs: abs}
	c, err := bind.ContextOf(fb, 0)
	if err != nil || c.Device() != 0 || c.Backend() != "fake" {
		t.Fatalf("ContextOf = %+v, %v", c, err)
	}
	s := []byte("four\x00")
	if r, err := l.CallOn(c, opStrlen, uintptr(unsafe.Pointer(&s[0]))); r != 4 || err != nil {
		t.Errorf("CallOn = %d, %v", r, err)
	}
	if err := l.CheckOn(c, opAbs, ^uintptr(int(syscall.EIO)-1)); !strings.Contains(strings.ToLower(err.Error()), syscall.EIO.Error()) {
		t.Errorf("CheckOn status: %v", err)
	}
	fb.arg = 5
	c, _ = bind.ContextOf(fb, 0)
	if _, err := l.CallOn(c, opStrlen, uintptr(unsafe.Pointer(&s[0]))); err == nil || !strings.Contains(err.Error(), "making device 0 current failed with status 5") {
		t.Errorf("failing make-current: %v", err)
	}
	runtime.KeepAlive(s)
	fb.closed.Store(true)
	if err := l.CheckOn(c, opAbs, 0); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("closed backend: %v", err)
	}
	if _, err := bind.ContextOf(fb, 1); err == nil {
		t.Error("device 1 of a one-device backend accepted")
	}
	if _, err := bind.ContextOf(nil, 0); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("nil backend: %v", err)
	}
	g, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := bind.ContextOf(g, 0); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("simulator: %v", err)
	}
}

func TestCallAllocs(t *testing.T) {
	l := open(t)
	s := []byte("abc\x00")
	p := uintptr(unsafe.Pointer(&s[0]))
	if a := testing.AllocsPerRun(200, func() {
		if r, err := l.Call(opStrlen, p); r != 3 || err != nil {
			t.Fatal(r, err)
		}
		if err := l.Check(opAbs, 0); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("%v allocations per call pair", a)
	}
	runtime.KeepAlive(s)
}

func TestConcurrentCalls(t *testing.T) {
	l := open(t)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			b := make([]byte, g+2)
			for i := range b[:g+1] {
				b[i] = 'x'
			}
			for i := 0; i < 500; i++ {
				if r, err := l.Call(opStrlen, uintptr(unsafe.Pointer(&b[0]))); r != uintptr(g+1) || err != nil {
					t.Errorf("goroutine %d: %d, %v", g, r, err)
					return
				}
				if err := l.Check(opAbs, uintptr(i%3)); (err == nil) != (i%3 == 0) {
					t.Errorf("goroutine %d: status %d gave %v", g, i%3, err)
					return
				}
			}
			runtime.KeepAlive(b)
		}(g)
	}
	wg.Wait()
}

func TestRegistry(t *testing.T) {
	bind.Register(bind.Binding{Name: "libc-test", Libraries: [bind.NumVendors][]*bind.Library{{libc()}, {libc()}}})
	b, ok := bind.Lookup("libc-test")
	if !ok {
		t.Fatal("registered binding not found")
	}
	found := false
	for _, n := range bind.Bindings() {
		found = found || n == "libc-test"
	}
	if !found {
		t.Error("Bindings does not list it")
	}
	rep, err := b.Resolve(bind.CUDA)
	if err != nil {
		t.Skipf("no libc: %v", err)
	}
	if rep.MissingRequired != 0 || len(rep.Rows) != 5 {
		t.Errorf("report %+v", rep)
	}
	if _, err := (bind.Binding{Name: "none"}).Resolve(bind.HIP); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("empty binding: %v", err)
	}
}

// Args is per vendor: each vendor's calls are checked against its own
// count; Args(0) declares a function of no arguments, the zero Arity
// nothing.
func TestArity(t *testing.T) {
	const (
		opGetpid bind.Op = iota
		opPerVendor
		opUnchecked
	)
	lib := libc()
	lib.Env = ""
	lib.Files = [bind.NumVendors][]string{{"libc.so.6"}, {"libc.so.6"}}
	lib.Table = bind.NewTable("arity",
		bind.Func{Op: "Getpid", Symbol: bind.Symbols("getpid", "getpid"), Args: bind.Args(0)},
		bind.Func{Op: "Strlen", Symbol: bind.Symbols("strlen", "strlen"), Args: bind.ArgsPer(1, 2), Notes: "HIP's declares a second word strlen ignores"},
		bind.Func{Op: "Labs", Symbol: bind.Symbols("labs", "labs")},
	)
	s := []byte("arity\x00")
	p := uintptr(unsafe.Pointer(&s[0]))
	for _, tc := range []struct {
		v          bind.Vendor
		ok, refuse []uintptr
	}{
		{bind.CUDA, []uintptr{p}, []uintptr{p, 0}},
		{bind.HIP, []uintptr{p, 0}, []uintptr{p}},
	} {
		l, err := bind.Open(lib, tc.v)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := l.Call(opPerVendor, tc.ok...); err != nil || n != 5 {
			t.Errorf("%s: strlen with %d words = %d, %v", tc.v, len(tc.ok), n, err)
		}
		if _, err := l.Call(opPerVendor, tc.refuse...); !errors.Is(err, gpumem.ErrInvalidValue) || !strings.Contains(err.Error(), "strlen takes") {
			t.Errorf("%s: strlen with %d words: %v", tc.v, len(tc.refuse), err)
		}
		if pid, err := l.Call(opGetpid); err != nil || int(int32(pid)) != syscall.Getpid() {
			t.Errorf("%s: getpid() = %d, %v", tc.v, pid, err)
		}
		if _, err := l.Call(opGetpid, 0); !errors.Is(err, gpumem.ErrInvalidValue) || !strings.Contains(err.Error(), "getpid takes 0 arguments, called with 1") {
			t.Errorf("%s: getpid(0): %v", tc.v, err)
		}
		for _, args := range [][]uintptr{{1}, {1, 2, 3}} {
			if _, err := l.Call(opUnchecked, args...); err != nil {
				t.Errorf("%s: undeclared row refused %d words: %v", tc.v, len(args), err)
			}
		}
		l.Close()
	}
	runtime.KeepAlive(s)
	if got := bind.ArgsPer(3, 0); got != (bind.Arity{3, bind.NoArgs}) || got.String() != "cuda 3, hip none" || bind.Args(2).String() != "2" {
		t.Errorf("ArgsPer(3, 0) = %v (%s)", [2]int(got), got)
	}
	if n, ok := (bind.Arity{}).Words(bind.CUDA); ok || n != 0 {
		t.Errorf("the zero Arity declares %d, %v", n, ok)
	}
}

// A nil Lib or Library is bad input like any other: errors and zero
// values, never a panic.
func TestNilLib(t *testing.T) {
	var l *bind.Lib
	if _, err := l.Addr(opStrlen); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("Addr of a nil library: %v", err)
	}
	if _, err := l.Version(); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("Version of a nil library: %v", err)
	}
	if err := l.Err(opAbs, 5); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("Err of a nil library: %v", err)
	}
	if err := l.Check(opAbs, 0); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("Check on a nil library: %v", err)
	}
	if err := l.CheckOn(bind.Context{}, opAbs, 0); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("CheckOn on a nil library: %v", err)
	}
	if l.StatusName(5) != "" || l.Path() != "" || l.Library() != nil || l.Vendor() != bind.CUDA {
		t.Error("a nil library names something")
	}
	var lib *bind.Library
	if c := lib.Candidates(bind.CUDA); c != nil {
		t.Errorf("Candidates of a nil declaration = %v", c)
	}
}
