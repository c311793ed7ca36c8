package native

import (
	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/symtab"
)

// dim is a launch dimension: a zero component counts as 1.
func dim(v uint32) uintptr {
	if v == 0 {
		return 1
	}
	return uintptr(v)
}

// LaunchKernel launches f on s: cuLaunchKernel or hipModuleLaunchKernel,
// eleven arguments (f, grid x/y/z, block x/y/z, sharedMemBytes, stream,
// kernelParams, extra = NULL), with f's device made current in the same
// transition into C. A zero component of grid or block counts as 1. It
// allocates nothing when the launch succeeds.
//
// During a capture of s the launch becomes a kernel node of the graph. A
// launch is not an unsafe call for any capture mode, so it may come from
// any goroutine (on any thread) while another goroutine holds a global or
// thread-local capture on its thread.
//
// params must stay valid and unchanged until the call returns (the vendor
// copies the argument bytes into the launch, or into the kernel node). For
// a kernel of ModuleFunction whose parameters the driver reports (CUDA
// 12.4+), a params.Count other than the kernel's parameter count is
// refused with ErrInvalidValue before the driver is called.
func (b *Backend) LaunchKernel(f gpumem.Function, grid, block gpumem.Dim3, sharedMem uint32, s gpumem.Stream, params gpumem.KernelParams) error {
	if f.Handle == 0 {
		return b.invalid("LaunchKernel: zero function")
	}
	if err := b.deadStream(s); err != nil {
		return err
	}
	if f.Device != s.Device {
		return b.invalid("LaunchKernel: kernel %q of device %d on a stream of device %d", f.Name, f.Device, s.Device)
	}
	if params.Count < 0 || (params.Count > 0 && params.Array == 0) {
		return b.invalid("LaunchKernel: kernel %q: %d parameters at %#x", f.Name, params.Count, params.Array)
	}
	if n, ok := b.params.count(f.Handle); ok && n != params.Count {
		return b.invalid("LaunchKernel: kernel %q takes %d parameters; %d given", f.Name, n, params.Count)
	}
	fn, err := b.target(s.Device, symtab.LaunchKernel)
	if err != nil {
		return err
	}
	r, preFailed := ccall.CallPre12(b.pre, b.cur[s.Device], fn, f.Handle,
		dim(grid.X), dim(grid.Y), dim(grid.Z), dim(block.X), dim(block.Y), dim(block.Z),
		uintptr(sharedMem), s.Handle, params.Array, 0, 0)
	if int32(r) == 0 {
		return nil
	}
	return b.failed(symtab.LaunchKernel, r, preFailed)
}

// OccupancyMaxActiveBlocks is the number of blocks of blockSize threads,
// each with dynSmem bytes of dynamic shared memory, that fit on one
// multiprocessor (cuOccupancyMaxActiveBlocksPerMultiprocessor,
// hipModuleOccupancyMaxActiveBlocksPerMultiprocessor).
func (b *Backend) OccupancyMaxActiveBlocks(f gpumem.Function, blockSize int, dynSmem uint64) (int, error) {
	if f.Handle == 0 {
		return 0, b.invalid("OccupancyMaxActiveBlocks: zero function")
	}
	if blockSize <= 0 || blockSize > 1<<31-1 {
		return 0, b.invalid("OccupancyMaxActiveBlocks: block size %d", blockSize)
	}
	c := getCell()
	defer putCell(c)
	// (int *numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize)
	if err := b.call(f.Device, symtab.OccupancyMaxActiveBlocks, c.addr(0), f.Handle, uintptr(blockSize), uintptr(dynSmem), 0, 0); err != nil {
		return 0, err
	}
	return int(c.i32(0)), nil
}

// OccupancyMaxPotentialBlockSize suggests the block size of greatest
// occupancy for f with dynSmem bytes of dynamic shared memory per block (a
// constant: CUDA's block-size-to-memory callback is passed as NULL), at
// most blockLimit threads when blockLimit > 0, and the smallest grid that
// fills the device with it.
func (b *Backend) OccupancyMaxPotentialBlockSize(f gpumem.Function, dynSmem uint64, blockLimit int) (minGrid, blockSize int, err error) {
	if f.Handle == 0 {
		return 0, 0, b.invalid("OccupancyMaxPotentialBlockSize: zero function")
	}
	if blockLimit < 0 || blockLimit > 1<<31-1 {
		return 0, 0, b.invalid("OccupancyMaxPotentialBlockSize: block limit %d", blockLimit)
	}
	c := getCell()
	defer putCell(c)
	if b.d.OccupancyCallback {
		// (int *minGridSize, int *blockSize, CUfunction func,
		// CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t
		// dynamicSMemSize, int blockSizeLimit)
		err = b.call(f.Device, symtab.OccupancyMaxPotentialBlockSize, c.addr(0), c.addr(1), f.Handle, 0, uintptr(dynSmem), uintptr(blockLimit))
	} else {
		// (int *gridSize, int *blockSize, hipFunction_t f, size_t
		// dynSharedMemPerBlk, int blockSizeLimit)
		err = b.call(f.Device, symtab.OccupancyMaxPotentialBlockSize, c.addr(0), c.addr(1), f.Handle, uintptr(dynSmem), uintptr(blockLimit), 0)
	}
	if err != nil {
		return 0, 0, err
	}
	return int(c.i32(0)), int(c.i32(1)), nil
}
