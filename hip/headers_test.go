package hip

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
	"github.com/gpumem/gpumem/internal/symtab/abitest"
)

// TestABIAgainstHeaders compiles, against the HIP headers in
// GPUMEM_TEST_HIP_INCLUDE (provisioned by .ci/vendor-libs.sh; .ci/rocm-versions.sh
// runs it once per ROCm version), a C program generated from ABI(v) for the
// headers' version v, and checks that the compiler agrees with every layout
// and constant the backend uses for that version. It also checks the
// argument words (Args) of the driver table's HIP column against the
// prototypes hip_runtime_api.h declares, and of the RTC table's against
// hip/hiprtc.h when the headers have it.
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
	got := abitest.Compile(t, gcc, inc, hipPrelude, layouts, consts)
	t.Logf("HIP headers %s (%d): %d layouts, %d constants", FormatVersion(v), v, len(layouts), len(consts))
	abitest.Compare(t, "headers", got, layouts, consts)
	abitest.CheckTable(t, gcc, inc, hipPrelude, "hip_runtime_api.h", &symtab.Driver, symtab.HIP)
	if _, err := os.Stat(filepath.Join(inc, "hip", "hiprtc.h")); err == nil {
		// hipRuntimeGetVersion, the RTC table's one runtime function, is
		// declared in hip_runtime_api.h.
		abitest.CheckTable(t, gcc, inc, hipPrelude+"#include <hip/hiprtc.h>\n", "hiprtc.h", &symtab.RTC, symtab.HIP)
	} else {
		t.Logf("HIP headers: no hip/hiprtc.h: the hipRTC table's argument words are not checked")
	}
}

// hipPrelude includes the HIP runtime's C API for AMD.
const hipPrelude = "#define __HIP_PLATFORM_AMD__ 1\n#include <hip/hip_runtime_api.h>\n"

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
	checkReport(t, abitest.ReadReport(t, path))
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
	var major, minor, patch int
	if _, err := fmt.Sscanf(rep.Version, "%d.%d.%d", &major, &minor, &patch); err != nil {
		t.Fatalf("version %q: %v", rep.Version, err)
	}
	abitest.CheckReport(t, rep, major*10000000+minor*100000+patch, ABI)
}
