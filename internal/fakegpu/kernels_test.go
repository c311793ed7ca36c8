package fakegpu

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
)

func TestKernelsNotSupported(t *testing.T) {
	g := New(1 << 20)
	if _, err := g.ModuleLoadData(0, []byte("x")); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("ModuleLoadData: %v", err)
	}
	if err := g.LaunchKernel(gpumem.Function{}, gpumem.Dim3{}, gpumem.Dim3{}, 0, gpumem.Stream{}, gpumem.KernelParams{}); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("LaunchKernel: %v", err)
	}
	g.FailCall("ModuleUnload", 1)
	var ve *gpumem.Error
	if err := g.ModuleUnload(gpumem.Module{}); !errors.As(err, &ve) {
		t.Errorf("ModuleUnload with a fault: %v", err)
	}
	if g.Calls("LaunchKernel") != 1 || g.Calls("ModuleUnload") != 1 {
		t.Errorf("calls: LaunchKernel %d, ModuleUnload %d", g.Calls("LaunchKernel"), g.Calls("ModuleUnload"))
	}
}
