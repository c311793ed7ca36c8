package blas

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/bind"
)

// The native engine: the vendor's library through bind, every call made
// with the handle's device current (CheckOn), in the same transition into
// C. Host scalars live in cells, Go heap memory the library reads during
// the call (and, for Dot and Nrm2 in host mode, writes before it returns).

// cells are a native handle's host scalars and out-parameters.
type cells struct {
	h             uintptr // the library's handle
	a32, b32, r32 float32
	_             float32
	a64, b64, r64 float64
}

var never bool

//lint:ignore U1000 written (never, in fact) so that escape's argument escapes
var sink any

// escape moves x to the heap: a uintptr conversion alone does not make the
// compiler keep an out-parameter off the stack.
func escape(x any) {
	if never {
		sink = x
	}
}

func addr[T any](p *T) uintptr { return uintptr(unsafe.Pointer(p)) }

// loaded is a library opened for a vendor, with its dialect.
type loaded struct {
	lib  *bind.Lib
	d    dialect
	desc string
}

// libs caches the libraries by vendor and path: a BLAS library is loaded
// once per process and file and never unloaded (unloading cuBLAS while the
// CUDA runtime inside it holds state is unsafe).
var libs struct {
	mu sync.Mutex
	m  map[libKey]*loaded
}

type libKey struct {
	v    bind.Vendor
	path string
}

// testLoader, when set (by tests only), loads the libraries: a fake
// library of Go callbacks checks what the engine passes.
var testLoader bind.Loader

// declarations are the libraries tried for each vendor, in order.
var declarations = [bind.NumVendors][]*bind.Library{bind.CUDA: {CUBLAS}, bind.HIP: {HIPBLAS, ROCBLAS}}

// load opens the BLAS library of vendor v (from path if not empty).
func load(v bind.Vendor, path string) (*loaded, error) {
	libs.mu.Lock()
	defer libs.mu.Unlock()
	key := libKey{v, path}
	if l := libs.m[key]; l != nil {
		return l, nil
	}
	var opts []bind.Option
	if path != "" {
		opts = append(opts, bind.WithPath(path))
	}
	if testLoader != nil {
		opts = append(opts, bind.WithLoader(testLoader))
	}
	var errs []error
	for _, decl := range declarations[v] {
		l, err := bind.Open(decl, v, opts...)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ld := &loaded{lib: l}
		switch decl {
		case CUBLAS:
			ld.d = cublasDialect
		case HIPBLAS:
			ld.d = hipblasDialect(l)
		default:
			ld.d = rocblasDialect
		}
		ld.desc = decl.Name
		if ver, err := l.Version(); err == nil {
			ld.desc += " " + ver
		}
		ld.desc += " (" + l.Path() + ")"
		if libs.m == nil {
			libs.m = map[libKey]*loaded{}
		}
		libs.m[key] = ld
		return ld, nil
	}
	return nil, fmt.Errorf("gpumem: blas: no BLAS library for %s: %w", v, errors.Join(errs...))
}

// native is a handle of the vendor library.
type native struct {
	*loaded
	ctx  bind.Context
	cl   *cells
	mode PointerMode
}

func openNative(b gpumem.Backend, ctx bind.Context, path string) (*native, error) {
	var v bind.Vendor
	switch b.Name() {
	case "cuda":
		v = bind.CUDA
	case "hip":
		v = bind.HIP
	default:
		return nil, &gpumem.NotSupportedError{Backend: b.Name(), Op: "blas.Open", Reason: "no BLAS library is known for this backend"}
	}
	ld, err := load(v, path)
	if err != nil {
		return nil, err
	}
	n := &native{loaded: ld, ctx: ctx, cl: new(cells)}
	escape(n.cl)
	err = ld.lib.CheckOn(ctx, opCreate, addr(&n.cl.h))
	runtime.KeepAlive(n.cl)
	if err != nil {
		return nil, fmt.Errorf("gpumem: blas: Open: creating the %s handle on device %d: %w", ld.lib.Library().Name, ctx.Device(), err)
	}
	return n, nil
}

func (n *native) library() string { return n.desc }

func (n *native) setStream(s gpumem.Stream) error {
	return n.wrap("SetStream", n.lib.CheckOn(n.ctx, opSetStream, n.cl.h, s.Handle))
}

func (n *native) setWorkspace(p gpumem.Ptr, size uint64) error {
	if !n.lib.Has(opSetWorkspace) {
		return &gpumem.NotSupportedError{Backend: n.lib.Library().Name, Op: "blas.WithWorkspace", Reason: "this version of the library takes no workspace"}
	}
	return n.wrap("SetWorkspace", n.lib.CheckOn(n.ctx, opSetWorkspace, n.cl.h, uintptr(p), uintptr(size)))
}

func (n *native) destroy() error {
	return n.wrap("Close", n.lib.CheckOn(n.ctx, opDestroy, n.cl.h))
}

func (n *native) wrap(routine string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("gpumem: blas: %s: %w", routine, err)
}

// sel picks the float32 or the float64 row.
func sel(t Type, s, d bind.Op) bind.Op {
	if t == F64 {
		return d
	}
	return s
}

// scalar is the address the library reads a scalar from: the device
// pointer, or the host cell of the call's type holding v.
func (n *native) scalar(c *call, v float64, p gpumem.Ptr, f32 *float32, f64 *float64) uintptr {
	if c.mode == Device {
		return uintptr(p)
	}
	if c.t == F64 && c.kind != kGemmEx {
		*f64 = v
		return addr(f64)
	}
	*f32 = float32(v)
	return addr(f32)
}

// w converts a (possibly negative) int to an argument word.
func w(v int) uintptr { return uintptr(int64(v)) }

func (n *native) run(c *call) error {
	if c.mode != n.mode {
		if err := n.lib.CheckOn(n.ctx, opSetPointerMode, n.cl.h, n.d.pointer[c.mode]); err != nil {
			return n.wrap(c.routine, err)
		}
		n.mode = c.mode
	}
	cl, h, d := n.cl, n.cl.h, &n.d
	var err error
	switch c.kind {
	case kAxpy:
		alpha := n.scalar(c, c.alpha, c.alphaP, &cl.a32, &cl.a64)
		err = n.lib.CheckOn(n.ctx, sel(c.t, opSaxpy, opDaxpy), h, w(c.n), alpha, uintptr(c.x), w(c.incx), uintptr(c.y), w(c.incy))
	case kScal:
		alpha := n.scalar(c, c.alpha, c.alphaP, &cl.a32, &cl.a64)
		err = n.lib.CheckOn(n.ctx, sel(c.t, opSscal, opDscal), h, w(c.n), alpha, uintptr(c.x), w(c.incx))
	case kDot, kNrm2:
		res := uintptr(c.res)
		if c.mode == Host {
			res = addr(&cl.r64)
			if c.t == F32 {
				res = addr(&cl.r32)
			}
		}
		if c.kind == kDot {
			err = n.lib.CheckOn(n.ctx, sel(c.t, opSdot, opDdot), h, w(c.n), uintptr(c.x), w(c.incx), uintptr(c.y), w(c.incy), res)
		} else {
			err = n.lib.CheckOn(n.ctx, sel(c.t, opSnrm2, opDnrm2), h, w(c.n), uintptr(c.x), w(c.incx), res)
		}
		if err == nil && c.mode == Host {
			c.result = cl.r64
			if c.t == F32 {
				c.result = float64(cl.r32)
			}
		}
	case kGemv:
		alpha := n.scalar(c, c.alpha, c.alphaP, &cl.a32, &cl.a64)
		beta := n.scalar(c, c.beta, c.betaP, &cl.b32, &cl.b64)
		err = n.lib.CheckOn(n.ctx, sel(c.t, opSgemv, opDgemv), h, d.trans[c.ta], w(c.m), w(c.n), alpha,
			uintptr(c.a), w(c.lda), uintptr(c.x), w(c.incx), beta, uintptr(c.y), w(c.incy))
	case kGemm:
		alpha := n.scalar(c, c.alpha, c.alphaP, &cl.a32, &cl.a64)
		beta := n.scalar(c, c.beta, c.betaP, &cl.b32, &cl.b64)
		if c.strided {
			err = n.lib.CheckOn(n.ctx, sel(c.t, opSgemmStrided, opDgemmStrided), h, d.trans[c.ta], d.trans[c.tb], w(c.m), w(c.n), w(c.k), alpha,
				uintptr(c.a), w(c.lda), uintptr(c.sa), uintptr(c.b), w(c.ldb), uintptr(c.sb), beta, uintptr(c.c), w(c.ldc), uintptr(c.sc), w(c.batch))
		} else {
			err = n.lib.CheckOn(n.ctx, sel(c.t, opSgemm, opDgemm), h, d.trans[c.ta], d.trans[c.tb], w(c.m), w(c.n), w(c.k), alpha,
				uintptr(c.a), w(c.lda), uintptr(c.b), w(c.ldb), beta, uintptr(c.c), w(c.ldc))
		}
	case kGemmEx:
		err = n.gemmEx(c)
	default:
		err = fmt.Errorf("unknown routine kind %d: %w", c.kind, gpumem.ErrInvalidValue)
	}
	runtime.KeepAlive(cl)
	return n.wrap(c.routine, err)
}

func (n *native) gemmEx(c *call) error {
	cl, h, d := n.cl, n.cl.h, &n.d
	alpha := n.scalar(c, c.alpha, c.alphaP, &cl.a32, &cl.a64)
	beta := n.scalar(c, c.beta, c.betaP, &cl.b32, &cl.b64)
	tin, tout := d.exType[c.t], d.exType[c.out]
	switch d.exShape {
	case exCUDA, exCUDAV2:
		op := opGemmEx
		if d.exShape == exCUDAV2 {
			op = opGemmExV2
		}
		return n.lib.CheckOn(n.ctx, op, h, d.trans[c.ta], d.trans[c.tb], w(c.m), w(c.n), w(c.k), alpha,
			uintptr(c.a), tin, w(c.lda), uintptr(c.b), tin, w(c.ldb), beta, uintptr(c.c), tout, w(c.ldc), d.exCompute, d.exAlgo)
	case exRoc:
		return n.lib.CheckOn(n.ctx, opGemmEx, h, d.trans[c.ta], d.trans[c.tb], w(c.m), w(c.n), w(c.k), alpha,
			uintptr(c.a), tin, w(c.lda), uintptr(c.b), tin, w(c.ldb), beta, uintptr(c.c), tout, w(c.ldc),
			uintptr(c.c), tout, w(c.ldc), d.exCompute, d.exAlgo, 0, 0)
	}
	return &gpumem.NotSupportedError{Backend: n.lib.Library().Name, Op: "GemmEx", Reason: "the library has no GemmEx"}
}
