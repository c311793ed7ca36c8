package tests

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/driver"
	"github.com/gpumem/gpumem/hip"
	"github.com/gpumem/gpumem/internal/symtab"
)

// kernelSymbols are the kernel rows of the driver table (modules,
// functions, launches, occupancy) that name a symbol of the vendor's.
func kernelSymbols(v symtab.Vendor) []symtab.Row {
	var out []symtab.Row
	for op := symtab.ModuleLoadData; op <= symtab.OccupancyMaxPotentialBlockSize; op++ {
		if symtab.Driver.Rows[op].Symbol[v] != "" {
			out = append(out, symtab.Driver.Rows[op])
		}
	}
	return out
}

// libraryVersion reads a report's "major.minor" as the vendor numbers
// versions (1000*major + 10*minor), or 0.
func libraryVersion(rep gpumem.SymbolReport) int {
	var major, minor int
	if _, err := fmt.Sscanf(rep.Version, "%d.%d", &major, &minor); err != nil {
		return 0
	}
	return 1000*major + 10*minor
}

func checkKernelRows(t *testing.T, rep gpumem.SymbolReport, err error, v symtab.Vendor) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	resolved := map[string]gpumem.SymbolRow{}
	for _, r := range rep.Rows {
		resolved[r.Symbol] = r
	}
	have := libraryVersion(rep)
	for _, row := range kernelSymbols(v) {
		s := row.Symbol[v]
		r, ok := resolved[s]
		switch {
		case !ok:
			t.Errorf("%s is not in the report", s)
		case r.Required:
			t.Errorf("%s is required; kernel rows are optional so that old libraries open", s)
		case !r.Resolved && have > 0 && row.ABI[v] > have:
			t.Logf("%s is newer (%d) than %s %s: not exported, as expected", s, row.ABI[v], rep.Library, rep.Version)
		case !r.Resolved:
			t.Errorf("%s is not exported by %s %s", s, rep.Library, rep.Version)
		default:
			t.Logf("%s resolved (%s)", s, r.Name)
		}
	}
}

// TestVendorCUDAKernelSymbols: the 535 driver (CUDA 12.2) exports every
// kernel symbol of its version, the library API's (12.0+) included; the
// newer cuFuncGetParamInfo (12.4) it does not.
func TestVendorCUDAKernelSymbols(t *testing.T) {
	lib := vendorLibrary(t, "GPUMEM_TEST_CUDA_LIBRARY")
	rep, err := driver.Symbols(lib)
	checkKernelRows(t, rep, err, symtab.CUDA)
}

// TestVendorHIPKernelSymbols: HIP 5.2 exports the module API, the module
// launch and the module occupancy functions. It has no counterpart of
// cuFuncSetAttribute for a hipFunction_t (the backend checks the limit
// itself) and no library API (CUDA only).
func TestVendorHIPKernelSymbols(t *testing.T) {
	lib := vendorLibrary(t, "GPUMEM_TEST_HIP_LIBRARY")
	rep, err := hip.Symbols(lib)
	checkKernelRows(t, rep, err, symtab.HIP)
}

// TestVendorKernelsWithoutDevice: with no device, Open fails as before and
// nothing in the kernel path is reached.
func TestVendorKernelsWithoutDevice(t *testing.T) {
	lib := vendorLibrary(t, "GPUMEM_TEST_CUDA_LIBRARY")
	b, err := driver.Open(lib)
	if err == nil {
		defer b.Close()
		t.Skip("a device is present: the GPU tier covers kernels")
	}
	if !errors.Is(err, gpumem.ErrNoDevice) {
		t.Fatalf("Open = %v, want ErrNoDevice", err)
	}
}
