package rtc

import (
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/nilcheck"
)

// TargetOf names the compile target of device dev of b, as the backend
// reports it (gpumem.TargetNamer): "sm_90" for a CUDA device of compute
// capability 9.0; a HIP device's gcnArchName ("gfx90a:sramecc+:xnack-",
// feature suffixes included, which hipRTC takes and the targets table
// checks by their base). A backend that names no target (the simulator, a
// wrapper that hides the capability) gives an error matching
// gpumem.ErrNotSupported: give the target explicitly.
func TargetOf(b gpumem.Backend, dev int) (string, error) {
	if nilcheck.Is(b) {
		return "", fmt.Errorf("rtc: TargetOf: nil backend: %w", gpumem.ErrInvalidValue)
	}
	tn, ok := b.(gpumem.TargetNamer)
	if !ok {
		return "", &gpumem.NotSupportedError{Backend: b.Name(), Op: "rtc.TargetOf", Reason: "the backend names no compile target"}
	}
	t, err := tn.DeviceTarget(dev)
	if err != nil {
		return "", fmt.Errorf("rtc: target of device %d: %w", dev, err)
	}
	return t, nil
}
