package tests

// The vendor-runtime tier: the real libcuda.so.1 and libamdhip64.so from
// Debian's packages, on a machine with no GPU. .ci/vendor-libs.sh provisions
// them and prints the environment these tests read.

import (
	"errors"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/driver"
	"github.com/gpumem/gpumem/hip"
	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/dl"
)

// vendorLibrary returns the library named by env, skipping (and saying why)
// when it is unset, except under CI where the tier must run.
func vendorLibrary(t testing.TB, env string) string {
	t.Helper()
	lib := os.Getenv(env)
	if lib != "" {
		return lib
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not set under CI: run .ci/vendor-libs.sh DIR and eval its output", env)
	}
	t.Skipf("%s is not set: run .ci/vendor-libs.sh DIR (as root, Debian 12) and eval its output to test against the real library", env)
	return ""
}

func checkReport(t *testing.T, rep gpumem.SymbolReport, err error, backend string) {
	t.Helper()
	if err != nil {
		t.Fatalf("Symbols: %v", err)
	}
	t.Logf("%s %s version %s: %d rows", backend, rep.Library, rep.Version, len(rep.Rows))
	if rep.Backend != backend || rep.Version == "" || len(rep.Rows) == 0 {
		t.Fatalf("report incomplete: %+v", rep)
	}
	missing := 0
	for _, r := range rep.Rows {
		if r.Required && !r.Resolved {
			t.Errorf("required symbol %s (%s) not resolved", r.Symbol, r.Name)
			missing++
		}
		if !r.Resolved {
			t.Logf("optional symbol %s (%s) not exported", r.Symbol, r.Name)
		}
	}
	if rep.MissingRequired != missing || missing != 0 {
		t.Fatalf("missing_required = %d (counted %d)", rep.MissingRequired, missing)
	}
}

func TestVendorCUDASymbols(t *testing.T) {
	lib := vendorLibrary(t, "GPUMEM_TEST_CUDA_LIBRARY")
	rep, err := driver.Symbols(lib)
	checkReport(t, rep, err, "cuda")
	// The allocators' CUDA 12.2 symbols are the _v2 location-by-value forms.
	for _, r := range rep.Rows {
		if (r.Symbol == "cuMemAdvise_v2" || r.Symbol == "cuMemPrefetchAsync_v2") && !r.Resolved {
			t.Errorf("%s not resolved in a 12.2 driver", r.Symbol)
		}
	}
}

func TestVendorHIPSymbols(t *testing.T) {
	lib := vendorLibrary(t, "GPUMEM_TEST_HIP_LIBRARY")
	rep, err := hip.Symbols(lib)
	checkReport(t, rep, err, "hip")
}

func checkNoDevice(t *testing.T, err error, lib, backend string, code int, name string) {
	t.Helper()
	if err == nil {
		t.Fatal("Open succeeded on a machine expected to have no GPU")
	}
	if !errors.Is(err, gpumem.ErrNoDevice) {
		t.Fatalf("Open: %v, want an error matching ErrNoDevice", err)
	}
	if !strings.Contains(err.Error(), lib) {
		t.Fatalf("error does not name the library %s: %v", lib, err)
	}
	var ve *gpumem.Error
	if !errors.As(err, &ve) || ve.Backend != backend || ve.Code != code || ve.Name != name {
		t.Fatalf("error %v: vendor error %+v, want code %d named %s", err, ve, code, name)
	}
}

func TestVendorCUDAOpenNoDevice(t *testing.T) {
	lib := vendorLibrary(t, "GPUMEM_TEST_CUDA_LIBRARY")
	_, err := driver.Open(lib)
	checkNoDevice(t, err, lib, "cuda", 100, "CUDA_ERROR_NO_DEVICE")
	t.Setenv("GPUMEM_BACKEND", "cuda")
	t.Setenv("GPUMEM_CUDA_LIBRARY", lib)
	if _, err := gpumem.Open(gpumem.Options{}); !errors.Is(err, gpumem.ErrNoDevice) {
		t.Fatalf("gpumem.Open(cuda): %v", err)
	}
}

func TestVendorHIPOpenNoDevice(t *testing.T) {
	lib := vendorLibrary(t, "GPUMEM_TEST_HIP_LIBRARY")
	_, err := hip.Open(lib)
	checkNoDevice(t, err, lib, "hip", 100, "hipErrorNoDevice")
}

func TestVendorAutoNoDevice(t *testing.T) {
	cuda := vendorLibrary(t, "GPUMEM_TEST_CUDA_LIBRARY")
	hipLib := vendorLibrary(t, "GPUMEM_TEST_HIP_LIBRARY")
	t.Setenv("GPUMEM_BACKEND", "auto")
	t.Setenv("GPUMEM_CUDA_LIBRARY", cuda)
	t.Setenv("GPUMEM_HIP_LIBRARY", hipLib)
	_, err := gpumem.Open(gpumem.Options{})
	if !errors.Is(err, gpumem.ErrNoDevice) || errors.Is(err, gpumem.ErrLibraryNotFound) {
		t.Fatalf("auto: %v, want ErrNoDevice", err)
	}
	if !strings.Contains(err.Error(), cuda) || !strings.Contains(err.Error(), hipLib) {
		t.Fatalf("auto error does not name both libraries: %v", err)
	}
}

// The names come from the library: the project has no table of names, and
// codes it has never heard of are named too.
func TestVendorErrorNamesFromLibrary(t *testing.T) {
	t.Run("cuda", func(t *testing.T) {
		lib := vendorLibrary(t, "GPUMEM_TEST_CUDA_LIBRARY")
		for code, want := range map[int]string{
			2:   "CUDA_ERROR_OUT_OF_MEMORY",
			222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", // a code the backend does not translate
			999: "CUDA_ERROR_UNKNOWN",
		} {
			got, err := driver.ErrorName(lib, code)
			if err != nil || got != want {
				t.Errorf("cuGetErrorName(%d) = %q, %v; want %q", code, got, err, want)
			}
		}
		if got, err := driver.ErrorName(lib, 123456); err != nil || got != "" {
			t.Errorf("cuGetErrorName(123456) = %q, %v; want no name", got, err)
		}
	})
	t.Run("hip", func(t *testing.T) {
		lib := vendorLibrary(t, "GPUMEM_TEST_HIP_LIBRARY")
		for code, want := range map[int]string{
			2:   "hipErrorOutOfMemory",
			218: "hipErrorInvalidKernelFile", // a code the backend does not translate
		} {
			got, err := hip.ErrorName(lib, code)
			if err != nil || got != want {
				t.Errorf("hipGetErrorName(%d) = %q, %v; want %q", code, got, err, want)
			}
		}
	})
}

var benchVersion int32

// BenchmarkTrivialCall measures the per-call cost of a trivial driver call
// that works without a device (cuDriverGetVersion), through the project's
// call path and through purego.SyscallN.
func BenchmarkTrivialCall(b *testing.B) {
	lib := vendorLibrary(b, "GPUMEM_TEST_CUDA_LIBRARY")
	l, err := dl.Open(lib)
	if err != nil {
		b.Fatal(err)
	}
	fn, err := l.Sym("cuDriverGetVersion")
	if err != nil {
		b.Fatal(err)
	}
	v := &benchVersion // heap memory: the sub-benchmarks run on other goroutines
	p := uintptr(unsafe.Pointer(v))
	b.Run("ccall", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ccall.Call1(fn, p) != 0 {
				b.Fatal("cuDriverGetVersion failed")
			}
		}
	})
	b.Run("purego.SyscallN", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if r, _, _ := purego.SyscallN(fn, p); r != 0 {
				b.Fatal("cuDriverGetVersion failed")
			}
		}
	})
	if *v < 10000 {
		b.Fatalf("driver version %d", *v)
	}
}
