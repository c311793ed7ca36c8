package driver

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/native"
	"github.com/gpumem/gpumem/internal/symtab"
)

// The fake libcuda's functions are Go (purego callbacks): a short call into
// one would enter Go without leaving it, so this test binary holds short
// calls off for its whole life, as internal/ccall asks of a program that
// hands C Go functions by other means than internal/callback.
func init() { ccall.HoldShort() }

// A fake libcuda: C-callable Go functions behind the loader seam, so that
// Open, symbol resolution, error translation and the call path can be tested
// with no library at all.

type fakeLib struct {
	syms map[string]uintptr
}

func (f *fakeLib) Path() string { return "fake-libcuda.so" }
func (f *fakeLib) Sym(name string) (uintptr, error) {
	if a, ok := f.syms[name]; ok {
		return a, nil
	}
	return 0, fmt.Errorf("fake: undefined symbol %s: %w", name, gpumem.ErrNotSupported)
}
func (f *fakeLib) Close() error { return nil }

func put[T any](addr uintptr, v T) {
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	*(*T)(p) = v
}

var (
	fakeOnce    sync.Once
	fakeFns     map[string]uintptr
	fakeCurrent atomic.Uintptr // last context made current
	fakeNames   = map[int][]byte{2: []byte("CUDA_ERROR_OUT_OF_MEMORY\x00"), 801: []byte("CUDA_ERROR_NOT_SUPPORTED\x00"), 100: []byte("CUDA_ERROR_NO_DEVICE\x00")}
	fakeDevices atomic.Int32 // device count the fake reports
	fakeInit    atomic.Int32 // status cuInit returns
	fakeAllocs  atomic.Int64
)

const fakeCtxBase = 0xc000

func fakeFunctions() map[string]uintptr {
	fakeOnce.Do(func() {
		cb := purego.NewCallback
		ok := cb(func(a1, a2, a3, a4, a5, a6 uintptr) uintptr { return 0 })
		fakeFns = map[string]uintptr{
			"cuInit":             cb(func(flags uintptr) uintptr { return uintptr(fakeInit.Load()) }),
			"cuDriverGetVersion": cb(func(p uintptr) uintptr { put[int32](p, 12020); return 0 }),
			"cuDeviceGetCount":   cb(func(p uintptr) uintptr { put(p, fakeDevices.Load()); return 0 }),
			"cuDeviceGet":        cb(func(p, ord uintptr) uintptr { put(p, int32(ord)); return 0 }),
			"cuDevicePrimaryCtxRetain": cb(func(p, dev uintptr) uintptr {
				put(p, uintptr(fakeCtxBase+dev))
				return 0
			}),
			"cuCtxSetCurrent": cb(func(ctx uintptr) uintptr { fakeCurrent.Store(ctx); return 0 }),
			"cuGetErrorName": cb(func(code, p uintptr) uintptr {
				n, ok := fakeNames[int(int32(code))]
				if !ok {
					put[uintptr](p, 0)
					return 1
				}
				put(p, uintptr(unsafe.Pointer(&n[0])))
				return 0
			}),
			"cuMemAlloc_v2": cb(func(p, size uintptr) uintptr {
				if size > 1<<40 {
					return 2
				}
				put[uintptr](p, 0x10000)
				return 0
			}),
			"cuMemAllocFromPoolAsync": cb(func(p, size, pool, stream uintptr) uintptr {
				fakeAllocs.Add(1)
				if st := fakeStreamOrdered(stream); st != 0 {
					return st
				}
				if size > 1<<40 {
					return 2
				}
				put[uintptr](p, 0x20000+size)
				return 0
			}),
			"cuMemFreeAsync": cb(func(p, stream uintptr) uintptr {
				fakeFrees.Add(1)
				return fakeStreamOrdered(stream)
			}),
			"cuMemAllocAsync": cb(func(p, size, stream uintptr) uintptr { put[uintptr](p, 0x30000); return 0 }),
			"cuDeviceGetAttribute": cb(func(p, attr, dev uintptr) uintptr {
				put(p, int32(attr)*10+int32(dev))
				return 0
			}),
			"cuStreamQuery":   cb(func(s uintptr) uintptr { return 600 }),
			"cuMemPoolTrimTo": cb(func(pool, keep uintptr) uintptr { return 801 }),
			// Streams and events with handles of their own; every call
			// on one after its destruction is counted (fakeHandles).
			"cuStreamCreateWithPriority": cb(func(p, flags, prio uintptr) uintptr {
				put(p, fakeHandles.make())
				return 0
			}),
			"cuEventCreate": cb(func(p, flags uintptr) uintptr {
				put(p, fakeHandles.make())
				return 0
			}),
			"cuStreamDestroy_v2": cb(func(s uintptr) uintptr { fakeHandles.destroy(s); return 0 }),
			"cuEventDestroy_v2":  cb(func(e uintptr) uintptr { fakeHandles.destroy(e); return 0 }),
			"cuEventRecord":      cb(func(e, s uintptr) uintptr { fakeHandles.use(e, s); return 0 }),
			"cuEventSynchronize": cb(func(e uintptr) uintptr { fakeHandles.use(e); return 0 }),
			"cuMemsetD8Async":    cb(func(p, v, n, s uintptr) uintptr { fakeHandles.use(s); return 0 }),
			"cuMemPoolSetAttribute": cb(func(pool, attr, v uintptr) uintptr {
				if attr <= 3 { // the reuse policies: an int
					fakePoolBool.Store(get[int32](v))
				}
				return 0
			}),
			"cuMemFree_v2":          cb(func(p uintptr) uintptr { return 1 }),
			"cuMemAdvise_v2":        cb(func(p, n, adv, loc uintptr) uintptr { fakeLoc.Store(uint64(loc)); return 0 }),
			"cuCtxEnablePeerAccess": cb(func(ctx, flags uintptr) uintptr { return 704 }),
			"cuMemcpy": cb(func(dst, src, n uintptr) uintptr {
				fakeSteps.Add(1) // a copy: the low digit
				return 0
			}),
			"cuStreamBeginCapture_v2": cb(func(s, mode uintptr) uintptr {
				if s == fakeRefusedStream {
					return 1
				}
				fakeCapturing.Store(s, int32(1))
				return 0
			}),
			"cuStreamEndCapture": cb(func(s, graph uintptr) uintptr {
				switch s {
				case fakeStickyStream: // fails and stays capturing
					return 908
				case fakeInvalidatedStream: // fails and leaves capture
					fakeCapturing.Delete(s)
					return 901
				}
				fakeCapturing.Delete(s)
				put[uintptr](graph, 0x6000)
				return 0
			}),
			"cuStreamIsCapturing": cb(func(s, status uintptr) uintptr {
				st, _ := fakeCapturing.Load(s)
				v, _ := st.(int32)
				put(status, v)
				return 0
			}),
			"cuStreamGetCaptureInfo_v2": cb(func(s, status, id, graph, deps, n uintptr) uintptr {
				st, _ := fakeCapturing.Load(s)
				v, _ := st.(int32)
				put(status, v)
				put[uint64](id, 7)
				put[uintptr](graph, 0x6000)
				return 0
			}),
			"cuStreamSynchronize": cb(func(s uintptr) uintptr {
				if s == 0 {
					fakeSteps.Store(fakeSteps.Load() * 10) // the default stream's: shifts
				}
				return 0
			}),
		}
		for _, r := range symtab.Driver.Rows {
			if s := r.Symbol[symtab.CUDA]; s != "" && r.Required[symtab.CUDA] {
				if _, done := fakeFns[s]; !done {
					fakeFns[s] = ok
				}
			}
		}
		fakeDevices.Store(2)
	})
	return fakeFns
}

var fakeLoc atomic.Uint64

// fakeFrees counts cuMemFreeAsync calls; fakeSeenCtx is the context current
// when cuMemAllocFromPoolAsync or cuMemFreeAsync was last called.
var (
	fakeFrees   atomic.Int64
	fakeSeenCtx atomic.Uintptr
)

// fakeNeedsCtxStream is a stream on which cuMemAllocFromPoolAsync and
// cuMemFreeAsync answer CUDA_ERROR_INVALID_CONTEXT while no context is
// current, as a driver that wants one would.
const fakeNeedsCtxStream = 0x5c7c

// fakeBadStream is a stream on which cuMemAllocFromPoolAsync and
// cuMemFreeAsync always answer CUDA_ERROR_INVALID_VALUE.
const fakeBadStream = 0x5b01

// fakeStreamOrdered is what cuMemAllocFromPoolAsync and cuMemFreeAsync share:
// it notes the context current at the call and answers the special streams'
// refusals (0: go on).
func fakeStreamOrdered(stream uintptr) uintptr {
	fakeSeenCtx.Store(fakeCurrent.Load())
	switch {
	case stream == fakeNeedsCtxStream && fakeCurrent.Load() == 0:
		return 201
	case stream == fakeBadStream:
		return 1
	}
	return 0
}

// fakeCapturing is the capture status (int32) of each capturing stream.
var fakeCapturing sync.Map

// Streams whose captures the fake treats specially: a begin it refuses, an
// end that fails and leaves the stream capturing, an end that fails and
// ends the capture.
const (
	fakeRefusedStream     = 0x5bad
	fakeStickyStream      = 0x5111
	fakeInvalidatedStream = 0x5222
)

// fakeSteps records copies (cuMemcpy adds one) and synchronizations of the
// default stream (cuStreamSynchronize(0) multiplies by ten), in order.
var fakeSteps atomic.Int64

// fakeLoader returns a loader of the fake library without the named symbols.
func fakeLoader(without ...string) native.Loader {
	fns := fakeFunctions()
	return func(...string) (native.Library, error) {
		l := &fakeLib{syms: map[string]uintptr{}}
		for k, v := range fns {
			l.syms[k] = v
		}
		for _, w := range without {
			delete(l.syms, w)
		}
		return l, nil
	}
}

func openFake(t interface {
	Fatal(...any)
	Helper()
}, without ...string) *native.Backend {
	t.Helper()
	b, err := open(fakeLoader(without...), "")
	if err != nil {
		t.Fatal(err)
	}
	return b.(*native.Backend)
}

func isNotSupportedNaming(err error, sym string) bool {
	return errors.Is(err, gpumem.ErrNotSupported) && strings.Contains(err.Error(), sym)
}

// fakePoolBool is the last int (boolean) pool attribute set.
var fakePoolBool atomic.Int32

// fakeHandles gives stream and event handles and counts the calls the fake
// library got with one it had destroyed: undefined behaviour in a real
// one, which may crash.
var fakeHandles handleLog

type handleLog struct {
	mu       sync.Mutex
	next     uintptr
	dead     map[uintptr]bool
	deadUses int
}

func (h *handleLog) make() uintptr {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	return 0xa0000 + h.next*0x10
}

func (h *handleLog) destroy(x uintptr) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dead == nil {
		h.dead = map[uintptr]bool{}
	}
	if h.dead[x] {
		h.deadUses++
	}
	h.dead[x] = true
}

func (h *handleLog) use(xs ...uintptr) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, x := range xs {
		if h.dead[x] {
			h.deadUses++
		}
	}
}

func (h *handleLog) uses() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.deadUses
}
