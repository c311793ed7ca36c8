package rtc

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/dl"
	"github.com/gpumem/gpumem/internal/symtab"
)

// Compiler names, as Compiler.Name gives them and the symbols command's
// --table takes them.
const (
	NVRTC  = "nvrtc"
	HIPRTC = "hiprtc"
)

// Candidate library names, in the order Open tries them when no library
// file is named. NVRTC's are those a driver installation or a CUDA wheel
// carries (11.2 through 13); hipRTC is inside libamdhip64 in ROCm 5 and its
// own libhiprtc from ROCm 6.
var (
	NVRTCCandidates  = []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"}
	HIPRTCCandidates = []string{"libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so", "libamdhip64.so.5", "libamdhip64.so"}
)

// Environment variables naming a compiler library file explicitly.
const (
	NVRTCLibraryEnv  = "GPUMEM_NVRTC_LIBRARY"
	HIPRTCLibraryEnv = "GPUMEM_HIPRTC_LIBRARY"
)

// Library is the seam between a Compiler and the dynamic loader: the real
// one is internal/dl's; tests give C-callable fakes. It is bind.Object, the
// interface of every bound library.
type Library = dl.Object

// Loader opens one library file (a bare soname or a path).
type Loader func(name string) (Library, error)

// DL is the Loader of real libraries.
func DL(name string) (Library, error) { return dl.Load(name) }

// Option configures Open.
type Option func(*config)

type config struct {
	load     Loader
	cacheDir string
}

// WithLoader opens libraries through l instead of the dynamic loader (nil:
// the dynamic loader).
func WithLoader(l Loader) Option {
	return func(c *config) {
		if l != nil {
			c.load = l
		}
	}
}

// WithCacheDir keeps compiled images on disk in dir (created if missing)
// besides in memory: one file per image, named by the SHA-256 of its key.
func WithCacheDir(dir string) Option { return func(c *config) { c.cacheDir = dir } }

// vendorOf maps a backend or compiler name to the table's vendor column.
func vendorOf(name string) (symtab.Vendor, bool) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "cuda", NVRTC:
		return symtab.CUDA, true
	case "hip", HIPRTC:
		return symtab.HIP, true
	}
	return 0, false
}

func candidates(v symtab.Vendor) []string {
	if v == symtab.CUDA {
		return NVRTCCandidates
	}
	return HIPRTCCandidates
}

func libraryEnv(v symtab.Vendor) string {
	if v == symtab.CUDA {
		return NVRTCLibraryEnv
	}
	return HIPRTCLibraryEnv
}

// Compiler is a loaded run-time compiler: NVRTC or hipRTC. It is safe for
// use from many goroutines.
type Compiler struct {
	vendor       symtab.Vendor
	lib          Library
	fns          [symtab.NumRTCOps]uintptr
	major, minor int
	supported    []string        // sorted; nil when no table row covers the version
	supportedSet map[string]bool // base targets
	supportedSrc string
	cache        *cache

	mu     sync.RWMutex // read-held by compiles, write-held by Close
	closed bool
	serial sync.Mutex // hipRTC: one compile at a time
}

// Open loads the compiler of backend ("cuda" or "nvrtc": NVRTC; "hip" or
// "hiprtc": hipRTC) from library, else from the file its environment
// variable names (GPUMEM_NVRTC_LIBRARY, GPUMEM_HIPRTC_LIBRARY), else from its
// candidate names. A library that loads but lacks the compiler's functions
// is passed over for the next candidate. When none will do, the error is a
// *LibraryError matching gpumem.ErrNotSupported and gpumem.ErrLibraryNotFound
// that names every file tried and why.
func Open(backend, library string, opts ...Option) (*Compiler, error) {
	v, ok := vendorOf(backend)
	if !ok {
		return nil, fmt.Errorf("rtc: no run-time compiler for backend %q (want cuda or hip): %w", backend, gpumem.ErrNotSupported)
	}
	cfg := config{load: DL}
	for _, o := range opts {
		o(&cfg)
	}
	c := &Compiler{vendor: v, cache: newCache(cfg.cacheDir)}
	lib, err := loadLibrary(v, library, cfg.load, func(lib Library) string {
		if missing := c.resolve(lib); len(missing) > 0 {
			return "lacks required symbols " + strings.Join(missing, ", ")
		}
		return ""
	})
	if err != nil {
		return nil, err
	}
	c.lib = lib
	if err := c.start(); err != nil {
		c.lib.Close()
		return nil, err
	}
	return c, nil
}

// loadLibrary opens the first of v's compiler libraries that accept takes:
// library, else the file v's environment variable names, else v's candidate
// names. accept returns why it refuses a library ("" to take it); a refused
// library is closed. When none is taken, the error is a *LibraryError naming
// every file tried and why.
func loadLibrary(v symtab.Vendor, library string, load Loader, accept func(Library) string) (Library, error) {
	if library == "" {
		library = getenv(libraryEnv(v))
	}
	cands := candidates(v)
	if library != "" {
		cands = []string{library}
	}
	var tried []gpumem.LoadAttempt
	for _, name := range cands {
		lib, err := load(name)
		if err == nil && lib == nil {
			err = fmt.Errorf("the loader returned no library and no error")
		}
		if err != nil {
			tried = append(tried, attemptsOf(name, err)...)
			continue
		}
		if why := accept(lib); why != "" {
			tried = append(tried, gpumem.LoadAttempt{Name: name, Message: why})
			lib.Close()
			continue
		}
		return lib, nil
	}
	return nil, &LibraryError{Compiler: symtab.RTCTableNames[v], Err: &gpumem.LoadError{Tried: tried}}
}

// attemptsOf turns a loader's error into load attempts: the loader's own
// list where it gives one.
func attemptsOf(name string, err error) []gpumem.LoadAttempt {
	if le, ok := err.(*gpumem.LoadError); ok && len(le.Tried) > 0 {
		return le.Tried
	}
	return []gpumem.LoadAttempt{{Name: name, Message: err.Error()}}
}

// resolve looks every row of the vendor's column up in lib and returns the
// required symbols it lacks.
func (c *Compiler) resolve(lib Library) (missing []string) {
	for i := range symtab.RTC.Rows {
		r := &symtab.RTC.Rows[i]
		c.fns[i] = 0
		sym := r.Symbol[c.vendor]
		if sym == "" {
			continue
		}
		if addr, err := lib.Sym(sym); err == nil {
			c.fns[i] = addr
		} else if r.Required[c.vendor] {
			missing = append(missing, sym)
		}
	}
	return missing
}

// start reads the version and the supported targets.
func (c *Compiler) start() error {
	major, minor, err := c.version()
	if err != nil {
		return fmt.Errorf("rtc: %s (%s): %w", c.Name(), c.lib.Path(), err)
	}
	c.major, c.minor = major, minor
	c.loadTargets()
	return nil
}

// Name is the compiler's name: "nvrtc" or "hiprtc".
func (c *Compiler) Name() string {
	if c == nil {
		return ""
	}
	return symtab.RTCTableNames[c.vendor]
}

// Backend is the backend whose devices run the compiler's images: "cuda" or "hip".
func (c *Compiler) Backend() string {
	if c == nil {
		return ""
	}
	return c.vendor.String()
}

// Library is the library file as it was opened.
func (c *Compiler) Library() string {
	if c == nil {
		return ""
	}
	return c.lib.Path()
}

// Version is the compiler's version as it reports it (nvrtcVersion,
// hiprtcVersion).
func (c *Compiler) Version() (major, minor int) {
	if c == nil {
		return 0, 0
	}
	return c.major, c.minor
}

// String is the compiler's name and version: "nvrtc 11.8".
func (c *Compiler) String() string {
	if c == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s %d.%d", c.Name(), c.major, c.minor)
}

// Close releases the library after the compiles in flight. Compiling after
// Close fails with an error matching gpumem.ErrClosed; closing twice is not
// an error.
func (c *Compiler) Close() error {
	if c == nil {
		return errNil("Close")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	return c.lib.Close()
}

// Request is one source to compile.
type Request struct {
	// Source is the kernel source, in CUDA's dialect or the common one
	// (see Header).
	Source string
	// Name is the program's name in the compiler's log ("saxpy.cu");
	// default "kernel.cu".
	Name string
	// Options are passed to the compiler as they are ("-O3",
	// "--use_fast_math", "-DN=4"); the target is not one of them.
	Options []string
	// Target is what to compile for: "sm_90", "compute_90", "sm_90a"
	// (NVRTC) or "gfx90a", "gfx90a:xnack-" (hipRTC). TargetOf names a
	// device's. Compile (the function) requires it; a Compiler's Compile
	// method defaults to the newest target it supports.
	Target string
	// NameExpressions are kernels to instantiate and name, for templated
	// kernels ("scale<float>"); Result.Lowered maps each to its mangled
	// name.
	NameExpressions []string
	// Binary asks NVRTC for a cubin (compiled for sm_XX) instead of PTX.
	// hipRTC always gives a code object.
	Binary bool
	// NoDialect compiles Source as it is, without the dialect header.
	NoDialect bool
}

// Result is a compiled image.
type Result struct {
	// Image is PTX text (NVRTC, without its NUL), a cubin (NVRTC with
	// Request.Binary) or an AMD GPU code object (hipRTC): what a module is
	// loaded from.
	Image []byte
	// Log is the compiler's log (warnings), often empty.
	Log string
	// Lowered maps each name expression to its mangled kernel name.
	Lowered map[string]string
	// Target is the target compiled for, normalised ("sm_90", "gfx90a").
	Target string
	// Compiler is the compiler's name and version, "nvrtc 11.8".
	Compiler string
	// Cached says the image came from the cache, not the compiler.
	Cached bool
}

// Compile compiles req for req.Target with the compiler of the target's
// vendor (sm_XX and compute_XX: NVRTC; gfxNNN: hipRTC), opened once for the
// process from the vendor's environment variable or candidate names.
//
// Errors: a source that does not compile is a *CompileError carrying the
// log (gpumem.ErrInvalidValue); a target the compiler does not support is a
// *TargetError (gpumem.ErrNotSupported), refused before the compiler is
// called; no compiler library is a *LibraryError (gpumem.ErrNotSupported).
func Compile(ctx context.Context, req Request) (*Result, error) {
	if req.Target == "" {
		return nil, fmt.Errorf("rtc: Compile needs a target (sm_90, gfx90a...; rtc.TargetOf names a device's): %w", gpumem.ErrInvalidValue)
	}
	v, err := vendorOfTarget(req.Target)
	if err != nil {
		return nil, err
	}
	c, err := defaultCompiler(v)
	if err != nil {
		return nil, err
	}
	return c.Compile(ctx, req)
}

var defaults struct {
	mu sync.Mutex
	c  [symtab.NumVendors]*Compiler
}

// defaultCompiler opens the vendor's compiler once for the process; a
// failure is not remembered (the library may be installed later).
func defaultCompiler(v symtab.Vendor) (*Compiler, error) {
	defaults.mu.Lock()
	defer defaults.mu.Unlock()
	if c := defaults.c[v]; c != nil {
		return c, nil
	}
	c, err := Open(v.String(), "")
	if err != nil {
		return nil, err
	}
	defaults.c[v] = c
	return c, nil
}

// Compile compiles req (see the package function Compile for the errors).
// An empty req.Target means the newest target the compiler supports. The
// context is checked before compiling: a compile, once started, runs to its
// end.
func (c *Compiler) Compile(ctx context.Context, req Request) (*Result, error) {
	if c == nil {
		return nil, errNil("Compile")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkRequest(&req); err != nil {
		return nil, err
	}
	t, err := c.target(req.Target)
	if err != nil {
		return nil, err
	}
	if req.Binary && c.vendor == symtab.CUDA && (c.fns[symtab.RTCGetCUBIN] == 0 || c.fns[symtab.RTCGetCUBINSize] == 0) {
		return nil, &gpumem.NotSupportedError{Backend: "cuda", Op: "rtc cubin", Reason: c.String() + " has no nvrtcGetCUBIN (NVRTC 11.1+)"}
	}
	src := req.Source
	if !req.NoDialect {
		src = Header(c.Backend()) + "#line 1 \"" + req.Name + "\"\n" + req.Source
	}
	opts := append([]string{t.option(req.Binary)}, req.Options...)
	key := cacheKey(c.String(), c.Backend(), t.name, req.Binary, opts, req.NameExpressions, src)
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return nil, fmt.Errorf("rtc: %s: compiler closed: %w", c, gpumem.ErrClosed)
	}
	if res, ok := c.cache.get(key); ok {
		return res, nil
	}
	if c.vendor == symtab.HIP {
		c.serial.Lock()
		defer c.serial.Unlock()
	}
	out, err := c.compile(src, req.Name, opts, req.NameExpressions, req.Binary && c.vendor == symtab.CUDA)
	if err != nil {
		if ce, ok := err.(*CompileError); ok {
			ce.Target = t.name
		}
		return nil, err
	}
	res := &Result{Image: out.image, Log: out.log, Lowered: out.lowered, Target: t.name, Compiler: c.String()}
	c.cache.put(key, res)
	return res, nil
}

// checkRequest fills defaults and refuses what no compiler should see.
func checkRequest(req *Request) error {
	if req.Name == "" {
		req.Name = "kernel.cu"
	}
	if strings.TrimSpace(req.Source) == "" {
		return fmt.Errorf("rtc: %s: empty source: %w", req.Name, gpumem.ErrInvalidValue)
	}
	strs := append([]string{req.Source, req.Name}, req.Options...)
	for _, s := range append(strs, req.NameExpressions...) {
		if strings.IndexByte(s, 0) >= 0 {
			return fmt.Errorf("rtc: %s: a NUL byte in the source, name, options or name expressions: %w", req.Name, gpumem.ErrInvalidValue)
		}
	}
	if strings.ContainsAny(req.Name, "\"\n\r\\") {
		return fmt.Errorf("rtc: program name %q has a quote, backslash or line break: %w", req.Name, gpumem.ErrInvalidValue)
	}
	for _, o := range req.Options {
		if targetOption(o) {
			return fmt.Errorf("rtc: option %q: the target goes in Request.Target: %w", o, gpumem.ErrInvalidValue)
		}
	}
	return nil
}

// targetOptions name the compilers' target options, without their dashes:
// NVRTC's (-arch, --gpu-architecture, --gpu-name) and the clang spellings
// hipRTC accepts (--offload-arch, its alias --cuda-gpu-arch, the older
// --amdgpu-target, -mcpu).
var targetOptions = []string{"arch", "gpu-architecture", "gpu-name", "offload-arch", "cuda-gpu-arch", "amdgpu-target", "mcpu"}

// targetOption reports whether compiler option o sets the target, with one
// dash or two, its value joined by "=" or not.
func targetOption(o string) bool {
	name, ok := strings.CutPrefix(strings.TrimSpace(o), "-")
	if !ok {
		return false
	}
	name = strings.TrimPrefix(name, "-")
	for _, t := range targetOptions {
		if strings.HasPrefix(name, t) {
			return true
		}
	}
	return false
}

// getenv is os.Getenv, replaceable by tests.
var getenv = os.Getenv
