package telemetry

import (
	"errors"
	"os"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/bind"
)

// The real libraries, from Debian's packages (.ci/libs-smi.sh): every
// required symbol resolves, and opening them with no GPU fails with
// ErrNoDevice or another clear error, never a crash.
func TestVendorLibraries(t *testing.T) {
	for _, c := range []struct {
		env    string
		vendor bind.Vendor
		lib    *bind.Library
	}{
		{NVMLLibraryEnv, bind.CUDA, NVML},
		{ROCmSMILibraryEnv, bind.HIP, ROCmSMI},
	} {
		t.Run(c.lib.Name, func(t *testing.T) {
			path := os.Getenv(c.env)
			if path == "" {
				t.Skipf("%s is not set (.ci/libs-smi.sh sets it to the Debian package's library)", c.env)
			}
			b, ok := bind.Lookup("smi")
			if !ok {
				t.Fatal(`the "smi" binding is not registered`)
			}
			rep, err := b.Resolve(c.vendor, bind.WithPath(path))
			if err != nil {
				t.Fatalf("resolve %s: %v", path, err)
			}
			t.Logf("%s %s: %d rows, version %q", rep.Backend, rep.Library, len(rep.Rows), rep.Version)
			for _, r := range rep.Rows {
				if !r.Resolved {
					t.Logf("  unresolved %s (required %v)", r.Symbol, r.Required)
				}
			}
			if rep.MissingRequired != 0 {
				t.Errorf("%d required symbols missing in %s", rep.MissingRequired, path)
			}
			tel, err := OpenSystem(c.vendor, bind.WithPath(path))
			if err == nil {
				defer tel.Close()
				t.Logf("%s opened with %d devices: a GPU is present", path, tel.DeviceCount())
				for dev := 0; dev < tel.DeviceCount(); dev++ {
					s, err := tel.Device(dev)
					t.Logf("device %d: %+v %v", dev, s, err)
				}
				return
			}
			t.Logf("OpenSystem with no GPU: %v", err)
			// Both libraries say "no driver" with a status that means
			// ErrNoDevice (NVML_ERROR_DRIVER_NOT_LOADED,
			// RSMI_STATUS_INIT_ERROR), and name it.
			var be *bind.Error
			if !errors.Is(err, gpumem.ErrNoDevice) || !errors.As(err, &be) || be.Name == "" {
				t.Errorf("OpenSystem(%s): %v, want ErrNoDevice with the library's status and its name", path, err)
			}
		})
	}
}
