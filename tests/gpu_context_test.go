package tests

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/native"
	"github.com/gpumem/gpumem/internal/symtab"
)

// TestGPUStreamOrderedWithoutContext: on a thread with no context current,
// the pool's allocation and the stream-ordered free on an explicit stream
// work, and leave no context current (they were called directly, with no
// make-current before them); the memory is usable in stream order. The rows marked symtab.Row.StreamContext for CUDA rely on this.
func TestGPUStreamOrderedWithoutContext(t *testing.T) {
	be := openGPU(t, "cuda")
	defer be.Close()
	vb := be.(*native.Backend)
	s, err := be.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer be.StreamDestroy(s)
	pool, err := be.DefaultMemPool(0)
	if err != nil {
		t.Fatal(err)
	}
	setCurrent, _, _, err := vb.CurrentFunc(0)
	if err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// current is the context current on this thread.
	current := func() uintptr {
		var c uintptr
		r, err := vb.Raw(symtab.GetCurrent, uintptr(unsafe.Pointer(&c)))
		if err != nil || r != 0 {
			t.Fatalf("cuCtxGetCurrent: %d, %v", r, err)
		}
		return c
	}
	noContext := func() {
		if r := ccall.Call1(setCurrent, 0); r != 0 {
			t.Fatalf("cuCtxSetCurrent(NULL): %d", r)
		}
	}
	const n = 1 << 20
	noContext()
	p, err := be.MallocFromPoolAsync(n, pool, s)
	if err != nil {
		t.Fatalf("MallocFromPoolAsync with no context current: %v", err)
	}
	if c := current(); c != 0 {
		t.Errorf("the allocation made context %#x current", c)
	}
	if err := be.MemsetAsync(p, 0x5a, n, s); err != nil {
		t.Fatal(err)
	}
	if err := be.StreamSynchronize(s); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if err := be.CopyFromDevice(got, p); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != 0x5a {
			t.Fatalf("byte %d = %#x after the memset, want 0x5a", i, v)
		}
	}
	noContext()
	if err := be.FreeAsync(p, s); err != nil {
		t.Fatalf("FreeAsync with no context current: %v", err)
	}
	if c := current(); c != 0 {
		t.Errorf("the free made context %#x current", c)
	}
	if err := be.StreamSynchronize(s); err != nil {
		t.Fatal(err)
	}
}
