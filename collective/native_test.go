package collective

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/bind"
	"github.com/gpumem/gpumem/sim"
)

// The native engine is tested on a machine with no GPU against
// testdata/fakenccl.c, a stand-in for libnccl.so.2 with nccl.h's
// signatures that records every call's arguments, the device made current
// before it and its OS thread. The backend is the simulator under the
// name "cuda", with a make-current function in the fake library.

// fakeCall mirrors struct call in testdata/fakenccl.c.
type fakeCall struct {
	fn, dev, tid int64
	a            [8]uint64
}

// Function ids of testdata/fakenccl.c.
const (
	fAllReduce = iota + 1
	fBroadcast
	fReduce
	fAllGather
	fReduceScatter
	fSend
	fRecv
	fGroupStart
	fGroupEnd
	fInitAll
	fInitRank
	fDestroy
	fAbort
	fFinalize
	fRegister
	fDeregister
	fUniqueID
)

var fake struct {
	once sync.Once
	dir  string
	lib  *bind.Lib // fake_set_current, fake_calls, fake_set_async, fake_state
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fake.dir != "" {
		os.RemoveAll(fake.dir)
	}
	os.Exit(code)
}

// openFake builds the fake once per process and makes it the NCCL the
// package opens (the package keeps the library it opened for the process).
func openFake(t *testing.T) *bind.Lib {
	t.Helper()
	fake.once.Do(func() {
		gcc, err := exec.LookPath("gcc")
		if err != nil {
			fake.err = err
			return
		}
		if fake.dir, err = os.MkdirTemp("", "gpumem-fakenccl"); err != nil {
			fake.err = err
			return
		}
		path := filepath.Join(fake.dir, "libnccl-fake.so")
		if out, err := exec.Command(gcc, "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", path, "testdata/fakenccl.c").CombinedOutput(); err != nil {
			fake.err = errors.New(string(out))
			return
		}
		os.Setenv("GPUMEM_NCCL_LIBRARY", path)
		fake.lib, fake.err = bind.Open(&bind.Library{
			Name:  "fakenccl",
			Files: [bind.NumVendors][]string{bind.CUDA: {path}},
			Table: bind.NewTable("fake",
				bind.Func{Op: "SetCurrent", Symbol: bind.Symbols("fake_set_current", ""), Args: bind.Args(1), Required: bind.CUDAOnly},
				bind.Func{Op: "Calls", Symbol: bind.Symbols("fake_calls", ""), Args: bind.Args(2), Required: bind.CUDAOnly},
				bind.Func{Op: "SetAsync", Symbol: bind.Symbols("fake_set_async", ""), Args: bind.Args(1), Required: bind.CUDAOnly},
				bind.Func{Op: "State", Symbol: bind.Symbols("fake_state", ""), Args: bind.Args(1), Required: bind.CUDAOnly}),
		}, bind.CUDA)
	})
	if fake.err != nil {
		t.Skipf("cannot build testdata/fakenccl.c here: %v", fake.err)
	}
	return fake.lib
}

func fakeCalls(t *testing.T, l *bind.Lib) []fakeCall {
	t.Helper()
	out := make([]fakeCall, 256)
	n, err := l.Call(1, uintptr(unsafe.Pointer(&out[0])), 256)
	runtime.KeepAlive(out)
	if err != nil {
		t.Fatal(err)
	}
	return out[:int(int32(n))]
}

// fakeCUDA is the simulator presented as a CUDA backend whose devices are
// made current by the fake library's fake_set_current.
type fakeCUDA struct {
	*sim.GPU
	fn     uintptr
	closed atomic.Bool
}

func (f *fakeCUDA) Name() string { return "cuda" }

func (f *fakeCUDA) CurrentFunc(dev int) (fn, arg uintptr, closed *atomic.Bool, err error) {
	n, _ := f.DeviceCount()
	if dev < 0 || dev >= n {
		return 0, 0, nil, gpumem.ErrInvalidValue
	}
	return f.fn, uintptr(dev), &f.closed, nil
}

func TestNativeEngine(t *testing.T) {
	l := openFake(t)
	g, err := sim.New(sim.Config{Devices: make([]sim.DeviceConfig, 2)})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	setCurrent, _ := l.Addr(0)
	b := &fakeCUDA{GPU: g, fn: setCurrent}
	fakeCalls(t, l)

	if v, err := Version(b); v != "2.28.3" || err != nil {
		t.Fatalf("Version = %q, %v", v, err)
	}
	id, err := NewUniqueID(b)
	if err != nil || id[0] != 0x5a || id[127] != 127^0x5a {
		t.Fatalf("NewUniqueID = %x..., %v", id[:4], err)
	}
	c1, err := InitRank(b, 1, 2, id, 1)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := InitAll(b, []int{1, 0})
	if err != nil {
		t.Fatal(err)
	}
	calls := fakeCalls(t, l)
	if len(calls) != 3 || calls[0].fn != fUniqueID || calls[0].dev != 0 ||
		calls[1].fn != fInitRank || calls[1].dev != 1 || [4]uint64(calls[1].a[:4]) != [4]uint64{2, 1, 0x5a, 127 ^ 0x5a} ||
		calls[2].fn != fInitAll || calls[2].dev != 1 || [3]uint64(calls[2].a[:3]) != [3]uint64{2, 1, 0} {
		t.Fatalf("init calls %+v", calls)
	}
	if c1.Rank() != 1 || c1.Count() != 2 || cs[0].Device() != 1 || cs[1].Rank() != 1 {
		t.Errorf("comms %v %v %v", c1, cs[0], cs[1])
	}

	// Every collective passes its arguments in nccl.h's order, on its
	// communicator's device.
	c := cs[1] // rank 1 on device 0
	h := uint64(c.e.(*nativeComm).h)
	s := gpumem.Stream{Handle: 0x77, Device: 0}
	const send, recv = gpumem.Ptr(0x10000), gpumem.Ptr(0x20000)
	steps := []struct {
		do   func() error
		fn   int64
		args []uint64
	}{
		{func() error { return c.AllReduce(send, recv, 10, Float32, Max, s) }, fAllReduce, []uint64{0x10000, 0x20000, 10, 7, 2, h, 0x77}},
		{func() error { return c.Broadcast(send, recv, 11, Int64, 1, s) }, fBroadcast, []uint64{0x10000, 0x20000, 11, 4, 1, h, 0x77}},
		{func() error { return c.Reduce(send, recv, 12, Bfloat16, Min, 1, s) }, fReduce, []uint64{0x10000, 0x20000, 12, 9, 3, 1, h, 0x77}},
		{func() error { return c.AllGather(send, recv, 13, Uint8, s) }, fAllGather, []uint64{0x10000, 0x20000, 13, 1, h, 0x77}},
		{func() error { return c.ReduceScatter(send, recv, 14, Float16, Prod, s) }, fReduceScatter, []uint64{0x10000, 0x20000, 14, 6, 1, h, 0x77}},
		{func() error { return c.Send(send, 15, Int32, 0, s) }, fSend, []uint64{0x10000, 15, 2, 0, h, 0x77}},
		{func() error { return c.Recv(recv, 16, Float64, 0, s) }, fRecv, []uint64{0x20000, 16, 8, 0, h, 0x77}},
	}
	for i, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		calls := fakeCalls(t, l)
		if len(calls) != 1 || calls[0].fn != st.fn || calls[0].dev != 0 {
			t.Fatalf("step %d: calls %+v", i, calls)
		}
		for j, w := range st.args {
			if got := calls[0].a[j]; got != w && !(j > 0 && uint64(uint32(got)) == w && w < 1<<31) {
				t.Errorf("step %d: argument %d = %#x, want %#x", i, j, got, w)
			}
		}
	}

	// A failing status, with the library's name and last error.
	err = c.AllReduce(send, recv, 12345, Float32, Sum, s)
	var be *bind.Error
	if !errors.As(err, &be) || be.Code != 4 || !errors.Is(err, gpumem.ErrInvalidValue) ||
		!strings.Contains(err.Error(), "invalid argument (fake)") || !strings.Contains(err.Error(), "the fake's last error") {
		t.Errorf("failing status: %v", err)
	}
	// Bad input never reaches the library.
	_ = c.AllReduce(send, recv, -1, Float32, Sum, s)
	_ = c.Send(send, 1, Float32, 2, s)
	_ = c.AllReduce(send, recv, 1, Float32, Sum, gpumem.Stream{Device: 1})
	if calls := fakeCalls(t, l); len(calls) != 1 { // the failing AllReduce only
		t.Errorf("bad input reached the library: %+v", calls)
	}

	// A group: start, calls and end on one OS thread.
	err = Group(b, func() error {
		if err := cs[0].Send(send, 1, Int8, 1, gpumem.Stream{Device: 1}); err != nil {
			return err
		}
		return cs[1].Recv(recv, 1, Int8, 0, s)
	})
	if err != nil {
		t.Fatal(err)
	}
	calls = fakeCalls(t, l)
	if len(calls) != 4 || calls[0].fn != fGroupStart || calls[1].fn != fSend || calls[1].dev != 1 || calls[2].fn != fRecv || calls[3].fn != fGroupEnd ||
		calls[0].tid != calls[1].tid || calls[0].tid != calls[2].tid || calls[0].tid != calls[3].tid {
		t.Errorf("group calls %+v", calls)
	}

	// Asynchronous errors.
	if err := c.AsyncError(); err != nil {
		t.Errorf("AsyncError: %v", err)
	}
	if _, err := l.Call(2, resRemoteError); err != nil {
		t.Fatal(err)
	}
	if err := c.AsyncError(); !errors.As(err, &be) || be.Code != resRemoteError || !strings.Contains(err.Error(), "ncclRemoteError") {
		t.Errorf("AsyncError with a remote error: %v", err)
	}
	_, _ = l.Call(2, 0)

	// Registration, finalize, close, abort.
	reg, err := c.Register(send, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Finalize(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Register(send, 64); err != nil { // deregistered by Close
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cs[0].Abort(); err != nil {
		t.Fatal(err)
	}
	calls = fakeCalls(t, l)
	want := []struct {
		fn int64
		a0 uint64
		a1 uint64
	}{{fRegister, h, 0x10000}, {fDeregister, h, 0xabcdef}, {fFinalize, h, 0}, {fRegister, h, 0x10000}, {fDeregister, h, 0xabcdef}, {fDestroy, h, 0}, {fAbort, uint64(cs[0].e.(*nativeComm).h), 0}}
	if len(calls) != len(want) {
		t.Fatalf("calls %+v", calls)
	}
	for i, w := range want {
		if calls[i].fn != w.fn || calls[i].a[0] != w.a0 || (w.a1 != 0 && calls[i].a[1] != w.a1) {
			t.Errorf("call %d: %+v, want %+v", i, calls[i], w)
		}
	}

	// A closed backend: no call is made.
	b.closed.Store(true)
	if err := c1.AllReduce(send, recv, 1, Float32, Sum, gpumem.Stream{Device: 1}); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("closed backend: %v", err)
	}
	b.closed.Store(false)
	if err := c1.Close(); err != nil {
		t.Error(err)
	}
	fakeCalls(t, l)
}

// TestNativeAbortReleases: a call stuck in the library (a peer that never
// comes) is released by Abort from another goroutine, AsyncError answers
// meanwhile, and calls after Abort fail with ErrClosed.
func TestNativeAbortReleases(t *testing.T) {
	l := openFake(t)
	g, err := sim.New(sim.Config{Devices: make([]sim.DeviceConfig, 2)})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	setCurrent, _ := l.Addr(0)
	b := &fakeCUDA{GPU: g, fn: setCurrent}
	cs, err := InitAll(b, []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cs[1].Close()
	fakeCalls(t, l)
	done := make(chan error)
	go func() { done <- cs[0].AllReduce(0x1000, 0x1000, 777, Float32, Sum, gpumem.Stream{}) }()
	// Wait until the call is in the library.
	for len(fakeCalls(t, l)) == 0 {
		runtime.Gosched()
	}
	if err := cs[0].AsyncError(); err != nil {
		t.Errorf("AsyncError beside a stuck call: %v", err)
	}
	if err := cs[0].Abort(); err != nil {
		t.Fatal(err)
	}
	var be *bind.Error
	if err := <-done; !errors.As(err, &be) || be.Code != resRemoteError {
		t.Errorf("the released call: %v", err)
	}
	if err := cs[0].AllReduce(0x1000, 0x1000, 1, Float32, Sum, gpumem.Stream{}); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("after Abort: %v", err)
	}
	if err := cs[0].Close(); err != nil {
		t.Errorf("Close after Abort: %v", err)
	}
	fakeCalls(t, l)
}
