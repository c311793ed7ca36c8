package driver

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

// TestABIAgainstCUDAHeader compiles, against the cuda.h in
// GPUMEM_TEST_CUDA_INCLUDE (extracted from Debian's nvidia-cuda-dev by
// .ci/cuda-header.sh), a C program generated from ABI(v) for the header's
// CUDA_VERSION v, and checks that the compiler agrees with every layout and
// constant the backend uses for that version. It also checks the argument
// words (Args) of the driver table's CUDA column against the prototypes
// cuda.h declares, and of the RTC table's against nvrtc.h when the
// directory has it.
func TestABIAgainstCUDAHeader(t *testing.T) {
	inc := os.Getenv("GPUMEM_TEST_CUDA_INCLUDE")
	if inc == "" {
		t.Skip("GPUMEM_TEST_CUDA_INCLUDE is not set: .ci/cuda-header.sh DIR extracts cuda.h and runs this test")
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Fatal("no gcc to compile the header check: ", err)
	}
	v := cudaHeaderVersion(t, inc)
	layouts, consts := ABI(v)
	if len(layouts) == 0 || len(consts) == 0 {
		t.Fatalf("ABI(%d) is empty", v)
	}
	got := abitest.Compile(t, gcc, inc, "#include <cuda.h>\n", layouts, consts)
	bad := abitest.Compare(t, "cuda.h", got, layouts, consts)
	t.Logf("cuda.h CUDA_VERSION %d (%s): %d layouts and %d constants compared, %d differ",
		v, FormatVersion(v), len(layouts), len(consts), bad)
	abitest.CheckTable(t, gcc, inc, "#include <cuda.h>\n", "cuda.h", &symtab.Driver, symtab.CUDA)
	if _, err := os.Stat(filepath.Join(inc, "nvrtc.h")); err == nil {
		abitest.CheckTable(t, gcc, inc, "#include <nvrtc.h>\n", "nvrtc.h", &symtab.RTC, symtab.CUDA)
	} else {
		t.Logf("cuda.h: no nvrtc.h beside it: the NVRTC table's argument words are not checked")
	}
}

// TestABIVersions: the entries cuda.h gained after 11.8 are absent from
// ABI(11080) (the header check compiles only what ABI gives) and present from
// their version.
func TestABIVersions(t *testing.T) {
	for _, tc := range []struct {
		name string
		from int
	}{
		{"CU_GET_PROC_ADDRESS_SUCCESS", cuda120},
		{"CU_MEM_LOCATION_TYPE_HOST", cuda122},
	} {
		for _, v := range []int{11030, 11080, tc.from - 10, tc.from, 13000} {
			_, consts := ABI(v)
			if _, ok := consts[tc.name]; ok != (v >= tc.from) {
				t.Errorf("ABI(%d) has %s: %v, want %v", v, tc.name, ok, v >= tc.from)
			}
		}
	}
	for v, want := range map[int]string{11080: "reserved", 12000: "reserved", cuda122: "maxSize"} {
		layouts, _ := ABI(v)
		if _, ok := layouts["CUmemPoolProps"].Offsets[want]; !ok || layouts["CUmemPoolProps"].Offsets["reserved"] == 0 {
			t.Errorf("ABI(%d): CUmemPoolProps %v has no %s", v, layouts["CUmemPoolProps"], want)
		}
	}
}

// cudaHeaderVersion reads CUDA_VERSION (1000*major + 10*minor) from cuda.h.
func cudaHeaderVersion(t *testing.T, inc string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(inc, "cuda.h"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "#define" && f[1] == "CUDA_VERSION" {
			v, err := strconv.Atoi(f[2])
			if err != nil {
				t.Fatalf("cuda.h: CUDA_VERSION %q: %v", f[2], err)
			}
			return v
		}
	}
	t.Fatal("cuda.h defines no CUDA_VERSION")
	return 0
}

// TestSymbolsReportABI checks a `gpumem symbols --backend cuda --json`
// report (the file GPUMEM_TEST_CUDA_SYMBOLS_JSON, written by .ci/cuda-header.sh
// for the libcuda .ci/vendor-libs.sh provisions): every required symbol
// resolved, and the layouts and constants are ABI's for its version.
func TestSymbolsReportABI(t *testing.T) {
	path := os.Getenv("GPUMEM_TEST_CUDA_SYMBOLS_JSON")
	if path == "" {
		t.Skip("GPUMEM_TEST_CUDA_SYMBOLS_JSON is not set (.ci/cuda-header.sh sets it)")
	}
	checkReport(t, abitest.ReadReport(t, path))
}

// TestSymbolsABI: Symbols against the provisioned libcuda reports ABI's
// layouts and constants for its version.
func TestSymbolsABI(t *testing.T) {
	lib := os.Getenv("GPUMEM_TEST_CUDA_LIBRARY")
	if lib == "" {
		t.Skip("GPUMEM_TEST_CUDA_LIBRARY is not set: run .ci/vendor-libs.sh DIR")
	}
	rep, err := Symbols(lib)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep)
}

func checkReport(t *testing.T, rep gpumem.SymbolReport) {
	t.Helper()
	if rep.Backend != "cuda" {
		t.Fatalf("%s: a report of backend %q, not cuda", rep.Library, rep.Backend)
	}
	var major, minor int
	if _, err := fmt.Sscanf(rep.Version, "%d.%d", &major, &minor); err != nil {
		t.Fatalf("version %q: %v", rep.Version, err)
	}
	abitest.CheckReport(t, rep, 1000*major+10*minor, ABI)
}
