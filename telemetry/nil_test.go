package telemetry_test

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/telemetry"
)

// TestNilTelemetry: every method of a nil *Telemetry (what a failed Open
// returns) answers, with an error matching ErrInvalidValue where it has
// one; none panics.
func TestNilTelemetry(t *testing.T) {
	var tel *telemetry.Telemetry
	inval := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("%s of a nil Telemetry: %v, want ErrInvalidValue", what, err)
		}
	}
	_, err := tel.Device(0)
	inval("Device", err)
	_, err = tel.Processes(0)
	inval("Processes", err)
	_, _, err = tel.Self(0)
	inval("Self", err)
	_, _, err = tel.Others(0)
	inval("Others", err)
	inval("Close", tel.Close())
	if tel.DeviceCount() != 0 || tel.Backend() != "" || tel.Library() != "" || tel.Notes() != nil {
		t.Errorf("nil Telemetry: %d devices, backend %q, library %q, notes %v", tel.DeviceCount(), tel.Backend(), tel.Library(), tel.Notes())
	}
}
