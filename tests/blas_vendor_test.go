package tests

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/bind"
	"github.com/gpumem/gpumem/blas"
	"github.com/gpumem/gpumem/driver"
	"github.com/gpumem/gpumem/hip"
)

// The BLAS binding against the real libraries from Debian's packages (no
// GPU needed), set by .ci/libs-blas.sh: GPUMEM_TEST_CUBLAS_LIBRARY
// (libcublas.so.11), GPUMEM_TEST_HIPBLAS_LIBRARY and
// GPUMEM_TEST_ROCBLAS_LIBRARY (ROCm 5.5's or 6.4's, run through their
// suite's ld.so). Each library: every required symbol of its table
// resolves, the binding registered as "blas" finds it, loading it does not
// crash, and creating a handle with no device fails with a clear error.
func TestBLASVendor(t *testing.T) {
	ran := 0
	for _, c := range []struct {
		env    string
		lib    *bind.Library
		vendor bind.Vendor
	}{
		{"GPUMEM_TEST_CUBLAS_LIBRARY", blas.CUBLAS, bind.CUDA},
		{"GPUMEM_TEST_HIPBLAS_LIBRARY", blas.HIPBLAS, bind.HIP},
		{"GPUMEM_TEST_ROCBLAS_LIBRARY", blas.ROCBLAS, bind.HIP},
	} {
		path := os.Getenv(c.env)
		if path == "" {
			continue
		}
		ran++
		t.Run(c.lib.Name, func(t *testing.T) { blasVendor(t, c.lib, c.vendor, path) })
	}
	if ran == 0 {
		t.Skip("no BLAS library named (.ci/libs-blas.sh sets GPUMEM_TEST_CUBLAS_LIBRARY, GPUMEM_TEST_HIPBLAS_LIBRARY, GPUMEM_TEST_ROCBLAS_LIBRARY)")
	}
}

// rowOf finds a row of a table by its name.
func rowOf(t *testing.T, tab *bind.Table, name string) bind.Op {
	t.Helper()
	for _, r := range tab.Rows {
		if r.Op == name {
			return r.ID
		}
	}
	t.Fatalf("table %s has no row %s", tab.Name, name)
	return 0
}

func blasVendor(t *testing.T, lib *bind.Library, v bind.Vendor, path string) {
	rep, err := bind.Resolve(lib, v, bind.WithPath(path))
	if err != nil {
		t.Fatal(err)
	}
	resolved := 0
	for _, r := range rep.Rows {
		if r.Resolved {
			resolved++
		} else if r.Required {
			t.Errorf("required %s does not resolve", r.Symbol)
		} else {
			t.Logf("optional %s absent", r.Symbol)
		}
	}
	if rep.MissingRequired != 0 || len(rep.Rows) == 0 {
		t.Fatalf("%d required symbols missing of %d rows", rep.MissingRequired, len(rep.Rows))
	}
	t.Logf("%s %s from %s: %d of %d symbols resolve", lib.Name, rep.Version, rep.Library, resolved, len(rep.Rows))
	if lib.Version != nil && rep.Version == "" {
		t.Errorf("%s answers no version", lib.Name)
	}

	// The binding the symbols command checks finds the library too.
	b, ok := bind.Lookup("blas")
	if !ok {
		t.Fatal("blas is not registered with bind")
	}
	if brep, err := b.Resolve(v, bind.WithPath(path)); err != nil || brep.MissingRequired != 0 {
		t.Errorf("binding blas for %s: %+v, %v", v, brep, err)
	}

	// hipBLAS: the GemmEx dialect follows from the soname's version.
	l, err := bind.Open(lib, v, bind.WithPath(path))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if lib == blas.HIPBLAS {
		major := strings.TrimPrefix(filepath.Base(path), "libhipblas.so.")
		major, _, _ = strings.Cut(major, ".")
		v2 := l.Has(rowOf(t, lib.Table, "GemmEx_v2"))
		ws := l.Has(rowOf(t, lib.Table, "SetWorkspace"))
		t.Logf("hipBLAS soname %s: GemmEx_v2 %v, SetWorkspace %v", major, v2, ws)
		switch major {
		case "0", "1":
			if v2 || ws {
				t.Errorf("hipBLAS %s.x has GemmEx_v2 %v, SetWorkspace %v: the dialect would be misread", major, v2, ws)
			}
		case "2":
			if !v2 {
				t.Error("hipBLAS 2.x lacks hipblasGemmEx_v2: the dialect would be misread")
			}
		default: // 3.0 and later: hipDataType under either name
			if !v2 && !ws {
				t.Errorf("hipBLAS %s.x has neither hipblasGemmEx_v2 nor hipblasSetWorkspace: GemmEx would be read as hipBLAS 1's", major)
			}
		}
	}

	// No device: creating a handle fails with the library's status, named.
	create := rowOf(t, lib.Table, "Create")
	h := new(uintptr)
	err = l.Check(create, uintptr(unsafe.Pointer(h)))
	runtime.KeepAlive(h)
	var be *bind.Error
	switch {
	case err == nil:
		t.Logf("%s created a handle with no GPU (a device is present?)", lib.Name)
		destroy := rowOf(t, lib.Table, "Destroy")
		if err := l.Check(destroy, *h); err != nil {
			t.Error(err)
		}
	case errors.As(err, &be):
		t.Logf("create with no device: %v (sentinel %v)", err, be.Err)
	default:
		t.Errorf("create with no device: %v, want the library's status", err)
	}

	// blas.Open needs a backend: with no device, the backend does not open,
	// and a nil one is refused.
	var berr error
	if v == bind.CUDA {
		_, berr = driver.Open(os.Getenv("GPUMEM_TEST_CUDA_LIBRARY"))
	} else {
		_, berr = hip.Open(os.Getenv("GPUMEM_TEST_HIP_LIBRARY"))
	}
	if berr == nil {
		t.Log("a backend opened: this machine has a device")
	} else if !errors.Is(berr, gpumem.ErrNoDevice) && !errors.Is(berr, gpumem.ErrLibraryNotFound) && !errors.Is(berr, gpumem.ErrNotSupported) {
		t.Errorf("backend with no device: %v", berr)
	} else {
		t.Logf("backend with no device: %v", berr)
	}
	if _, err := blas.Open(nil, 0, blas.WithLibrary(path)); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("blas.Open(nil): %v", err)
	}
}
