package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestCompileUsageAndMissingCompiler(t *testing.T) {
	src := filepath.Join(t.TempDir(), "k.cu")
	os.WriteFile(src, []byte(`extern "C" __global__ void k() {}`), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"compile"}, exitUsage, "one source file"},
		{[]string{"compile", "--backend", "sim", src}, exitUsage, "--backend must be cuda or hip"},
		{[]string{"compile", "--arch", "volta", src}, exitUsage, "--arch"},
		{[]string{"compile", "--arch", "gfx90a", "--backend", "cuda", src}, exitUsage, "hip target"},
		{[]string{"compile", "--arch", "sm_80", "/nonexistent/k.cu"}, exitUsage, "no such file"},
		{[]string{"compile", "--arch", "sm_80", "--library", "/nonexistent/libnvrtc.so.12", src}, exitUsage, "/nonexistent/libnvrtc.so.12"},
		{[]string{"compile", "--arch", "gfx90a", "--library", "/nonexistent/libhiprtc.so.6", src}, exitUsage, "no hiprtc compiler library"},
		{[]string{"symbols", "--table", "lapack"}, exitUsage, "--table must be"},
		{[]string{"symbols", "--table", "nvrtc", "--backend", "hip"}, exitUsage, "nvrtc is cuda's"},
		{[]string{"symbols", "--table", "hiprtc", "--library", "/nonexistent/libhiprtc.so"}, exitUsage, "/nonexistent/libhiprtc.so"},
	} {
		code, _, stderr := runCLI(tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%v: exit %d (want %d), stderr %q (want %q)", tc.args, code, tc.code, stderr, tc.msg)
		}
	}
}

// With the real compilers (.ci/vendor-libs.sh): compile writes PTX or a
// code object, a compile error exits 1 with the log, an unknown target 2.
func TestCompileRealCompilers(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "saxpy.cu")
	os.WriteFile(src, []byte(`extern "C" __global__ void saxpy(float a, float* x) { x[threadIdx.x] *= a; }`), 0o644)
	bad := filepath.Join(dir, "bad.cu")
	os.WriteFile(bad, []byte("extern \"C\" __global__ void f() { int x = ; }\n"), 0o644)
	for _, v := range []struct{ env, arch, ext, marker, table string }{
		{"GPUMEM_TEST_NVRTC_LIBRARY", "sm_80", ".ptx", ".entry saxpy", "nvrtc"},
		{"GPUMEM_TEST_HIPRTC_LIBRARY", "gfx90a", ".co", "saxpy.kd", "hiprtc"},
	} {
		lib := os.Getenv(v.env)
		if lib == "" {
			t.Logf("%s not set: skipping %s", v.env, v.table)
			continue
		}
		code, stdout, stderr := runCLI("compile", "--library", lib, "--arch", v.arch, src)
		img, _ := os.ReadFile(strings.TrimSuffix(src, ".cu") + v.ext)
		if code != exitOK || !bytes.Contains(img, []byte(v.marker)) || !strings.Contains(stdout, v.arch) {
			t.Errorf("%s: exit %d, %q %q, image %d bytes", v.table, code, stdout, stderr, len(img))
		}
		code, _, stderr = runCLI("compile", "--library", lib, "--arch", v.arch, "-o", filepath.Join(dir, "bad.out"), bad)
		if code != exitFail || !strings.Contains(stderr, "bad.cu") || !strings.Contains(stderr, "expected") {
			t.Errorf("%s: malformed source: exit %d, %q", v.table, code, stderr)
		}
		code, stdout, _ = runCLI("symbols", "--table", v.table, "--library", lib, "--json")
		var rep struct {
			Backend         string `json:"backend"`
			Version         string `json:"version"`
			MissingRequired int    `json:"missing_required"`
		}
		if code != exitOK || json.Unmarshal([]byte(stdout), &rep) != nil || rep.Version == "" || rep.MissingRequired != 0 {
			t.Errorf("symbols --table %s: exit %d, %s", v.table, code, stdout)
		}
	}
	if lib := os.Getenv("GPUMEM_TEST_HIPRTC_LIBRARY"); lib != "" {
		code, _, stderr := runCLI("compile", "--library", lib, "--arch", "gfx942", src)
		if code != exitUsage || !strings.Contains(stderr, "does not support target gfx942") {
			t.Errorf("gfx942: exit %d, %q", code, stderr)
		}
	}
}

func TestInfoReportsCompiler(t *testing.T) {
	t.Setenv("GPUMEM_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so")
	code, stdout, _ := runCLI("info", "--backend", "cuda", "--library", "/nonexistent/libcuda.so.1", "--json")
	var rep struct {
		Compiler *compilerInfo `json:"compiler"`
	}
	if code != exitUsage || json.Unmarshal([]byte(stdout), &rep) != nil || rep.Compiler == nil ||
		rep.Compiler.Name != "nvrtc" || !strings.Contains(rep.Compiler.Error, "/nonexistent/libnvrtc.so") {
		t.Errorf("exit %d, %s", code, stdout)
	}
}

// --print-header prints the dialect header that Compile prepends, for
// offline compilers (scripts/gpu/run.sh builds a fatbin with nvcc from it).
func TestCompilePrintHeader(t *testing.T) {
	for backend, want := range map[string]string{"": "__shfl_down_sync", "cuda": "__shfl_down_sync", "hip": "__shfl_down("} {
		args := []string{"compile", "--print-header"}
		if backend != "" {
			args = append(args, "--backend", backend)
		}
		code, stdout, stderr := runCLI(args...)
		if code != 0 || !strings.Contains(stdout, "#define GPUMEM_SHFL_DOWN") || !strings.Contains(stdout, want) || stderr != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	if code, _, stderr := runCLI("compile", "--print-header", "k.cu"); code != exitUsage || !strings.Contains(stderr, "no source file") {
		t.Errorf("--print-header with a file: exit %d, %q", code, stderr)
	}
}
