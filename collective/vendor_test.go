package collective

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/bind"
	"github.com/gpumem/gpumem/sim"
)

// TestVendorLibraries checks the real libraries named by
// GPUMEM_TEST_NCCL_LIBRARY and GPUMEM_TEST_RCCL_LIBRARY (.ci/libs-collectives.sh
// provides Debian's) on a machine with no GPU: every required symbol
// resolves, the version and status names come back with no device, and a
// communicator cannot be made: NCCL and RCCL answer with a status, they do
// not crash.
func TestVendorLibraries(t *testing.T) {
	ran := false
	for _, c := range []struct {
		env string
		lib *bind.Library
		v   bind.Vendor
	}{{"GPUMEM_TEST_NCCL_LIBRARY", NCCL, bind.CUDA}, {"GPUMEM_TEST_RCCL_LIBRARY", RCCL, bind.HIP}} {
		path := os.Getenv(c.env)
		if path == "" {
			continue
		}
		ran = true
		t.Run(c.lib.Name, func(t *testing.T) {
			// Open first and keep the library open while Resolve loads it
			// again: RCCL 5.4 cannot be loaded a second time after it was
			// unloaded (its LLVM registers its options again and aborts),
			// which the package never does (it keeps the library it opened).
			l, err := bind.Open(c.lib, c.v, bind.WithPath(path))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			rep, err := bind.Resolve(c.lib, c.v, bind.WithPath(path))
			if err != nil {
				t.Fatal(err)
			}
			resolved := 0
			for _, r := range rep.Rows {
				if r.Resolved {
					resolved++
				}
			}
			t.Logf("%s %s: %d of %d symbols resolved, %d required missing", rep.Library, rep.Version, resolved, len(rep.Rows), rep.MissingRequired)
			if rep.MissingRequired != 0 || rep.Version == "" || !strings.HasPrefix(rep.Version, "2.") {
				t.Fatalf("report %+v", rep)
			}
			// As the symbols command resolves it (--table collectives).
			bnd, _ := bind.Lookup("collectives")
			if brep, err := bnd.Resolve(c.v, bind.WithPath(path)); err != nil || brep.MissingRequired != 0 || brep.Backend != c.lib.Name {
				t.Errorf("binding resolve: %+v, %v", brep, err)
			}
			if n := l.StatusName(resInvalidArgument); !strings.Contains(n, "ncclInvalidArgument") || len(n) <= len("ncclInvalidArgument") {
				t.Errorf("status 4 is named %q", n)
			}
			err = l.Err(opAllReduce, resInvalidUsage)
			if !errors.Is(err, gpumem.ErrInvalidValue) || !strings.Contains(err.Error(), "ncclAllReduce failed: ncclInvalidUsage") {
				t.Errorf("status 5: %v", err)
			}
			// No device: ncclCommInitAll of one rank must fail with a
			// status (the library's runtime finds no GPU).
			out, dev := new(uintptr), new(int32)
			escape(out)
			escape(dev)
			err = l.Check(opCommInitAll, uintptr(unsafe.Pointer(out)), 1, uintptr(unsafe.Pointer(dev)))
			runtime.KeepAlive(out)
			runtime.KeepAlive(dev)
			var be *bind.Error
			if !errors.As(err, &be) || *out != 0 {
				t.Fatalf("ncclCommInitAll with no device: %v, comm %#x", err, *out)
			}
			t.Logf("with no device: %v", err)
		})
	}
	if !ran {
		t.Skip("GPUMEM_TEST_NCCL_LIBRARY and GPUMEM_TEST_RCCL_LIBRARY are unset (.ci/libs-collectives.sh sets them)")
	}
	// And through the API: a backend that calls no collective library is
	// refused before any library call.
	if _, err := InitAll(fakeBackend{}, []int{0}); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("InitAll on a backend with no library: %v", err)
	}
}

// fakeBackend is a backend that is neither the simulator nor a native one.
type fakeBackend struct{ *sim.GPU }

func (fakeBackend) Name() string { return "fake" }
