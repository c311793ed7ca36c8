package rtc

import (
	"fmt"

	"github.com/gpumem/gpumem"
)

// TargetOf names the compile target of device dev of b: "sm_90" for a CUDA
// device of compute capability 9.0.
//
// HIP devices are not supported yet (the error matches
// gpumem.ErrNotSupported): the target is the device's gcnArchName
// ("gfx90a:sramecc+:xnack-"), which gpumem.Backend does not expose (its
// compute capability attributes say 9.0 for gfx908 and gfx90a alike). Give
// the target explicitly. The simulator has no compile target.
func TargetOf(b gpumem.Backend, dev int) (string, error) {
	if b == nil {
		return "", fmt.Errorf("rtc: TargetOf: nil backend: %w", gpumem.ErrInvalidValue)
	}
	switch b.Name() {
	case "cuda":
		major, err := b.DeviceAttribute(dev, gpumem.AttrComputeCapabilityMajor)
		if err != nil {
			return "", fmt.Errorf("rtc: target of device %d: %w", dev, err)
		}
		minor, err := b.DeviceAttribute(dev, gpumem.AttrComputeCapabilityMinor)
		if err != nil {
			return "", fmt.Errorf("rtc: target of device %d: %w", dev, err)
		}
		return fmt.Sprintf("sm_%d%d", major, minor), nil
	case "hip":
		return "", &gpumem.NotSupportedError{Backend: "hip", Op: "rtc.TargetOf",
			Reason: "the backend exposes no gcnArchName attribute; give the target (gfx90a, gfx942...)"}
	}
	return "", &gpumem.NotSupportedError{Backend: b.Name(), Op: "rtc.TargetOf", Reason: "the backend has no run-time compiler"}
}
