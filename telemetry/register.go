package telemetry

import "github.com/gpumem/gpumem/bind"

// The "smi" binding: `gpumem symbols --table smi` checks NVML (CUDA) or
// ROCm SMI (HIP) against a library file.
func init() {
	bind.Register(bind.Binding{Name: "smi", Libraries: [bind.NumVendors][]*bind.Library{bind.CUDA: {NVML}, bind.HIP: {ROCmSMI}}})
}
