package driver

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/ebitengine/purego"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/native"
)

// handleFns are fake pool, graph and module functions whose handles come
// from fakeHandles, so that a call with one the fake destroyed is counted.
var handleFns = sync.OnceValue(func() map[string]uintptr {
	cb := purego.NewCallback
	use1 := cb(func(h, a2, a3, a4 uintptr) uintptr { fakeHandles.use(h); return 0 })
	destroy := cb(func(h uintptr) uintptr { fakeHandles.destroy(h); return 0 })
	return map[string]uintptr{
		"cuMemPoolCreate":       cb(func(p, props uintptr) uintptr { put(p, fakeHandles.make()); return 0 }),
		"cuMemPoolDestroy":      destroy,
		"cuMemPoolSetAttribute": use1,
		"cuMemPoolGetAttribute": use1,
		"cuMemPoolTrimTo":       use1,
		"cuMemPoolSetAccess":    use1,
		"cuMemPoolGetAccess":    cb(func(flags, pool, loc uintptr) uintptr { fakeHandles.use(pool); return 0 }),
		"cuMemAllocFromPoolAsync": cb(func(p, size, pool, s uintptr) uintptr {
			fakeHandles.use(pool)
			put[uintptr](p, 0x20000)
			return 0
		}),
		"cuStreamEndCapture": cb(func(s, g uintptr) uintptr {
			fakeCapturing.Delete(s)
			put(g, fakeHandles.make())
			return 0
		}),
		"cuGraphInstantiateWithFlags": cb(func(e, g, flags uintptr) uintptr {
			fakeHandles.use(g)
			put(e, fakeHandles.make())
			return 0
		}),
		"cuGraphLaunch":           use1,
		"cuGraphExecDestroy":      destroy,
		"cuGraphDestroy":          destroy,
		"cuGraphRetainUserObject": use1,
		"cuLibraryLoadData": cb(func(lib, code, jo, jov, njo, lo, lov, nlo uintptr) uintptr {
			put(lib, fakeHandles.make())
			return 0
		}),
		"cuLibraryUnload": destroy,
		"cuLibraryGetKernel": cb(func(k, lib, name uintptr) uintptr {
			fakeHandles.use(lib)
			put[uintptr](k, 0x4e4)
			return 0
		}),
		"cuLibraryGetGlobal": cb(func(p, n, lib, name uintptr) uintptr {
			fakeHandles.use(lib)
			put[uintptr](p, 0x7000)
			put[uintptr](n, 8)
			return 0
		}),
	}
})

// handleLoader is kernelLoader with handleFns in place of the fake's own.
func handleLoader() native.Loader {
	base := kernelLoader()
	return func(c ...string) (native.Library, error) {
		l, err := base(c...)
		if err != nil {
			return nil, err
		}
		for k, v := range handleFns() {
			l.(*fakeLib).syms[k] = v
		}
		return l, nil
	}
}

// TestDestroyedPoolsGraphsModulesRefused: a pool, a graph, an instantiated
// graph or a module the backend destroyed is refused with ErrInvalidValue
// before it reaches the library (a second destroy, an allocation from the
// pool, a launch of the graph), as streams and events are; live handles
// are not affected.
func TestDestroyedPoolsGraphsModulesRefused(t *testing.T) {
	be, err := open(handleLoader(), "")
	if err != nil {
		t.Fatal(err)
	}
	b := be.(*native.Backend)
	defer b.Close()
	pool, err := b.MemPoolCreate(gpumem.PoolProps{Device: 1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.StreamCreate(1, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.StreamBeginCapture(s, gpumem.CaptureModeRelaxed); err != nil {
		t.Fatal(err)
	}
	g, err := b.StreamEndCapture(s)
	if err != nil {
		t.Fatal(err)
	}
	exec, err := b.GraphInstantiate(g)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.ModuleLoadData(1, []byte("ptx"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.MemPoolDestroy(pool); err != nil {
		t.Fatal(err)
	}
	if err := b.GraphExecDestroy(exec); err != nil {
		t.Fatal(err)
	}
	if err := b.GraphDestroy(g); err != nil {
		t.Fatal(err)
	}
	if err := b.ModuleUnload(m); err != nil {
		t.Fatal(err)
	}
	before := fakeHandles.uses()
	for name, call := range map[string]func() error{
		"MemPoolDestroy again": func() error { return b.MemPoolDestroy(pool) },
		"MemPoolSetAttribute":  func() error { return b.MemPoolSetAttribute(pool, gpumem.PoolReleaseThreshold, 1) },
		"MemPoolGetAttribute": func() error {
			_, err := b.MemPoolGetAttribute(pool, gpumem.PoolUsedMemCurrent)
			return err
		},
		"MemPoolTrimTo":       func() error { return b.MemPoolTrimTo(pool, 0) },
		"MemPoolSetAccess":    func() error { return b.MemPoolSetAccess(pool, 0, gpumem.AccessReadWrite) },
		"MemPoolGetAccess":    func() error { _, err := b.MemPoolGetAccess(pool, 0); return err },
		"MallocFromPoolAsync": func() error { _, err := b.MallocFromPoolAsync(64, pool, s); return err },
		"MallocFromPoolAsyncUncaptured": func() error {
			_, _, err := b.MallocFromPoolAsyncUncaptured(64, pool, s)
			return err
		},
		"GraphDestroy again":     func() error { return b.GraphDestroy(g) },
		"GraphInstantiate":       func() error { _, err := b.GraphInstantiate(g); return err },
		"GraphRetainUserObject":  func() error { return b.GraphRetainUserObject(g, gpumem.UserObject{Handle: 1, Device: 1}, 1, false) },
		"GraphExecDestroy again": func() error { return b.GraphExecDestroy(exec) },
		"GraphLaunch":            func() error { return b.GraphLaunch(exec, s) },
		"ModuleUnload again":     func() error { return b.ModuleUnload(m) },
		"ModuleFunction":         func() error { _, err := b.ModuleFunction(m, "saxpy"); return err },
		"ModuleGlobal":           func() error { _, _, err := b.ModuleGlobal(m, "table"); return err },
	} {
		if err := call(); !errors.Is(err, gpumem.ErrInvalidValue) || !strings.Contains(err.Error(), "destroyed") {
			t.Errorf("%s with a destroyed handle: %v, want ErrInvalidValue naming the destruction", name, err)
		}
	}
	if n := fakeHandles.uses() - before; n != 0 {
		t.Errorf("the library was called %d times with a destroyed handle", n)
	}
	// Live handles of the same kinds are not affected.
	live, err := b.MemPoolCreate(gpumem.PoolProps{Device: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.MallocFromPoolAsync(64, live, s); err != nil {
		t.Errorf("allocating from a live pool after another's destruction: %v", err)
	}
	if err := b.MemPoolDestroy(live); err != nil {
		t.Fatal(err)
	}
	m2, err := b.ModuleLoadData(1, []byte("ptx"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.ModuleGlobal(m2, "table"); err != nil {
		t.Errorf("a live module after another's unload: %v", err)
	}
	if err := b.ModuleUnload(m2); err != nil {
		t.Fatal(err)
	}
}

// TestCaptureGraphAtADestroyedAddressIsLive: the library gives a destroyed
// graph's handle again to a later capture's graph; the backend learns it
// from the capture's information (not only from StreamEndCapture), so the
// live graph is not refused (a host function's user object retained by the
// capturing graph, as LaunchHostFunc does).
func TestCaptureGraphAtADestroyedAddressIsLive(t *testing.T) {
	be, err := open(handleLoader(), "")
	if err != nil {
		t.Fatal(err)
	}
	b := be.(*native.Backend)
	defer b.Close()
	s, err := b.StreamCreate(1, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	old := gpumem.Graph{Handle: 0x6000, Device: 1} // where the fake's captures report their graph
	if err := b.GraphDestroy(old); err != nil {
		t.Fatal(err)
	}
	if err := b.GraphRetainUserObject(old, gpumem.UserObject{Handle: 1, Device: 1}, 1, false); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Fatalf("the destroyed graph: %v, want it refused", err)
	}
	fakeCapturing.Store(s.Handle, int32(1))
	info, err := b.StreamCaptureInfo(s)
	fakeCapturing.Delete(s.Handle)
	if err != nil || info.Status != gpumem.CaptureActive || info.Graph != old {
		t.Fatalf("capture info: %+v, %v; want an active capture on graph %#x", info, err, old.Handle)
	}
	if err := b.GraphRetainUserObject(info.Graph, gpumem.UserObject{Handle: 1, Device: 1}, 1, false); err != nil {
		t.Errorf("the capturing graph, at a destroyed graph's address: %v, want it live", err)
	}
}

// TestHoldShortCalls: a hold counts once however often its release is
// called, and holds nest. (This test binary holds short calls for its whole
// life, fake_test.go says why, so it counts holds rather than asking
// whether short calls are on.)
func TestHoldShortCalls(t *testing.T) {
	base := ccall.ShortHolds()
	r1 := HoldShortCalls()
	r2 := HoldShortCalls()
	if got := ccall.ShortHolds(); got != base+2 {
		t.Fatalf("two holds: %d, want %d", got, base+2)
	}
	if ShortCalls() {
		t.Error("ShortCalls with holds taken")
	}
	r1()
	r1()
	if got := ccall.ShortHolds(); got != base+1 {
		t.Fatalf("a release called twice: %d holds, want %d", got, base+1)
	}
	r2()
	if got := ccall.ShortHolds(); got != base {
		t.Fatalf("both released: %d holds, want %d", got, base)
	}
}

// TestBackendShortCalls: the CUDA backend has short rows, and reports them
// off while a hold is taken (this binary holds short calls for its life).
func TestBackendShortCalls(t *testing.T) {
	b := openFake(t)
	defer b.Close()
	on, has := b.ShortCalls()
	if !has || on {
		t.Errorf("ShortCalls = (on %v, has %v), want (false, true) with short calls held", on, has)
	}
}
