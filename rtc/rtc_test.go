package rtc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

const saxpySrc = `extern "C" __global__ void saxpy(float a, const float* x, float* y, GPUMEM_SIZE_T n) {}`

func openFake(t *testing.T, backend string, opts ...Option) *Compiler {
	t.Helper()
	c, err := Open(backend, "fake.so", append([]Option{WithLoader(fakeLoader())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestCompileFakeNVRTC(t *testing.T) {
	fakeVersion(12, 4, 0, true)
	c := openFake(t, "cuda")
	if c.String() != "nvrtc 12.4" || c.Backend() != "cuda" || c.Library() != "fake.so" {
		t.Errorf("compiler %s backend %s library %s", c, c.Backend(), c.Library())
	}
	if ts, src := c.SupportedTargets(); strings.Join(ts, " ") != "sm_75 sm_80 sm_90" || src != "nvrtcGetSupportedArchs" {
		t.Errorf("targets %v from %s", ts, src)
	}
	res, err := c.Compile(context.Background(), Request{Source: saxpySrc, Name: "saxpy.cu", Target: "sm_90",
		NameExpressions: []string{"scale<float>"}})
	if err != nil {
		t.Fatal(err)
	}
	img := string(res.Image)
	if !strings.Contains(img, ".entry saxpy") || !strings.Contains(img, ".target compute_90") || strings.HasSuffix(img, "\x00") {
		t.Errorf("image %q", img)
	}
	if res.Target != "sm_90" || res.Compiler != "nvrtc 12.4" || res.Lowered["scale<float>"] != "_ZscaleIfloatE" || res.Cached {
		t.Errorf("result %+v", res)
	}
	// Target "" is the newest supported.
	res, err = c.Compile(context.Background(), Request{Source: saxpySrc})
	if err != nil || res.Target != "sm_90" {
		t.Errorf("default target: %v %v", res, err)
	}
}

func TestCompileErrorCarriesLog(t *testing.T) {
	fakeVersion(12, 4, 0, true)
	c := openFake(t, "cuda")
	_, err := c.Compile(context.Background(), Request{Source: "#error broken\n", Name: "bad.cu", Target: "sm_80"})
	var ce *CompileError
	if !errors.As(err, &ce) || !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Fatalf("err %v, want a *CompileError matching ErrInvalidValue", err)
	}
	if !strings.Contains(ce.Log, "bad.cu(3): error: #error directive") || ce.Target != "sm_80" || !strings.Contains(err.Error(), ce.Log) {
		t.Errorf("error %+v", ce)
	}
}

// ROCm 5.2's hipRTC aborts the process on a target it does not know: the
// refusal must come before any call into the compiler.
func TestUnknownTargetRefusedBeforeTheCompiler(t *testing.T) {
	fakeVersion(9, 0, 50221153, false) // what ROCm 5.2 answers
	c := openFake(t, "hip")
	if c.String() != "hiprtc 5.2" {
		t.Fatalf("compiler %s, want hiprtc 5.2 (from hipRuntimeGetVersion)", c)
	}
	creates, compiles := fakeCreates.Load(), fakeCompiles.Load()
	for _, tg := range []string{"gfx942", "gfx1100", "gfx1100:xnack-", "gfx940"} {
		_, err := c.Compile(context.Background(), Request{Source: saxpySrc, Target: tg})
		var te *TargetError
		if !errors.As(err, &te) || !errors.Is(err, gpumem.ErrNotSupported) {
			t.Errorf("%s: err %v, want a *TargetError matching ErrNotSupported", tg, err)
			continue
		}
		if !strings.Contains(err.Error(), "gfx90a") || te.Target != tg {
			t.Errorf("%s: %v", tg, err)
		}
	}
	if fakeCreates.Load() != creates || fakeCompiles.Load() != compiles {
		t.Errorf("the compiler was called for a refused target")
	}
	res, err := c.Compile(context.Background(), Request{Source: saxpySrc, Target: "gfx90a:xnack-"})
	if err != nil || !strings.Contains(string(res.Image), ".target gfx90a:xnack-") {
		t.Errorf("gfx90a: %v %v", res, err)
	}
	// The same table for NVRTC without nvrtcGetSupportedArchs.
	fakeVersion(11, 8, 0, false)
	nv := openFake(t, "cuda")
	if _, src := nv.SupportedTargets(); !strings.Contains(src, "table") {
		t.Errorf("NVRTC 11.8 without the query: targets from %s", src)
	}
	if err := nv.CheckTarget("sm_100"); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("sm_100 on NVRTC 11.8: %v", err)
	}
	// A compiler newer than the table is left to judge for itself.
	fakeVersion(8, 1, 80100000, false)
	if err := openFake(t, "hip").CheckTarget("gfx1300"); err != nil {
		t.Errorf("ROCm 8.1: %v", err)
	}
}

func TestMissingLibraryNamesEveryFile(t *testing.T) {
	t.Setenv(NVRTCLibraryEnv, "")
	_, err := Open("cuda", "", WithLoader(fakeLoader("none")))
	if !errors.Is(err, gpumem.ErrNotSupported) || !errors.Is(err, gpumem.ErrLibraryNotFound) {
		t.Fatalf("err %v", err)
	}
	for _, n := range NVRTCCandidates {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("error does not name %s: %v", n, err)
		}
	}
	_, err = Open("hip", "/nonexistent/libhiprtc.so.6")
	if !errors.Is(err, gpumem.ErrNotSupported) || !strings.Contains(err.Error(), "/nonexistent/libhiprtc.so.6") {
		t.Errorf("explicit path: %v", err)
	}
	t.Setenv(HIPRTCLibraryEnv, "/nonexistent/from-env.so")
	if _, err = Open("hip", ""); err == nil || !strings.Contains(err.Error(), "from-env.so") {
		t.Errorf("environment variable not used: %v", err)
	}
	if _, err = Open("sim", ""); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("sim: %v", err)
	}
}

func TestLibraryWithoutTheCompilerIsPassedOver(t *testing.T) {
	fakeVersion(6, 2, 0, false)
	noRTC := func(name string) (Library, error) {
		if name == "libamdhip64.so.5" {
			return &emptyLib{name}, nil
		}
		return fakeLoader("libamdhip64.so")(name)
	}
	c, err := Open("hip", "", WithLoader(noRTC))
	if err != nil || c.Library() != "libamdhip64.so" {
		t.Fatalf("%v %v", c, err)
	}
	_, err = Open("hip", "libamdhip64.so.5", WithLoader(noRTC))
	if !errors.Is(err, gpumem.ErrNotSupported) || !strings.Contains(err.Error(), "lacks required symbols hiprtcGetErrorString") {
		t.Errorf("%v", err)
	}
}

type emptyLib struct{ name string }

func (e *emptyLib) Path() string { return e.name }
func (e *emptyLib) Sym(name string) (uintptr, error) {
	return 0, fmt.Errorf("no %s: %w", name, gpumem.ErrNotSupported)
}
func (e *emptyLib) Close() error { return nil }

func TestRequestChecks(t *testing.T) {
	fakeVersion(12, 4, 0, true)
	c := openFake(t, "cuda")
	for _, req := range []Request{
		{Source: ""},
		{Source: "x\x00y"},
		{Source: saxpySrc, Options: []string{"--gpu-architecture=sm_80"}},
		{Source: saxpySrc, Options: []string{"-O3", "-arch=sm_80"}},
		{Source: saxpySrc, Options: []string{" --gpu-name=sm_80"}},
		{Source: saxpySrc, Options: []string{"--offload-arch=gfx90a"}},
		{Source: saxpySrc, Options: []string{"-offload-arch=gfx90a"}},
		{Source: saxpySrc, Options: []string{"--cuda-gpu-arch=gfx942"}},
		{Source: saxpySrc, Options: []string{"--amdgpu-target=gfx90a"}},
		{Source: saxpySrc, Options: []string{"-mcpu=gfx90a"}},
		{Source: saxpySrc, Target: "gfx90a"},
		{Source: saxpySrc, Target: "sm_9"},
		{Source: saxpySrc, Target: "volta"},
		{Source: saxpySrc, Name: "a\"b"},
	} {
		if _, err := c.Compile(context.Background(), req); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("%+v: err %v, want ErrInvalidValue", req, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Compile(ctx, Request{Source: saxpySrc}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	// A source compiled before Close is in the cache: after Close it is
	// refused all the same.
	if _, err := c.Compile(context.Background(), Request{Source: saxpySrc}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := c.Compile(context.Background(), Request{Source: saxpySrc + " "}); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	if _, err := c.Compile(context.Background(), Request{Source: saxpySrc}); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("after Close, a source in the cache: %v, want ErrClosed", err)
	}
}

func TestParseTarget(t *testing.T) {
	for in, want := range map[string]string{
		"sm_90": "sm_90 compute_90", "compute_80": "sm_80 compute_80", "SM_90A": "sm_90a compute_90a",
		"gfx90a": "gfx90a gfx90a", "gfx90a:xnack-": "gfx90a:xnack- gfx90a", "gfx1100": "gfx1100 gfx1100",
	} {
		tg, err := parseTarget(in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		opt := strings.TrimPrefix(tg.option(false), "--gpu-architecture=")
		if got := tg.name + " " + opt; got != want && !(tg.vendor == symtab.HIP && got == tg.name+" "+tg.name) {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
	for _, in := range []string{"", "sm_", "sm_x0", "gfx", "gfx90", "gfx90a:xnack", "hopper", "compute_90ab"} {
		if _, err := parseTarget(in); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("%q: %v", in, err)
		}
	}
	if b, _ := BackendOf("gfx942"); b != "hip" {
		t.Errorf("BackendOf(gfx942) = %s", b)
	}
}

func TestCache(t *testing.T) {
	fakeVersion(12, 4, 0, true)
	dir := t.TempDir()
	c := openFake(t, "cuda", WithCacheDir(dir))
	req := Request{Source: saxpySrc, Target: "sm_80"}
	compiles := fakeCompiles.Load()
	first, err := c.Compile(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	first.Image[0] = 'X' // the caller's copy is its own
	again, err := c.Compile(context.Background(), req)
	if err != nil || !again.Cached || again.Image[0] == 'X' {
		t.Fatalf("memory hit: %v %v", again, err)
	}
	if _, err := c.Compile(context.Background(), Request{Source: saxpySrc, Target: "sm_90"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compile(context.Background(), Request{Source: saxpySrc, Target: "sm_80", Options: []string{"-O3"}}); err != nil {
		t.Fatal(err)
	}
	if n := fakeCompiles.Load() - compiles; n != 3 {
		t.Errorf("%d compiles, want 3 (the other target and options miss)", n)
	}
	if s := c.CacheStats(); s.MemoryHits != 1 || s.Misses != 3 || s.DiskErrors != 0 {
		t.Errorf("stats %+v", s)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.rtc"))
	if len(files) != 3 {
		t.Fatalf("%d cache files, want 3", len(files))
	}

	// A second compiler finds the images on disk; a corrupt file is a miss
	// and is rewritten.
	c2 := openFake(t, "cuda", WithCacheDir(dir))
	res, err := c2.Compile(context.Background(), req)
	if err != nil || !res.Cached || !strings.Contains(string(res.Image), ".entry saxpy") {
		t.Fatalf("disk hit: %v %v", res, err)
	}
	for _, f := range files {
		if err := os.WriteFile(f, []byte(`{"format":"gpumem-rtc-1","image":"AAAA"`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c3 := openFake(t, "cuda", WithCacheDir(dir))
	compiles = fakeCompiles.Load()
	res, err = c3.Compile(context.Background(), req)
	if err != nil || res.Cached || fakeCompiles.Load() != compiles+1 {
		t.Fatalf("corrupt file: %v %v", res, err)
	}
	if s := c3.CacheStats(); s.DiskErrors != 1 || s.Misses != 1 {
		t.Errorf("stats %+v", s)
	}
	if res, err := openFake(t, "cuda", WithCacheDir(dir)).Compile(context.Background(), req); err != nil || !res.Cached {
		t.Errorf("rewritten file not read back: %v %v", res, err)
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, ".tmp-*")); len(tmp) != 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
}

func TestHeaderIsTheTable(t *testing.T) {
	for _, backend := range []string{"cuda", "hip"} {
		v, _ := vendorOf(backend)
		defs := map[string]string{}
		for _, line := range strings.Split(Header(backend), "\n") {
			if rest, ok := strings.CutPrefix(line, "#define "); ok && rest != "GPUMEM_DIALECT_H" {
				// The macro's name and parameters end at the first space after ')' or the name.
				name := rest
				if i := strings.Index(rest, ") "); i >= 0 && strings.Index(rest, "(") < strings.Index(rest, " ") {
					name = rest[:i+1]
				} else if i := strings.IndexByte(rest, ' '); i >= 0 {
					name = rest[:i]
				}
				defs[name] = strings.TrimPrefix(rest[len(name):], " ")
			}
		}
		want := 0
		for _, r := range symtab.Dialect {
			if r.Spelling[v] == "" {
				if _, ok := defs[r.Common]; ok {
					t.Errorf("%s defines %s", backend, r.Common)
				}
				continue
			}
			want++
			if defs[r.Common] != r.Spelling[v] {
				t.Errorf("%s: %s is %q, the table says %q", backend, r.Common, defs[r.Common], r.Spelling[v])
			}
		}
		if len(defs) != want {
			t.Errorf("%s: %d defines, the table has %d", backend, len(defs), want)
		}
	}
	if Header("sim") != "" || len(Dialect()) != len(symtab.Dialect) {
		t.Error("Header(sim) or Dialect()")
	}
}

func TestConcurrentCompiles(t *testing.T) {
	for _, backend := range []string{"cuda", "hip"} {
		fakeVersion(12, 4, 60200000, true)
		c := openFake(t, backend)
		target := map[string]string{"cuda": "sm_80", "hip": "gfx90a"}[backend]
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for i := 0; i < 64; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				src := fmt.Sprintf("extern \"C\" __global__ void k%d() {}", i%16)
				res, err := c.Compile(context.Background(), Request{Source: src, Target: target})
				if err == nil && !strings.Contains(string(res.Image), fmt.Sprintf(".entry k%d", i%16)) {
					err = fmt.Errorf("image %q", res.Image)
				}
				if err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("%s: %v", backend, err)
		}
	}
}

func TestSymbolsReport(t *testing.T) {
	fakeVersion(9, 0, 50221153, false)
	rep, err := Symbols("hiprtc", "fake.so", WithLoader(fakeLoader()))
	if err != nil || rep.Backend != "hip" || rep.Version != "5.2" || rep.MissingRequired != 0 || len(rep.Rows) != len(symtab.RTC.Column(symtab.HIP)) {
		t.Fatalf("%+v %v", rep, err)
	}
	rep, err = Symbols("cuda", "empty.so", WithLoader(func(n string) (Library, error) { return &emptyLib{n}, nil }))
	if err != nil || rep.MissingRequired == 0 || rep.Version != "" {
		t.Errorf("%+v %v", rep, err)
	}
}

// A target whose number has a sign is malformed, not a target to pass on.
func TestParseTargetSigns(t *testing.T) {
	for _, in := range []string{"sm_+90", "sm_-1", "compute_+80", "sm_-90a", "sm_9-0"} {
		if _, err := parseTarget(in); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("%q: %v, want ErrInvalidValue", in, err)
		}
	}
	// A compiler that supports whatever it is given (newer than the
	// table, no query) is not handed a malformed target either.
	fakeVersion(99, 0, 0, false)
	c := openFake(t, "cuda")
	compiles := fakeCompiles.Load()
	if _, err := c.Compile(context.Background(), Request{Source: saxpySrc, Target: "sm_+90"}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("sm_+90: %v, want ErrInvalidValue", err)
	}
	if fakeCompiles.Load() != compiles {
		t.Error("the compiler was called for a malformed target")
	}
}

// A compile that succeeds with no image is an error, and nothing is cached.
func TestEmptyImageIsAnError(t *testing.T) {
	for _, backend := range []string{"cuda", "hip"} {
		fakeVersion(12, 4, 60200000, true)
		c := openFake(t, backend, WithCacheDir(t.TempDir()))
		req := Request{Source: "// fake: no image\n" + saxpySrc}
		for i := 0; i < 2; i++ {
			res, err := c.Compile(context.Background(), req)
			if err == nil || !strings.Contains(err.Error(), "no image") {
				t.Errorf("%s: compile %d: %v, %v; want an error saying there is no image", backend, i, res, err)
			}
		}
		if s := c.CacheStats(); s.MemoryHits != 0 || s.DiskHits != 0 || s.Misses != 2 || s.DiskErrors != 0 {
			t.Errorf("%s: cache %+v: an empty image was cached", backend, s)
		}
	}
}

// Bad loader input: a nil Loader is the dynamic loader; a Loader that
// returns neither a library nor an error is a failed attempt, not a panic.
func TestLoaderInput(t *testing.T) {
	_, err := Open("hip", "/nonexistent/libhiprtc-nil-loader.so", WithLoader(nil))
	if !errors.Is(err, gpumem.ErrLibraryNotFound) || !strings.Contains(err.Error(), "libhiprtc-nil-loader.so") {
		t.Errorf("WithLoader(nil): %v", err)
	}
	none := func(string) (Library, error) { return nil, nil }
	_, err = Open("cuda", "x.so", WithLoader(none))
	if !errors.Is(err, gpumem.ErrLibraryNotFound) || !strings.Contains(err.Error(), "x.so") {
		t.Errorf("a loader returning nothing: %v", err)
	}
	if _, err := Symbols("cuda", "x.so", WithLoader(none)); !errors.Is(err, gpumem.ErrLibraryNotFound) {
		t.Errorf("Symbols with a loader returning nothing: %v", err)
	}
}

// A program name with a carriage return would end the #line directive
// early: it is refused before the compiler is called.
func TestProgramNameLineBreak(t *testing.T) {
	fakeVersion(12, 4, 0, true)
	c := openFake(t, "cuda")
	creates := fakeCreates.Load()
	if _, err := c.Compile(context.Background(), Request{Source: saxpySrc, Name: "a\rb.cu", Target: "sm_80"}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("name with \\r: %v, want ErrInvalidValue", err)
	}
	if fakeCreates.Load() != creates {
		t.Error("the compiler was called")
	}
}

// nilBackend is a gpumem.Backend that is a nil pointer.
type nilBackend struct{ gpumem.Backend }

func TestTargetOfNilPointer(t *testing.T) {
	var b *nilBackend
	if _, err := TargetOf(b, 0); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("TargetOf a nil *nilBackend: %v, want ErrInvalidValue", err)
	}
}

// Options that set the target are told apart from the others whatever
// their dashes; common options pass.
func TestTargetOption(t *testing.T) {
	for _, o := range []string{"-arch=sm_90", "-arch", "--gpu-architecture=compute_90", "--offload-arch=gfx942", "-offload-arch=gfx942", "--cuda-gpu-arch=gfx90a", "--amdgpu-target=gfx90a", "-mcpu=gfx90a", "--gpu-name=sm_90"} {
		if !targetOption(o) {
			t.Errorf("%q not seen as a target option", o)
		}
	}
	for _, o := range []string{"-O3", "--use_fast_math", "-DN=4", "-DARCH=90", "-std=c++17", "--fmad=false", "-lineinfo", "-I/usr/include/arch", "-default-device", "arch"} {
		if targetOption(o) {
			t.Errorf("%q taken for a target option", o)
		}
	}
}
