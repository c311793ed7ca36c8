package fakegpu

import (
	"fmt"

	"github.com/gpumem/gpumem"
)

// The fake GPU has no kernels: every gpumem.Kernels method is counted (and
// fails as FailCall asks) like the faked operations, and otherwise returns
// an error matching gpumem.ErrNotSupported, as a backend whose vendor lacks
// the operation does. Tests that launch kernels want the simulator.

func (g *GPU) noKernels(op string) error {
	if err := g.call(op); err != nil {
		return err
	}
	return fmt.Errorf("%s: %s: the fake GPU has no kernels: %w", g.name, op, gpumem.ErrNotSupported)
}

// ModuleLoadData returns ErrNotSupported.
func (g *GPU) ModuleLoadData(dev int, image []byte) (gpumem.Module, error) {
	return gpumem.Module{}, g.noKernels("ModuleLoadData")
}

// ModuleUnload returns ErrNotSupported.
func (g *GPU) ModuleUnload(m gpumem.Module) error { return g.noKernels("ModuleUnload") }

// ModuleFunction returns ErrNotSupported.
func (g *GPU) ModuleFunction(m gpumem.Module, name string) (gpumem.Function, error) {
	return gpumem.Function{}, g.noKernels("ModuleFunction")
}

// ModuleGlobal returns ErrNotSupported.
func (g *GPU) ModuleGlobal(m gpumem.Module, name string) (gpumem.Ptr, uint64, error) {
	return 0, 0, g.noKernels("ModuleGlobal")
}

// FuncAttribute returns ErrNotSupported.
func (g *GPU) FuncAttribute(f gpumem.Function, a gpumem.FuncAttribute) (int, error) {
	return 0, g.noKernels("FuncAttribute")
}

// FuncSetMaxDynamicSharedMemory returns ErrNotSupported.
func (g *GPU) FuncSetMaxDynamicSharedMemory(f gpumem.Function, bytes int) error {
	return g.noKernels("FuncSetMaxDynamicSharedMemory")
}

// LaunchKernel returns ErrNotSupported.
func (g *GPU) LaunchKernel(f gpumem.Function, grid, block gpumem.Dim3, sharedMem uint32, s gpumem.Stream, params gpumem.KernelParams) error {
	return g.noKernels("LaunchKernel")
}

// OccupancyMaxActiveBlocks returns ErrNotSupported.
func (g *GPU) OccupancyMaxActiveBlocks(f gpumem.Function, blockSize int, dynSmem uint64) (int, error) {
	return 0, g.noKernels("OccupancyMaxActiveBlocks")
}

// OccupancyMaxPotentialBlockSize returns ErrNotSupported.
func (g *GPU) OccupancyMaxPotentialBlockSize(f gpumem.Function, dynSmem uint64, blockLimit int) (minGrid, blockSize int, err error) {
	return 0, 0, g.noKernels("OccupancyMaxPotentialBlockSize")
}
