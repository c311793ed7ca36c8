package tests

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/symtab"
)

// ctxOut receives cuCtxGetCurrent's answer: heap memory, which does not
// move while C writes into it (a Go stack may).
var ctxOut uintptr

// TestGPUStreamOrderedWithoutContext: on a thread with no context current,
// the pool's allocation and the stream-ordered free on an explicit stream
// work, and leave no context current (they were called directly, with no
// make-current before them): outside a capture, where the memory is usable
// in stream order, and inside one, where they become the graph's allocation
// and free nodes and the graph launches. The rows marked
// symtab.Row.StreamContext for CUDA rely on this.
func TestGPUStreamOrderedWithoutContext(t *testing.T) {
	vb, s, pool := openCUDAPool(t)
	be := gpumem.Backend(vb)
	setCurrent, _, _, err := vb.CurrentFunc(0)
	if err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// current is the context current on this thread.
	current := func(t *testing.T) uintptr {
		ctxOut = 1
		r, err := vb.Raw(symtab.GetCurrent, uintptr(unsafe.Pointer(&ctxOut)))
		if err != nil || r != 0 {
			t.Fatalf("cuCtxGetCurrent: %d, %v", r, err)
		}
		return ctxOut
	}
	noContext := func(t *testing.T) {
		if r := ccall.Call1(setCurrent, 0); r != 0 {
			t.Fatalf("cuCtxSetCurrent(NULL): %d", r)
		}
	}
	// pair allocates n bytes and frees them on s, each with no context
	// current, and checks that none was made current; between the two it
	// calls use.
	pair := func(t *testing.T, n uint64, use func(p gpumem.Ptr)) {
		t.Helper()
		noContext(t)
		p, err := be.MallocFromPoolAsync(n, pool, s)
		if err != nil {
			t.Fatalf("MallocFromPoolAsync with no context current: %v", err)
		}
		if c := current(t); c != 0 {
			t.Errorf("the allocation made context %#x current", c)
		}
		use(p)
		noContext(t)
		if err := be.FreeAsync(p, s); err != nil {
			t.Fatalf("FreeAsync with no context current: %v", err)
		}
		if c := current(t); c != 0 {
			t.Errorf("the free made context %#x current", c)
		}
	}
	const n = 1 << 20
	t.Run("plain", func(t *testing.T) {
		pair(t, n, func(p gpumem.Ptr) { fillAndCheck(t, be, s, p, n, 0x5a, "the allocation") })
		if err := be.StreamSynchronize(s); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("captured", func(t *testing.T) {
		if err := be.StreamBeginCapture(s, gpumem.CaptureModeRelaxed); err != nil {
			t.Fatal(err)
		}
		pair(t, n, func(p gpumem.Ptr) {
			if err := be.MemsetAsync(p, 0x5a, n, s); err != nil {
				t.Fatal(err)
			}
		})
		g, err := be.StreamEndCapture(s)
		if err != nil {
			t.Fatalf("ending the capture: %v", err)
		}
		defer be.GraphDestroy(g)
		ge, err := be.GraphInstantiate(g)
		if err != nil {
			t.Fatalf("instantiating the graph: %v", err)
		}
		defer be.GraphExecDestroy(ge)
		for i := 0; i < 2; i++ {
			if err := be.GraphLaunch(ge, s); err != nil {
				t.Fatalf("launch %d: %v", i, err)
			}
		}
		if err := be.StreamSynchronize(s); err != nil {
			t.Fatal(err)
		}
	})
}
