package sim

import (
	"fmt"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// This file is the launch of Go kernels: LaunchKernel checks the launch and
// copies its arguments, the engine runs it in stream order (runGoKernel),
// and a kernel that faults sets its device's sticky error.

// kernelLaunch is a queued (or captured) launch: immutable once made, so a
// graph's node and the op queued by each replay share it.
type kernelLaunch struct {
	f           *function
	grid, block gpumem.Dim3
	shared      int    // static plus dynamic shared memory of a block
	args        []byte // the arguments' bytes, copied at launch, at f.k's offsets
}

// readParams copies the caller's arguments as the signature says. The
// array carries no sizes: the simulator checks the count, that no pointer
// is null, and that an argument's registered size does not run into the
// next argument's bytes where the caller laid them out one after another.
func readParams(k *Kernel, p gpumem.KernelParams) ([]byte, error) {
	bad := func(format string, args ...any) error {
		return errf(symtab.LaunchKernel, symtab.CUDAInvalidValue, "kernel %s: %s", k.Name, fmt.Sprintf(format, args...))
	}
	if p.Count != len(k.Params) {
		return nil, bad("%d arguments for %d parameters", p.Count, len(k.Params))
	}
	if p.Count == 0 {
		return nil, nil
	}
	if p.Array == 0 {
		return nil, bad("a null parameter array of %d arguments", p.Count)
	}
	// The array is the caller's memory; reading its address through the
	// field's storage keeps the conversion out of checkptr's way.
	base := *(*unsafe.Pointer)(unsafe.Pointer(&p.Array))
	ptrs := unsafe.Slice((*unsafe.Pointer)(base), p.Count)
	buf := make([]byte, k.argBytes)
	for i, a := range ptrs {
		size := k.Params[i].Size
		if a == nil {
			return nil, bad("argument %d: a null pointer in the parameter array", i)
		}
		if i+1 < len(ptrs) {
			next := uintptr(ptrs[i+1])
			if at := uintptr(a); next > at && next < at+uintptr(size) {
				return nil, bad("argument %d is %s, but the caller laid out only %d bytes before argument %d", i, describeParam(k.Params[i]), next-at, i+1)
			}
		}
		copy(buf[k.off[i]:], unsafe.Slice((*byte)(a), size))
	}
	return buf, nil
}

// LaunchKernel queues f on s over grid blocks of block threads with
// sharedMem bytes of dynamic shared memory, in stream order; during a
// capture of s it becomes a kernel node, replayed with the arguments as
// they were at capture. The argument bytes are copied during the call, as
// CUDA does; the parameter array may be reused once it returns.
//
// The launch is checked against the kernel's registration: the argument
// count (and what readParams can see of sizes), that every non-null
// pointer argument is memory the device can touch (device memory of its
// own or a peer's, pinned host or managed memory), the block size against
// MaxThreads and CUDA's dimension limits, and the shared memory against
// the function's limit; a mismatch is CUDA_ERROR_INVALID_VALUE and
// nothing is queued. Launches count and fault as "LaunchKernel" (Calls,
// InjectFault); errors about the stream or a pointer argument name
// LaunchKernel too. Once a kernel on the device has faulted, launches
// return its sticky error.
func (g *GPU) LaunchKernel(h gpumem.Function, grid, block gpumem.Dim3, sharedMem uint32, s gpumem.Stream, params gpumem.KernelParams) error {
	if err := g.enter(symtab.LaunchKernel); err != nil {
		return err
	}
	g.mu.Lock()
	f, err := g.lookupFunc(symtab.LaunchKernel, h)
	var maxDyn int
	if err == nil {
		maxDyn = f.maxDyn
	}
	g.mu.Unlock()
	if err != nil {
		return err
	}
	k := f.k
	g3, b3 := norm(grid), norm(block)
	switch {
	case g3.X > 1<<31-1 || g3.Y > 65535 || g3.Z > 65535:
		return errf(symtab.LaunchKernel, symtab.CUDAInvalidValue, "grid %v exceeds (2^31-1, 65535, 65535)", grid)
	case b3.X > 1024 || b3.Y > 1024 || b3.Z > 64:
		return errf(symtab.LaunchKernel, symtab.CUDAInvalidValue, "block %v exceeds (1024, 1024, 64)", block)
	case b3.Threads() > uint64(k.maxThreads()):
		return errf(symtab.LaunchKernel, symtab.CUDAInvalidValue, "block of %d threads; kernel %s allows %d", b3.Threads(), k.Name, k.maxThreads())
	case int(sharedMem) > maxDyn:
		return errf(symtab.LaunchKernel, symtab.CUDAInvalidValue, "%d bytes of dynamic shared memory; kernel %s allows %d (FuncSetMaxDynamicSharedMemory)", sharedMem, k.Name, maxDyn)
	}
	buf, err := readParams(k, params)
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.lookupStream(symtab.LaunchKernel, s)
	if err != nil {
		return err
	}
	if st.dev != f.mod.dev {
		return errf(symtab.LaunchKernel, symtab.CUDAInvalidHandle, "a function of device %d launched on %v", f.mod.dev.ord, s)
	}
	if err := g.stickyErr(symtab.LaunchKernel, st.dev); err != nil {
		return err
	}
	var uses []use
	for i, pr := range k.Params {
		if !pr.Ptr {
			continue
		}
		a := le(buf[k.off[i] : k.off[i]+8])
		if a == 0 {
			continue
		}
		u, err := g.resolve(symtab.LaunchKernel, a, 1, st.dev.ord, true)
		if err != nil {
			return fmt.Errorf("sim: LaunchKernel: kernel %s, argument %d: %w", k.Name, i, err)
		}
		uses = append(uses, u...)
	}
	kl := &kernelLaunch{f: f, grid: g3, block: b3, shared: k.SharedBytes + int(sharedMem), args: buf}
	return g.enqueue(st, &op{kind: opKernel, m: symtab.LaunchKernel, uses: uses, k: kl, dev: st.dev.ord})
}

// norm reads zero components of d as 1.
func norm(d gpumem.Dim3) gpumem.Dim3 { return gpumem.Dim3{X: one(d.X), Y: one(d.Y), Z: one(d.Z)} }

// stickyErr is the error a faulted kernel left on d, as m (a launch or a
// synchronizing method) returns it; lock held.
func (g *GPU) stickyErr(m symtab.Op, d *device) error {
	if d.kfault == nil {
		return nil
	}
	return errf(m, d.kfault.code, "a kernel faulted on device %d (sticky): %s", d.ord, d.kfault.msg)
}

// kernelFailed records a fault of the kernel o on st: a Violation, and the
// device's sticky error if it has none yet; lock held.
func (g *GPU) kernelFailed(st *stream, o *op, f *kernelFault) {
	g.violate(st, o, 0, 0, "%s", f.msg)
	if st.dev.kfault == nil {
		st.dev.kfault = f
	}
}

// runGoKernel runs a Go kernel's blocks; lock held, and released while the
// blocks run.
func (g *GPU) runGoKernel(st *stream, o *op) {
	kl := o.k
	k := kl.f.k
	if kl.f.mod.unloaded {
		g.kernelFailed(st, o, &kernelFault{code: symtab.CUDAIllegalAddress, msg: fmt.Sprintf("kernel %s: its module was unloaded before the launch ran", k.Name)})
		return
	}
	if !g.check(st, o) {
		g.kernelFailed(st, o, &kernelFault{code: symtab.CUDAIllegalAddress, msg: fmt.Sprintf("kernel %s: a pointer argument's memory was freed before the launch ran", k.Name)})
		return
	}
	if o.fromGraph {
		for i, pr := range k.Params {
			if !pr.Ptr {
				continue
			}
			if a := le(kl.args[k.off[i] : k.off[i]+8]); a != 0 && !g.resolveAtRun(st, o, a, 1, true) {
				g.kernelFailed(st, o, &kernelFault{code: symtab.CUDAIllegalAddress, msg: fmt.Sprintf("kernel %s: argument %d points at memory that is gone", k.Name, i)})
				return
			}
		}
	}
	kc := &KernelCall{Name: k.Name, Grid: kl.grid, Block: kl.block, g: g, st: st, o: o, dev: st.dev.ord,
		nthreads: int(kl.block.Threads()), nblocks: int(kl.grid.Threads())}
	kc.wins = kc.winBuf[:0]
	kc.Arg = Args{k: kc, params: k.Params, off: k.off, buf: kl.args}
	if kl.shared > 0 {
		kc.shared = make([]uint64, (kl.shared+7)/8)
		kc.Shared = unsafe.Slice((*byte)(unsafe.Pointer(&kc.shared[0])), kl.shared)
	}
	g.mu.Unlock()
	f := kc.runBlocks(k.Run)
	g.mu.Lock()
	if f != nil {
		g.kernelFailed(st, o, f)
	}
}

// runBlocks calls run for every block in order and returns the first
// fault; no lock held.
func (k *KernelCall) runBlocks(run func(*KernelCall)) *kernelFault {
	for z := uint32(0); z < k.Grid.Z; z++ {
		for y := uint32(0); y < k.Grid.Y; y++ {
			for x := uint32(0); x < k.Grid.X; x++ {
				k.BlockIdx = gpumem.Dim3{X: x, Y: y, Z: z}
				clear(k.shared)
				if f := k.runBlock(run); f != nil {
					return f
				}
			}
		}
	}
	return nil
}

// runBlock runs one block, turning a panic into a fault.
func (k *KernelCall) runBlock(run func(*KernelCall)) (f *kernelFault) {
	defer func() {
		if r := recover(); r != nil {
			if kf, ok := r.(*kernelFault); ok {
				f = kf
				return
			}
			f = &kernelFault{code: symtab.CUDAUnknown, msg: fmt.Sprintf("kernel %s, block %d panicked: %v", k.Name, k.BlockIndex(), r)}
		}
	}()
	run(k)
	return k.fault // a fault the kernel recovered from still counts
}
