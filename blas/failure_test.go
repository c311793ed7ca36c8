package blas_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/blas"
	"github.com/gpumem/gpumem/sim"
)

var errInjected = errors.New("injected")

// simResource allocates from the simulator directly; its Allocate and
// Deallocate fail while told to. It logs the stream of every call.
type simResource struct {
	g         *sim.GPU
	failAlloc bool
	failFree  atomic.Int32 // Deallocates still to fail
	mu        sync.Mutex
	log       []string // "alloc p s", "free p s"
}

func (r *simResource) Allocate(size uint64, s gpumem.Stream) (gpumem.Ptr, error) {
	if r.failAlloc {
		return 0, errInjected
	}
	p, err := r.g.Malloc(s.Device, size)
	if err == nil {
		r.note("alloc", p, s)
	}
	return p, err
}

func (r *simResource) Deallocate(p gpumem.Ptr, s gpumem.Stream) error {
	if r.failFree.Add(-1) >= 0 {
		return errInjected
	}
	r.note("free", p, s)
	return r.g.Free(s.Device, p)
}

func (r *simResource) note(op string, p gpumem.Ptr, s gpumem.Stream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, fmt.Sprintf("%s %#x %#x", op, p, s.Handle))
}

// take returns the calls logged since the last take.
func (r *simResource) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.log
	r.log = nil
	return l
}

// A Close the device refuses keeps what it could not release: calls are
// refused from then on, and the next Close releases the rest, so nothing
// leaks.
func TestCloseRetriesWhatFailed(t *testing.T) {
	for _, op := range []string{"Free", "ModuleUnload", "Deallocate"} {
		t.Run(op, func(t *testing.T) {
			g := newGPU(t)
			before := len(g.Leaks())
			r := &simResource{g: g}
			h, err := blas.Open(g, 0, blas.WithWorkspace(r, 4096))
			if err != nil {
				t.Fatal(err)
			}
			if op == "Deallocate" {
				r.failFree.Store(1)
			} else {
				g.InjectFault(op, 1, errInjected)
			}
			if err := h.Close(); !errors.Is(err, errInjected) {
				t.Fatalf("Close with %s failing: %v", op, err)
			}
			g.ClearFaults()
			if err := h.Saxpy(0, 1, 0, 1, 0, 1); !errors.Is(err, gpumem.ErrClosed) {
				t.Errorf("a call after a failed Close: %v", err)
			}
			if err := h.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if n := len(g.Leaks()); n != before {
				t.Errorf("%d live objects after the second Close, want %d: %v", n, before, g.Leaks())
			}
			if err := h.Close(); err != nil {
				t.Errorf("third Close: %v", err)
			}
		})
	}
}

// A SetStream that fails leaves the handle's calls on the stream they were
// on, where Stream says they are.
func TestSetStreamFailureKeepsStream(t *testing.T) {
	g := newGPU(t)
	r := &simResource{g: g}
	h := openHandle(t, g, blas.WithWorkspace(r, 4096))
	r.failAlloc = true
	unknown := gpumem.Stream{Handle: 12345}
	if err := h.SetStream(unknown); !errors.Is(err, errInjected) {
		t.Fatalf("SetStream with the new stream's workspace refused: %v", err)
	}
	if s := h.Stream(); s != (gpumem.Stream{}) {
		t.Errorf("Stream = %v after a failed SetStream, want the default stream", s)
	}
	x := upload(t, g, blas.F64, []float64{1, 2})
	if err := h.Dscal(2, 3, x, 1); err != nil {
		t.Fatalf("a call after the failed SetStream: %v", err)
	}
	if got := download(t, g, blas.F64, x, 2); got[0] != 3 || got[1] != 6 {
		t.Errorf("x = %v, want [3 6]", got)
	}
}

// Empty calls read none of their operands, device scalars included, so any
// pointer stands for them, as with the libraries: nothing is resolved.
func TestEmptyCallsResolveNoPointer(t *testing.T) {
	g := newGPU(t)
	h := openHandle(t, g)
	p := upload(t, g, blas.F32, make([]float64, 16))
	const foreign gpumem.Ptr = 0xdead0000
	N := blas.NoTrans
	for name, call := range map[string]func() error{
		"strided, no batches": func() error {
			return h.SgemmStridedBatched(N, N, 2, 2, 2, 1, foreign, 2, 0, foreign, 2, 0, 0, foreign, 2, 0, 0)
		},
		"device gemm, m 0": func() error {
			return h.GemmDevice(blas.F32, N, N, 0, 2, 2, foreign, p, 1, p, 2, foreign, p, 1)
		},
		"device gemm, empty": func() error {
			return h.GemmDevice(blas.F32, N, N, 0, 0, 0, foreign, foreign, 1, foreign, 1, foreign, foreign, 1)
		},
		"device gemv, m 0": func() error {
			return h.GemvDevice(blas.F32, N, 0, 2, foreign, p, 1, p, 1, foreign, p, 1)
		},
		"device axpy, n 0": func() error { return h.AxpyDevice(blas.F32, 0, foreign, foreign, 1, foreign, 1) },
		"device scal, n 0": func() error { return h.ScalDevice(blas.F64, 0, foreign, foreign, 1) },
	} {
		if err := call(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := g.StreamSynchronize(gpumem.Stream{}); err != nil {
		t.Error(err)
	}
}

// A nil handle is an error, not a panic.
func TestNilHandle(t *testing.T) {
	var h *blas.Handle
	p := gpumem.Ptr(0x1000)
	N := blas.NoTrans
	for name, call := range map[string]func() error{
		"Saxpy":      func() error { return h.Saxpy(1, 1, p, 1, p, 1) },
		"Ddot":       func() error { _, err := h.Ddot(1, p, 1, p, 1); return err },
		"Nrm2Device": func() error { return h.Nrm2Device(blas.F32, 1, p, 1, p) },
		"Sscal":      func() error { return h.Sscal(1, 1, p, 1) },
		"Dgemv":      func() error { return h.Dgemv(N, 1, 1, 1, p, 1, p, 1, 0, p, 1) },
		"Sgemm":      func() error { return h.Sgemm(N, N, 1, 1, 1, 1, p, 1, p, 1, 0, p, 1) },
		"GemmEx":     func() error { return h.GemmEx(N, N, 1, 1, 1, 1, p, 1, p, 1, 0, p, 1, blas.F16, blas.F32) },
		"SetStream":  func() error { return h.SetStream(gpumem.Stream{}) },
		"Close":      func() error { return h.Close() },
	} {
		if err := call(); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("%s on a nil handle: %v", name, err)
		}
	}
	if h.Stream() != (gpumem.Stream{}) || h.Device() != -1 || h.Library() != "" {
		t.Error("a nil handle describes something")
	}
}

// A workspace size with no resource to take it from is refused.
func TestWorkspaceWithoutResource(t *testing.T) {
	g := newGPU(t)
	if _, err := blas.Open(g, 0, blas.WithWorkspace(nil, 1<<20)); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("a workspace from a nil resource: %v", err)
	}
}
