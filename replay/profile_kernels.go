package replay

import (
	"time"

	"github.com/gpumem/gpumem"
)

// ModuleLoadData times the wrapped backend's ModuleLoadData.
func (p *Profiler) ModuleLoadData(dev int, image []byte) (gpumem.Module, error) {
	defer p.done(opModuleLoadData, time.Now())
	return p.Backend.ModuleLoadData(dev, image)
}

// ModuleUnload times the wrapped backend's ModuleUnload.
func (p *Profiler) ModuleUnload(m gpumem.Module) error {
	defer p.done(opModuleUnload, time.Now())
	return p.Backend.ModuleUnload(m)
}

// ModuleFunction times the wrapped backend's ModuleFunction.
func (p *Profiler) ModuleFunction(m gpumem.Module, name string) (gpumem.Function, error) {
	defer p.done(opModuleFunction, time.Now())
	return p.Backend.ModuleFunction(m, name)
}

// ModuleGlobal times the wrapped backend's ModuleGlobal.
func (p *Profiler) ModuleGlobal(m gpumem.Module, name string) (gpumem.Ptr, uint64, error) {
	defer p.done(opModuleGlobal, time.Now())
	return p.Backend.ModuleGlobal(m, name)
}

// FuncAttribute times the wrapped backend's FuncAttribute.
func (p *Profiler) FuncAttribute(f gpumem.Function, a gpumem.FuncAttribute) (int, error) {
	defer p.done(opFuncAttribute, time.Now())
	return p.Backend.FuncAttribute(f, a)
}

// FuncSetMaxDynamicSharedMemory times the wrapped backend's
// FuncSetMaxDynamicSharedMemory.
func (p *Profiler) FuncSetMaxDynamicSharedMemory(f gpumem.Function, bytes int) error {
	defer p.done(opFuncSetMaxDynamicSharedMemory, time.Now())
	return p.Backend.FuncSetMaxDynamicSharedMemory(f, bytes)
}

// LaunchKernel times the wrapped backend's LaunchKernel: the host time of
// the call that queues the launch, not the kernel's run.
func (p *Profiler) LaunchKernel(f gpumem.Function, grid, block gpumem.Dim3, sharedMem uint32, s gpumem.Stream, params gpumem.KernelParams) error {
	defer p.done(opLaunchKernel, time.Now())
	return p.Backend.LaunchKernel(f, grid, block, sharedMem, s, params)
}

// OccupancyMaxActiveBlocks times the wrapped backend's
// OccupancyMaxActiveBlocks.
func (p *Profiler) OccupancyMaxActiveBlocks(f gpumem.Function, blockSize int, dynSmem uint64) (int, error) {
	defer p.done(opOccupancyMaxActiveBlocks, time.Now())
	return p.Backend.OccupancyMaxActiveBlocks(f, blockSize, dynSmem)
}

// OccupancyMaxPotentialBlockSize times the wrapped backend's
// OccupancyMaxPotentialBlockSize.
func (p *Profiler) OccupancyMaxPotentialBlockSize(f gpumem.Function, dynSmem uint64, blockLimit int) (minGrid, blockSize int, err error) {
	defer p.done(opOccupancyMaxPotentialBlockSize, time.Now())
	return p.Backend.OccupancyMaxPotentialBlockSize(f, dynSmem, blockLimit)
}
