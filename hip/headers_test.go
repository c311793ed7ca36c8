package hip

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// TestABIAgainstHeaders compiles, against the HIP headers in
// GPUMEM_TEST_HIP_INCLUDE (provisioned by .ci/vendor-libs.sh; .ci/rocm-versions.sh
// runs it once per ROCm version), a C program generated from ABI(v) for the
// headers' version v, and checks that the compiler agrees with every layout
// and constant the backend uses for that version.
func TestABIAgainstHeaders(t *testing.T) {
	inc := os.Getenv("GPUMEM_TEST_HIP_INCLUDE")
	gcc, gccErr := exec.LookPath("gcc")
	switch {
	case inc != "" && gccErr == nil:
	case os.Getenv("CI") == "true":
		t.Fatalf("under CI the HIP header check must run: GPUMEM_TEST_HIP_INCLUDE=%q, gcc: %v", inc, gccErr)
	case inc == "":
		t.Skip("GPUMEM_TEST_HIP_INCLUDE is not set: run .ci/vendor-libs.sh DIR to extract the HIP headers")
	default:
		t.Skip("no gcc to compile the header check: ", gccErr)
	}
	v := headerVersion(t, inc)
	layouts, consts := ABI(v)
	got := compileABI(t, gcc, inc, "#define __HIP_PLATFORM_AMD__ 1\n#include <hip/hip_runtime_api.h>\n", layouts, consts)
	t.Logf("HIP headers %s (%d): %d layouts, %d constants", FormatVersion(v), v, len(layouts), len(consts))
	if !reflect.DeepEqual(got.Layouts, layouts) {
		for name, l := range layouts {
			if !reflect.DeepEqual(got.Layouts[name], l) {
				t.Errorf("%s: headers say %+v, backend uses %+v", name, got.Layouts[name], l)
			}
		}
	}
	for name, c := range consts {
		if g, ok := got.Constants[name]; !ok || g != c {
			t.Errorf("%s: headers say %d, backend uses %d", name, g, c)
		}
	}
}

// abiDump is the C program's output, in SymbolReport's shape.
type abiDump struct {
	Layouts   map[string]gpumem.StructLayout `json:"layouts"`
	Constants map[string]int64               `json:"constants"`
}

func compileABI(t *testing.T, gcc, inc, prelude string, layouts map[string]gpumem.StructLayout, consts map[string]int64) abiDump {
	t.Helper()
	dir := t.TempDir()
	c := filepath.Join(dir, "abi.c")
	if err := os.WriteFile(c, []byte(symtab.ABIProgram(prelude, layouts, consts)), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "abi")
	if out, err := exec.Command(gcc, "-I", inc, "-o", bin, c).CombinedOutput(); err != nil {
		t.Fatalf("compiling the ABI dump: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if d := os.Getenv("GPUMEM_TEST_ABI_DUMP"); d != "" {
		_ = os.WriteFile(d, out, 0o644)
	}
	var got abiDump
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("reading the ABI dump: %v\n%s", err, out)
	}
	return got
}

func headerVersion(t *testing.T, inc string) int {
	b, err := os.ReadFile(filepath.Join(inc, "hip", "hip_version.h"))
	if err != nil {
		t.Fatal(err)
	}
	var major, minor, patch int
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 && f[0] == "#define" {
			n, _ := strconv.Atoi(f[2])
			switch f[1] {
			case "HIP_VERSION_MAJOR":
				major = n
			case "HIP_VERSION_MINOR":
				minor = n
			case "HIP_VERSION_PATCH":
				patch = n
			}
		}
	}
	return major*10000000 + minor*100000 + patch
}

func TestSentinels(t *testing.T) {
	for code, want := range map[int]error{2: gpumem.ErrOutOfMemory, 100: gpumem.ErrNoDevice, 801: gpumem.ErrNotSupported,
		1: gpumem.ErrInvalidValue, 400: gpumem.ErrInvalidValue, 101: gpumem.ErrInvalidValue, 999: nil,
		900: gpumem.ErrInvalidValue, 901: gpumem.ErrInvalidValue, 908: gpumem.ErrInvalidValue, 909: nil} {
		if got := symtab.Statuses[symtab.HIP].Sentinel(code, false); got != want {
			t.Errorf("sentinel(%d) = %v, want %v", code, got, want)
		}
	}
}

// TestSymbolsReportABI checks a `gpumem symbols --backend hip --json` report
// (the file GPUMEM_TEST_SYMBOLS_JSON, written by .ci/rocm-versions.sh for a
// runtime loaded through its own suite's C library): every required symbol
// resolved, and the layouts and constants are ABI's for its version.
func TestSymbolsReportABI(t *testing.T) {
	path := os.Getenv("GPUMEM_TEST_SYMBOLS_JSON")
	if path == "" {
		t.Skip("GPUMEM_TEST_SYMBOLS_JSON is not set (.ci/rocm-versions.sh sets it)")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep gpumem.SymbolReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep)
}

// TestSymbolsABI: Symbols against the provisioned runtime reports ABI's
// layouts and constants for its version.
func TestSymbolsABI(t *testing.T) {
	lib := os.Getenv("GPUMEM_TEST_HIP_LIBRARY")
	if lib == "" {
		t.Skip("GPUMEM_TEST_HIP_LIBRARY is not set: run .ci/vendor-libs.sh DIR")
	}
	rep, err := Symbols(lib)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep)
}

func checkReport(t *testing.T, rep gpumem.SymbolReport) {
	t.Helper()
	if rep.MissingRequired != 0 {
		t.Errorf("%s: %d required symbols missing", rep.Library, rep.MissingRequired)
	}
	var major, minor, patch int
	if _, err := fmt.Sscanf(rep.Version, "%d.%d.%d", &major, &minor, &patch); err != nil {
		t.Fatalf("version %q: %v", rep.Version, err)
	}
	v := major*10000000 + minor*100000 + patch
	layouts, consts := ABI(v)
	if !reflect.DeepEqual(rep.Layouts, layouts) || !reflect.DeepEqual(rep.Constants, consts) {
		t.Errorf("%s (%s): the report's layouts and constants are not ABI(%d)'s:\n%v\n%v", rep.Library, rep.Version, v, rep.Layouts, layouts)
	}
	if len(layouts) == 0 || len(consts) == 0 {
		t.Errorf("ABI(%d) is empty", v)
	}
}
