package rtc

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/symtab"
)

// A fake compiler: C-callable Go functions behind the loader seam, one set
// answering both NVRTC's and hipRTC's names, so that Open, the target
// refusal, the call path, the cache and errors are tested with no library.
// A source containing "#error" fails to compile; the image is a PTX-like
// text naming the target and the program's kernels (none, of size 0, for a
// source containing "fake: no image").

type fakeProgram struct {
	src, name string
	exprs     []string
	arch      string
	log       []byte
	image     []byte
	lowered   map[string][]byte
}

var (
	fakeOnce  sync.Once
	fakeFns   map[string]uintptr
	fakeMu    sync.Mutex
	fakeProgs = map[uintptr]*fakeProgram{}
	fakeNext  uintptr

	fakeMajor, fakeMinor atomic.Int32 // nvrtcVersion / hiprtcVersion
	fakeRuntime          atomic.Int32 // hipRuntimeGetVersion; 0: not exported
	fakeArchs            atomic.Bool  // nvrtcGetSupportedArchs exported
	fakeCreates          atomic.Int64
	fakeCompiles         atomic.Int64
	fakeErrString        = []byte("FAKE_RTC_ERROR\x00")
)

func put[T any](addr uintptr, v T) {
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	*(*T)(p) = v
}

func get[T any](addr uintptr) T {
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return *(*T)(p)
}

func fakeProg(h uintptr) *fakeProgram {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	return fakeProgs[h]
}

func copyOut(dst uintptr, b []byte) {
	p := *(*unsafe.Pointer)(unsafe.Pointer(&dst))
	copy(unsafe.Slice((*byte)(p), len(b)), b)
}

func fakeFunctions() map[string]uintptr {
	fakeOnce.Do(func() {
		cb := purego.NewCallback
		errString := cb(func(code uintptr) uintptr { return uintptr(unsafe.Pointer(&fakeErrString[0])) })
		version := cb(func(pmaj, pmin uintptr) uintptr {
			put(pmaj, fakeMajor.Load())
			put(pmin, fakeMinor.Load())
			return 0
		})
		create := cb(func(pprog, src, name, n, h, inc uintptr) uintptr {
			fakeCreates.Add(1)
			fakeMu.Lock()
			fakeNext++
			id := fakeNext
			fakeProgs[id] = &fakeProgram{src: ccall.GoString(src), name: ccall.GoString(name), lowered: map[string][]byte{}}
			fakeMu.Unlock()
			put(pprog, id)
			return 0
		})
		destroy := cb(func(pprog uintptr) uintptr {
			fakeMu.Lock()
			delete(fakeProgs, get[uintptr](pprog))
			fakeMu.Unlock()
			put[uintptr](pprog, 0)
			return 0
		})
		addExpr := cb(func(prog, expr uintptr) uintptr {
			p := fakeProg(prog)
			if p == nil {
				return symtab.RTCErrorInvalidInput
			}
			p.exprs = append(p.exprs, ccall.GoString(expr))
			return 0
		})
		compile := cb(func(prog, n, opts uintptr) uintptr {
			fakeCompiles.Add(1)
			p := fakeProg(prog)
			if p == nil {
				return symtab.RTCErrorInvalidInput
			}
			for i := uintptr(0); i < n; i++ {
				o := ccall.GoString(get[uintptr](opts + i*unsafe.Sizeof(uintptr(0))))
				if a, ok := strings.CutPrefix(o, "--gpu-architecture="); ok {
					p.arch = a
				}
			}
			if strings.Contains(p.src, "#error") {
				p.log = []byte(p.name + "(3): error: #error directive: broken\x00")
				return symtab.RTCErrorCompilation
			}
			var img strings.Builder
			fmt.Fprintf(&img, "// fake\n.target %s\n", p.arch)
			for _, line := range strings.Split(p.src, "\n") {
				if i := strings.Index(line, "void "); i >= 0 && strings.Contains(line, "__global__") {
					k := line[i+5:]
					if j := strings.IndexByte(k, '('); j >= 0 {
						fmt.Fprintf(&img, ".entry %s\n", k[:j])
					}
				}
			}
			for _, e := range p.exprs {
				p.lowered[e] = []byte("_Z" + strings.NewReplacer("<", "I", ">", "E").Replace(e) + "\x00")
			}
			p.image = []byte(img.String() + "\x00")
			if strings.Contains(p.src, "fake: no image") {
				p.image = nil // a library that succeeds and gives nothing
			}
			return 0
		})
		sizeOf := func(f func(*fakeProgram) []byte) uintptr {
			return cb(func(prog, psize uintptr) uintptr {
				p := fakeProg(prog)
				if p == nil {
					return symtab.RTCErrorInvalidInput
				}
				put(psize, uint64(len(f(p))))
				return 0
			})
		}
		read := func(f func(*fakeProgram) []byte) uintptr {
			return cb(func(prog, dst uintptr) uintptr {
				p := fakeProg(prog)
				if p == nil {
					return symtab.RTCErrorInvalidInput
				}
				copyOut(dst, f(p))
				return 0
			})
		}
		logOf := func(p *fakeProgram) []byte { return append(p.log, 0) }
		imageOf := func(p *fakeProgram) []byte { return p.image }
		lowered := cb(func(prog, expr, out uintptr) uintptr {
			p := fakeProg(prog)
			if p == nil {
				return symtab.RTCErrorInvalidInput
			}
			l, ok := p.lowered[ccall.GoString(expr)]
			if !ok {
				return 10
			}
			put(out, uintptr(unsafe.Pointer(&l[0])))
			return 0
		})
		numArchs := cb(func(pn uintptr) uintptr { put[int32](pn, 3); return 0 })
		archs := cb(func(pa uintptr) uintptr {
			for i, a := range []int32{75, 80, 90} {
				put(pa+uintptr(i)*4, a)
			}
			return 0
		})
		runtimeVersion := cb(func(pv uintptr) uintptr { put(pv, fakeRuntime.Load()); return 0 })
		fakeFns = map[string]uintptr{"hipRuntimeGetVersion": runtimeVersion,
			"nvrtcGetNumSupportedArchs": numArchs, "nvrtcGetSupportedArchs": archs}
		for _, pfx := range []string{"nvrtc", "hiprtc"} {
			fakeFns[pfx+"GetErrorString"] = errString
			fakeFns[pfx+"Version"] = version
			fakeFns[pfx+"CreateProgram"] = create
			fakeFns[pfx+"DestroyProgram"] = destroy
			fakeFns[pfx+"AddNameExpression"] = addExpr
			fakeFns[pfx+"CompileProgram"] = compile
			fakeFns[pfx+"GetProgramLogSize"] = sizeOf(logOf)
			fakeFns[pfx+"GetProgramLog"] = read(logOf)
			fakeFns[pfx+"GetLoweredName"] = lowered
		}
		fakeFns["nvrtcGetPTXSize"], fakeFns["nvrtcGetPTX"] = sizeOf(imageOf), read(imageOf)
		fakeFns["hiprtcGetCodeSize"], fakeFns["hiprtcGetCode"] = sizeOf(imageOf), read(imageOf)
	})
	return fakeFns
}

type fakeLib struct{ name string }

func (f *fakeLib) Path() string { return f.name }
func (f *fakeLib) Sym(name string) (uintptr, error) {
	switch {
	case name == "hipRuntimeGetVersion" && fakeRuntime.Load() == 0,
		strings.Contains(name, "SupportedArchs") && !fakeArchs.Load():
		return 0, fmt.Errorf("fake: undefined symbol %s: %w", name, gpumem.ErrNotSupported)
	}
	if a, ok := fakeFunctions()[name]; ok {
		return a, nil
	}
	return 0, fmt.Errorf("fake: undefined symbol %s: %w", name, gpumem.ErrNotSupported)
}
func (f *fakeLib) Close() error { return nil }

// fakeLoader loads only the names in ok (any name when ok is empty).
func fakeLoader(ok ...string) Loader {
	return func(name string) (Library, error) {
		if len(ok) == 0 {
			return &fakeLib{name}, nil
		}
		for _, n := range ok {
			if n == name {
				return &fakeLib{name}, nil
			}
		}
		return nil, &gpumem.LoadError{Tried: []gpumem.LoadAttempt{{Name: name, Message: name + ": cannot open shared object file"}}}
	}
}

// fakeVersion sets the fake's versions: NVRTC (with or without
// nvrtcGetSupportedArchs) or hipRTC (runtime 0: no hipRuntimeGetVersion).
func fakeVersion(major, minor, runtime int32, archs bool) {
	fakeMajor.Store(major)
	fakeMinor.Store(minor)
	fakeRuntime.Store(runtime)
	fakeArchs.Store(archs)
}
