package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/rtc"
)

const compileUsage = "usage: gpumem compile [--backend cuda|hip] [--library PATH] [--arch TARGET] [-o OUT] FILE\n" +
	"       gpumem compile --print-header [--backend cuda|hip]\n"

// defaultTargets are the targets compile uses when --arch is not given and
// no device opens: an A100 and an MI200 (docs/cli.md).
var defaultTargets = map[string]string{"cuda": "sm_80", "hip": "gfx90a"}

// rtcLoader is the compiler loader; tests replace it with fakes.
var rtcLoader rtc.Loader = rtc.DL

func cmdCompile(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("compile", compileUsage, stdout, stderr)
	backend := fs.String("backend", "", "cuda (NVRTC, PTX) or hip (hipRTC, code object); default: from --arch, else the GPU backend that opens, else the first compiler found")
	library := fs.String("library", "", "compiler library file (default: GPUMEM_NVRTC_LIBRARY / GPUMEM_HIPRTC_LIBRARY, else the usual names)")
	arch := fs.String("arch", "", "target: sm_XX, compute_XX or gfxNNN (default: device 0's, else sm_80 / gfx90a)")
	out := fs.String("o", "", "output file (default: FILE with .ptx or .co)")
	printHeader := fs.Bool("print-header", false, "print the dialect header (default for cuda) that Compile prepends, for offline compilers such as nvcc -include, and exit")
	pos, code, ok := parseCommand(fs, args)
	if !ok {
		return code
	}
	if *printHeader {
		if len(pos) != 0 {
			return fail(stderr, compileUsage, usagef("--print-header takes no source file"))
		}
		h := rtc.Header(*backend)
		if *backend == "" {
			h = rtc.Header("cuda")
		}
		if h == "" {
			return fail(stderr, compileUsage, usagef("--backend must be cuda or hip (got %q)", *backend))
		}
		fmt.Fprint(stdout, h)
		return 0
	}
	if len(pos) != 1 {
		return fail(stderr, compileUsage, usagef("compile takes one source file (got %d)", len(pos)))
	}
	if *backend != "" && *backend != "cuda" && *backend != "hip" {
		return fail(stderr, compileUsage, usagef("--backend must be cuda or hip (got %q)", *backend))
	}
	target := *arch
	if target != "" {
		b, err := rtc.BackendOf(target)
		if err != nil {
			return fail(stderr, compileUsage, usagef("--arch: %v", err))
		}
		if *backend != "" && *backend != b {
			return fail(stderr, compileUsage, usagef("--arch %s is a %s target, not %s", target, b, *backend))
		}
		*backend = b
	}
	src, err := os.ReadFile(pos[0])
	if err != nil {
		return fail(stderr, compileUsage, usagef("%v", err))
	}
	c, err := openCompiler(*backend, *library)
	if err != nil {
		fmt.Fprintf(stderr, "gpumem: compile: %v\n", err)
		return exitUsage
	}
	defer c.Close()
	if target == "" {
		target = deviceTarget(c.Backend())
		if target == "" {
			target = defaultTargets[c.Backend()]
			fmt.Fprintf(stderr, "gpumem: compile: no %s device: compiling for %s (choose with --arch)\n", c.Backend(), target)
		}
	}
	res, err := c.Compile(context.Background(), rtc.Request{Source: string(src), Name: filepath.Base(pos[0]), Target: target})
	var ce *rtc.CompileError
	switch {
	case errors.As(err, &ce):
		fmt.Fprintf(stderr, "gpumem: compile: %s does not compile for %s with %s:\n%s\n", pos[0], ce.Target, ce.Compiler, strings.TrimRight(ce.Log, "\n"))
		return exitFail
	case errors.Is(err, gpumem.ErrNotSupported), errors.Is(err, gpumem.ErrInvalidValue):
		fmt.Fprintf(stderr, "gpumem: compile: %v\n", err)
		return exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "gpumem: compile: %v\n", err)
		return exitFail
	}
	dst := *out
	if dst == "" {
		ext := ".ptx"
		if c.Backend() == "hip" {
			ext = ".co"
		}
		dst = strings.TrimSuffix(pos[0], filepath.Ext(pos[0])) + ext
	}
	if err := os.WriteFile(dst, res.Image, 0o644); err != nil {
		fmt.Fprintf(stderr, "gpumem: compile: %v\n", err)
		return exitFail
	}
	if res.Log != "" {
		fmt.Fprintln(stderr, strings.TrimRight(res.Log, "\n"))
	}
	fmt.Fprintf(stdout, "%s: %s for %s with %s (%d bytes)\n", dst, map[string]string{"cuda": "PTX", "hip": "code object"}[c.Backend()], res.Target, res.Compiler, len(res.Image))
	return exitOK
}

// openCompiler opens the backend's compiler, or with no backend NVRTC then
// hipRTC; the error names every file tried.
func openCompiler(backend, library string) (*rtc.Compiler, error) {
	if backend != "" {
		return rtc.Open(backend, library, rtc.WithLoader(rtcLoader))
	}
	if library != "" {
		return nil, usagef("--library needs --backend or --arch")
	}
	var errs []error
	for _, b := range []string{"cuda", "hip"} {
		c, err := rtc.Open(b, "", rtc.WithLoader(rtcLoader))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// deviceTarget is device 0's target on the backend, "" when none opens.
func deviceTarget(backend string) string {
	if os.Getenv("GPUMEM_COMPILE_NO_DEVICE") != "" {
		return ""
	}
	b, err := gpumem.Open(gpumem.Options{Backend: backend})
	if err != nil {
		return ""
	}
	defer b.Close()
	t, err := rtc.TargetOf(b, 0)
	if err != nil {
		return ""
	}
	return t
}

// symbolsRTC is symbols --table nvrtc|hiprtc: the compiler's table against
// its library.
func symbolsRTC(table, backend, library string, asJSON bool, stdout, stderr io.Writer) int {
	want := map[string]string{rtc.NVRTC: "cuda", rtc.HIPRTC: "hip"}[table]
	if backend != "" && backend != want {
		return fail(stderr, symbolsUsage, usagef("--table %s is %s's, not %s", table, want, backend))
	}
	rep, err := rtc.Symbols(want, library, rtc.WithLoader(rtcLoader))
	if err != nil {
		fmt.Fprintf(stderr, "gpumem: symbols: %v\n", err)
		return exitUsage
	}
	return writeSymbols(stdout, stderr, rep, asJSON)
}

// compilerInfo is info's report of the run-time compiler.
type compilerInfo struct {
	Name    string `json:"name"`
	Library string `json:"library,omitempty"`
	Version string `json:"version,omitempty"`
	Error   string `json:"error,omitempty"`
}

// findCompiler reports the backend's compiler (cuda: NVRTC, hip: hipRTC),
// or for any other backend the first found of the two; nil for the
// simulator.
func findCompiler(backend string) *compilerInfo {
	var order []string
	switch backend {
	case "sim":
		return nil
	case "cuda", "hip":
		order = []string{backend}
	default:
		order = []string{"cuda", "hip"}
	}
	var info *compilerInfo
	for _, b := range order {
		c, err := rtc.Open(b, "", rtc.WithLoader(rtcLoader))
		if err == nil {
			major, minor := c.Version()
			defer c.Close()
			return &compilerInfo{Name: c.Name(), Library: c.Library(), Version: fmt.Sprintf("%d.%d", major, minor)}
		}
		if info == nil {
			info = &compilerInfo{Name: map[string]string{"cuda": rtc.NVRTC, "hip": rtc.HIPRTC}[b], Error: err.Error()}
		}
	}
	return info
}
