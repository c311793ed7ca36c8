package managed

import (
	"os"
	"strings"
	"sync/atomic"
)

// EnvEnable is the environment variable that turns unified memory on, as
// PyTorch's PYTORCH_ENABLE_UNIFIED_MEMORY: "1" (or "true", "yes", "on").
const EnvEnable = "GPUMEM_ENABLE_UNIFIED_MEMORY"

// enabled holds the switch: 0 not decided yet (read the environment), 1 off, 2 on.
var enabled atomic.Int32

// Enable turns unified memory on or off for allocators created afterwards;
// it overrides GPUMEM_ENABLE_UNIFIED_MEMORY. Allocators that exist keep
// working either way.
func Enable(on bool) {
	if on {
		enabled.Store(2)
	} else {
		enabled.Store(1)
	}
}

// Enabled reports whether unified memory is on: the last Enable call, or
// else GPUMEM_ENABLE_UNIFIED_MEMORY. It is off by default.
func Enabled() bool {
	switch enabled.Load() {
	case 1:
		return false
	case 2:
		return true
	}
	return envEnabled()
}

func envEnabled() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(EnvEnable))) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}
