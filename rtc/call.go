package rtc

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/symtab"
)

// cells are the out-parameters of one call sequence, in Go heap memory (a
// compile is long, and a fake compiler calls back into Go, so nothing the
// compiler writes lives on the goroutine stack).
type cells struct {
	prog  uintptr // nvrtcProgram / hiprtcProgram
	size  uint64  // size_t
	ptr   uintptr // const char *
	major int32
	minor int32
	n     int32
}

// cstr is s as a NUL-terminated C string in Go heap memory; the caller keeps
// it alive (runtime.KeepAlive) until the call returns.
func cstr(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}

func addr[T any](p *T) uintptr { return uintptr(unsafe.Pointer(p)) }

// newCells allocates cells on the heap: escape makes the compiler believe
// they outlive the call, which a uintptr conversion alone does not.
func newCells() *cells {
	c := new(cells)
	escape(c)
	return c
}

var never bool

//lint:ignore U1000 written (never, in fact) so that escape's argument escapes
var sink any

// escape moves x to the heap (the store never happens).
func escape(x any) {
	if never {
		sink = x
	}
}

// status turns a result code into an error: nil on success.
func (c *Compiler) status(op symtab.Op, r uintptr) error {
	code := int(int32(r))
	if code == symtab.RTCSuccess {
		return nil
	}
	name := ""
	if fn := c.fns[symtab.RTCGetErrorString]; fn != 0 {
		name = ccall.GoString(ccall.Call1(fn, uintptr(code)))
	}
	return &Error{Compiler: c.String(), Op: symtab.RTC.Rows[op].Symbol[c.vendor], Code: code, Name: name}
}

// version asks nvrtcVersion / hiprtcVersion.
func (c *Compiler) version() (major, minor int, err error) {
	out := newCells()
	r := ccall.Call2(c.fns[symtab.RTCVersion], addr(&out.major), addr(&out.minor))
	if err := c.status(symtab.RTCVersion, r); err != nil {
		return 0, 0, err
	}
	if fn := c.fns[symtab.RTCRuntimeVersion]; fn != 0 {
		// ROCm 5: the release, 10000000*major + 100000*minor + patch.
		if r := ccall.Call1(fn, addr(&out.n)); int32(r) == 0 && out.n >= 10000000 {
			return int(out.n / 10000000), int(out.n / 100000 % 100), nil
		}
	}
	return int(out.major), int(out.minor), nil
}

// supportedArchs asks NVRTC 11.2+ for the architectures it supports.
func (c *Compiler) supportedArchs() ([]int, error) {
	fnN, fn := c.fns[symtab.RTCGetNumSupportedArchs], c.fns[symtab.RTCGetSupportedArchs]
	if fnN == 0 || fn == 0 {
		return nil, c.status(symtab.RTCGetSupportedArchs, symtab.RTCErrorInvalidInput)
	}
	out := newCells()
	if err := c.status(symtab.RTCGetNumSupportedArchs, ccall.Call1(fnN, addr(&out.n))); err != nil {
		return nil, err
	}
	if out.n <= 0 || out.n > 1024 {
		return nil, nil
	}
	archs := make([]int32, out.n)
	if err := c.status(symtab.RTCGetSupportedArchs, ccall.Call1(fn, addr(&archs[0]))); err != nil {
		return nil, err
	}
	res := make([]int, len(archs))
	for i, a := range archs {
		res[i] = int(a)
	}
	return res, nil
}

// compiled is what one compile produced.
type compiled struct {
	image   []byte
	log     string
	lowered map[string]string
}

// compile runs one program through the compiler: create, add the name
// expressions, compile, read the log, the image and the lowered names,
// destroy. The caller holds c.mu for reading (and c.serial for hipRTC).
func (c *Compiler) compile(src, name string, opts, exprs []string, cubin bool) (out compiled, err error) {
	cl := newCells()
	srcB, nameB := cstr(src), cstr(name)
	r := ccall.Call6(c.fns[symtab.RTCCreateProgram], addr(&cl.prog), addr(&srcB[0]), addr(&nameB[0]), 0, 0, 0)
	runtime.KeepAlive(srcB)
	runtime.KeepAlive(nameB)
	if err := c.status(symtab.RTCCreateProgram, r); err != nil {
		return out, err
	}
	defer func() {
		r := ccall.Call1(c.fns[symtab.RTCDestroyProgram], addr(&cl.prog))
		if derr := c.status(symtab.RTCDestroyProgram, r); derr != nil && err == nil {
			err = derr
		}
		runtime.KeepAlive(cl)
	}()
	prog := cl.prog

	exprB := make([][]byte, len(exprs))
	for i, e := range exprs {
		exprB[i] = cstr(e)
		r := ccall.Call2(c.fns[symtab.RTCAddNameExpression], prog, addr(&exprB[i][0]))
		if err := c.status(symtab.RTCAddNameExpression, r); err != nil {
			return out, err
		}
	}

	optB := make([][]byte, len(opts))
	optP := make([]uintptr, len(opts)+1) // never empty: &optP[0] is valid
	for i, o := range opts {
		optB[i] = cstr(o)
		optP[i] = addr(&optB[i][0])
	}
	rc := ccall.Call3(c.fns[symtab.RTCCompileProgram], prog, uintptr(len(opts)), addr(&optP[0]))
	runtime.KeepAlive(optB)
	runtime.KeepAlive(optP)

	out.log, err = c.read(prog, symtab.RTCGetProgramLogSize, symtab.RTCGetProgramLog, cl)
	if err != nil {
		return out, err
	}
	if code := int(int32(rc)); code == symtab.RTCErrorCompilation {
		return out, &CompileError{Compiler: c.String(), Program: name, Log: out.log}
	}
	if err := c.status(symtab.RTCCompileProgram, rc); err != nil {
		return out, withLog(err, out.log)
	}

	sizeOp, codeOp := symtab.RTCGetCodeSize, symtab.RTCGetCode
	if cubin {
		sizeOp, codeOp = symtab.RTCGetCUBINSize, symtab.RTCGetCUBIN
	}
	img, err := c.read(prog, sizeOp, codeOp, cl)
	if err != nil {
		return out, err
	}
	if img == "" {
		// A compile that succeeded has an image: none (or a size past
		// read's bound) is the library's fault, not a result to cache.
		return out, fmt.Errorf("rtc: %s: %s: %s gave no image", c, name, symtab.RTC.Rows[codeOp].Symbol[c.vendor])
	}
	out.image = []byte(img)

	if len(exprs) > 0 {
		out.lowered = make(map[string]string, len(exprs))
		for i, e := range exprs {
			cl.ptr = 0
			r := ccall.Call3(c.fns[symtab.RTCGetLoweredName], prog, addr(&exprB[i][0]), addr(&cl.ptr))
			if err := c.status(symtab.RTCGetLoweredName, r); err != nil {
				return out, err
			}
			out.lowered[e] = ccall.GoString(cl.ptr)
		}
	}
	runtime.KeepAlive(exprB)
	return out, nil
}

// read reads a sized buffer (the log, PTX, a cubin, a code object) and
// drops the NUL the text ones end with.
func (c *Compiler) read(prog uintptr, sizeOp, op symtab.Op, cl *cells) (string, error) {
	cl.size = 0
	if err := c.status(sizeOp, ccall.Call2(c.fns[sizeOp], prog, addr(&cl.size))); err != nil {
		return "", err
	}
	if cl.size == 0 || cl.size > 1<<31 {
		return "", nil
	}
	buf := make([]byte, cl.size)
	if err := c.status(op, ccall.Call2(c.fns[op], prog, addr(&buf[0]))); err != nil {
		return "", err
	}
	if op == symtab.RTCGetProgramLog || (op == symtab.RTCGetCode && c.vendor == symtab.CUDA) {
		for len(buf) > 0 && buf[len(buf)-1] == 0 {
			buf = buf[:len(buf)-1]
		}
	}
	return string(buf), nil
}

// logError is a status error with the compiler's log.
type logError struct {
	err error
	log string
}

func (e *logError) Error() string { return e.err.Error() + ":\n" + e.log }
func (e *logError) Unwrap() error { return e.err }

func withLog(err error, log string) error {
	if log == "" {
		return err
	}
	return &logError{err, log}
}
