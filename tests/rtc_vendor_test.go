package tests

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/kernels"
	"github.com/gpumem/gpumem/rtc"
)

// The real run-time compilers from Debian's packages (no GPU needed):
// GPUMEM_TEST_NVRTC_LIBRARY (libnvrtc11.2, extracted) and
// GPUMEM_TEST_HIPRTC_LIBRARY (libamdhip64-5 with its comgr), set by
// .ci/vendor-libs.sh.
func openRTC(t *testing.T, backend, env string) *rtc.Compiler {
	t.Helper()
	lib := os.Getenv(env)
	if lib == "" {
		t.Skipf("%s is not set (.ci/vendor-libs.sh provides it)", env)
	}
	c, err := rtc.Open(backend, lib)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	t.Logf("%s from %s", c, c.Library())
	return c
}

// entries are the kernel names an image defines: PTX's .entry lines, a code
// object's ELF symbols with their .kd descriptors.
func entries(t *testing.T, backend string, img []byte) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	if backend == "cuda" {
		for _, line := range strings.Split(string(img), "\n") {
			if _, rest, ok := strings.Cut(line, ".entry "); ok { // .visible, or .weak for templates
				out[strings.TrimSpace(strings.SplitN(rest, "(", 2)[0])] = true
			}
		}
		return out
	}
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		t.Fatalf("code object is not ELF: %v", err)
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range syms {
		names[s.Name] = true
	}
	for n := range names {
		if names[n+".kd"] {
			out[n] = true
		}
	}
	return out
}

func TestRTCVendorKernels(t *testing.T) {
	for _, v := range []struct {
		backend, env string
		targets      []string
	}{
		{"cuda", "GPUMEM_TEST_NVRTC_LIBRARY", []string{"sm_80", "sm_90"}},
		{"hip", "GPUMEM_TEST_HIPRTC_LIBRARY", []string{"gfx908", "gfx90a"}},
	} {
		t.Run(v.backend, func(t *testing.T) {
			c := openRTC(t, v.backend, v.env)
			for _, target := range v.targets {
				for _, k := range kernels.All() {
					res, err := c.Compile(context.Background(), k.Request(target))
					if err != nil {
						t.Errorf("%s for %s: %v", k.File, target, err)
						continue
					}
					want := append([]string(nil), k.Names...)
					for _, e := range k.NameExpressions {
						want = append(want, res.Lowered[e])
					}
					got := entries(t, v.backend, res.Image)
					for _, n := range want {
						if n == "" || !got[n] {
							t.Errorf("%s for %s: image lacks kernel %q (has %v)", k.File, target, n, got)
						}
					}
					if v.backend == "cuda" && !strings.Contains(string(res.Image), ".target "+target) {
						t.Errorf("%s: PTX not for %s", k.File, target)
					}
				}
			}
			_, err := c.Compile(context.Background(), rtc.Request{Source: "extern \"C\" __global__ void f() { int x = ; }", Name: "bad.cu", Target: v.targets[0]})
			var ce *rtc.CompileError
			if !errors.As(err, &ce) || !strings.Contains(ce.Log, "bad.cu") || !strings.Contains(ce.Log, "expected") {
				t.Errorf("malformed source: %v", err)
			}
		})
	}
}

// ROCm 5.2's hipRTC aborts the process on gfx942 and gfx1100: gpumem
// refuses them first (this test would not return otherwise).
func TestRTCVendorHipRTCRefusesUnknownTargets(t *testing.T) {
	c := openRTC(t, "hip", "GPUMEM_TEST_HIPRTC_LIBRARY")
	if major, minor := c.Version(); major != 5 || minor > 2 {
		t.Skipf("%s: the abort is ROCm 5.2's", c)
	}
	for _, target := range []string{"gfx942", "gfx1100"} {
		_, err := c.Compile(context.Background(), kernels.Saxpy.Request(target))
		var te *rtc.TargetError
		if !errors.As(err, &te) || !errors.Is(err, gpumem.ErrNotSupported) {
			t.Errorf("%s: %v", target, err)
		}
	}
}

// The targets table's row for the NVRTC found agrees with what that NVRTC says.
func TestRTCVendorNVRTCTargetsTable(t *testing.T) {
	c := openRTC(t, "cuda", "GPUMEM_TEST_NVRTC_LIBRARY")
	got, src := c.SupportedTargets()
	major, minor := c.Version()
	ver := strconv.Itoa(major) + "." + strconv.Itoa(minor)
	for _, r := range rtc.Targets() {
		if r.Compiler == "nvrtc" && r.From <= ver && ver <= r.To && len(r.From) == len(ver) {
			if strings.Join(r.Targets, " ") != strings.Join(got, " ") {
				t.Errorf("table row %s-%s: %v; %s says %v", r.From, r.To, r.Targets, src, got)
			}
		}
	}
}

func TestRTCVendorMissingLibrary(t *testing.T) {
	_, err := rtc.Open("cuda", "/nonexistent/libnvrtc.so.12")
	if !errors.Is(err, gpumem.ErrNotSupported) || !strings.Contains(err.Error(), "/nonexistent/libnvrtc.so.12") {
		t.Errorf("%v", err)
	}
}
