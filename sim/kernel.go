package sim

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"unicode"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// This file is the kernels written in Go: their registration (Kernel,
// Param, RegisterKernel) and what a kernel sees while it runs (KernelCall,
// Args). Device memory accessors are in kernelmem.go, modules and functions
// in module.go, launches in kernelrun.go; see doc.go for the model.

// Param is one parameter of a kernel's signature: the size in bytes of its
// value and whether the value is a device pointer (which the use-after-free
// detector checks at launch and when the kernel runs).
type Param struct {
	Size int  // bytes of the argument's value
	Ptr  bool // the value is an address (8 bytes) the kernel reads or writes
}

// PtrParam is a device pointer parameter: 8 bytes holding an address of
// device, pinned host or managed memory, or 0.
var PtrParam = Param{Size: 8, Ptr: true}

// ScalarParam is a parameter passed by value in size bytes (an int32 or a
// float32 is ScalarParam(4), a struct its unsafe.Sizeof).
func ScalarParam(size int) Param { return Param{Size: size} }

// Kernel is a kernel written in Go, registered under the name a module
// looks it up by (its lowered name for a C++ function). Run is called once
// per block of a launch, in order of the linear block index, on the
// stream's goroutine; within it, KernelCall.Threads runs the block's threads
// one phase at a time (a phase ends where CUDA code would __syncthreads).
// Run must not call the GPU: it reads and writes device memory through the
// KernelCall (Load, Store, AtomicAdd, Read, Write). Nor may it end its
// goroutine (runtime.Goexit, a test's t.Fatal): a test kernel reports
// with t.Error, or panics, which stops the kernel with an error.
type Kernel struct {
	Name   string
	Params []Param
	Run    func(k *KernelCall)

	// MaxThreads is the largest block the kernel can be launched with
	// (FuncMaxThreadsPerBlock); 0 means 1024.
	MaxThreads int
	// SharedBytes is the static shared memory of a block
	// (FuncSharedSizeBytes), at most 48 KiB; a launch's dynamic shared
	// memory comes after it in KernelCall.Shared.
	SharedBytes int
	// Regs is the registers per thread (FuncNumRegs), which the occupancy
	// model counts; 0 leaves registers out of it.
	Regs int

	off      []int // where argument i starts in a launch's copy; set by registration
	argBytes int   // the size of a launch's copy of the arguments
}

// Limits of kernels and launches, as an H100 or H200 has them.
const (
	maxBlockThreads  = 1024
	maxStaticShared  = 48 << 10  // static shared memory per block
	defDynamicShared = 48 << 10  // dynamic shared memory allowed before FuncSetMaxDynamicSharedMemory
	maxBlockShared   = 227 << 10 // static plus dynamic shared memory of a block, opted in
	maxParamBytes    = 32764     // the parameters of one launch (CUDA 12.1 and later)
	maxRegs          = 255
)

// check validates a registration.
func (k *Kernel) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("sim: RegisterKernel %q: %s: %w", k.Name, fmt.Sprintf(format, args...), gpumem.ErrInvalidValue)
	}
	if k.Name == "" || strings.IndexFunc(k.Name, unicode.IsSpace) >= 0 {
		return bad("a kernel name is not empty and has no spaces")
	}
	if k.Run == nil {
		return bad("nil Run")
	}
	total := 0
	for i, p := range k.Params {
		if p.Size <= 0 || (p.Ptr && p.Size != 8) {
			return bad("parameter %d: size %d (a pointer is 8 bytes, a scalar at least 1)", i, p.Size)
		}
		total += p.Size
	}
	switch {
	case total > maxParamBytes:
		return bad("%d bytes of parameters (at most %d)", total, maxParamBytes)
	case k.MaxThreads < 0 || k.MaxThreads > maxBlockThreads:
		return bad("MaxThreads %d (0 to %d)", k.MaxThreads, maxBlockThreads)
	case k.SharedBytes < 0 || k.SharedBytes > maxStaticShared:
		return bad("SharedBytes %d (0 to %d)", k.SharedBytes, maxStaticShared)
	case k.Regs < 0 || k.Regs > maxRegs:
		return bad("Regs %d (0 to %d)", k.Regs, maxRegs)
	}
	return nil
}

func (k *Kernel) maxThreads() int {
	if k.MaxThreads == 0 {
		return maxBlockThreads
	}
	return k.MaxThreads
}

// kernelRegistry maps names to kernels; safe for concurrent use.
type kernelRegistry struct {
	mu sync.RWMutex
	m  map[string]*Kernel
}

func (r *kernelRegistry) add(k Kernel) error {
	if err := k.check(); err != nil {
		return err
	}
	k.Params = append([]Param(nil), k.Params...)
	k.off = make([]int, len(k.Params))
	k.argBytes = 0
	for i, pr := range k.Params {
		k.off[i] = k.argBytes
		k.argBytes += pr.Size
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.m[k.Name]; dup {
		return fmt.Errorf("sim: RegisterKernel: a kernel named %q is already registered: %w", k.Name, gpumem.ErrInvalidValue)
	}
	if r.m == nil {
		r.m = map[string]*Kernel{}
	}
	r.m[k.Name] = &k
	return nil
}

func (r *kernelRegistry) lookup(name string) *Kernel {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.m[name]
}

// defaultKernels holds the kernels every simulated GPU knows.
var defaultKernels kernelRegistry

// RegisterKernel registers k for every simulated GPU of the process (a
// GPU's own registrations, GPU.RegisterKernel, take precedence). A name
// registered twice, or an invalid signature, is an error matching
// gpumem.ErrInvalidValue. Register in an init function or TestMain; a
// module's functions see the registrations made before their lookup.
func RegisterKernel(k Kernel) error { return defaultKernels.add(k) }

// RegisterKernel registers k for this GPU only; it is found before a
// kernel of the same name registered with the package's RegisterKernel.
// A name registered twice on g is an error matching gpumem.ErrInvalidValue.
func (g *GPU) RegisterKernel(k Kernel) error {
	if g == nil {
		return errNil("RegisterKernel")
	}
	return g.kern.reg.add(k)
}

// lookupKernel finds name among g's kernels, then the process's.
func (g *GPU) lookupKernel(name string) *Kernel {
	if k := g.kern.reg.lookup(name); k != nil {
		return k
	}
	return defaultKernels.lookup(name)
}

// KernelCall is one block of a launch as the kernel's Run sees it. Its
// fields are the launch's configuration and the block's place in it; its
// methods and the package's Load, Store and AtomicAdd touch device memory,
// with every access checked: an address outside a live allocation (or
// past the size asked for) stops the kernel and becomes the device's
// sticky CUDA_ERROR_ILLEGAL_ADDRESS (700), which the stream's synchronizing
// calls return. A KernelCall is valid only during the Run call it was
// passed to.
type KernelCall struct {
	Name     string      // the kernel's name
	Grid     gpumem.Dim3 // blocks of the launch (zero components read as 1)
	Block    gpumem.Dim3 // threads of a block (zero components read as 1)
	BlockIdx gpumem.Dim3 // this block
	// Shared is the block's shared memory: the kernel's SharedBytes, then
	// the launch's dynamic shared memory; zeroed before each block and
	// aligned to 8 bytes. See the package's Shared for a typed view.
	Shared []byte
	// Arg holds the launch's arguments, copied when it was queued.
	Arg Args

	g        *GPU
	st       *stream
	o        *op
	dev      int
	nthreads int
	nblocks  int
	wins     []window // the last windows resolved, in winBuf
	winBuf   [maxWindows]window
	fault    *kernelFault
	shared   []uint64 // backing of Shared
}

// BlockThreads is the number of threads of a block (Block.Threads()).
func (k *KernelCall) BlockThreads() int { return k.nthreads }

// GridBlocks is the number of blocks of the launch (Grid.Threads()).
func (k *KernelCall) GridBlocks() int { return k.nblocks }

// BlockIndex is the linear index of this block: BlockIdx.X +
// BlockIdx.Y*Grid.X + BlockIdx.Z*Grid.X*Grid.Y.
func (k *KernelCall) BlockIndex() int {
	gx, gy := int(one(k.Grid.X)), int(one(k.Grid.Y))
	return int(k.BlockIdx.X) + gx*(int(k.BlockIdx.Y)+gy*int(k.BlockIdx.Z))
}

// ThreadIdx is CUDA's threadIdx of the block's thread with linear index t.
func (k *KernelCall) ThreadIdx(t int) gpumem.Dim3 {
	bx, by := int(one(k.Block.X)), int(one(k.Block.Y))
	return gpumem.Dim3{X: uint32(t % bx), Y: uint32(t / bx % by), Z: uint32(t / (bx * by))}
}

// GlobalThread is the linear index of thread t of this block in the whole
// launch, BlockIndex()*BlockThreads()+t: for a one-dimensional launch,
// CUDA's blockIdx.x*blockDim.x+threadIdx.x.
func (k *KernelCall) GlobalThread(t int) int { return k.BlockIndex()*k.nthreads + t }

// Threads calls fn for every thread of the block, t from 0 to
// BlockThreads()-1. One call is one phase of the block: every thread
// finishes it before the next phase starts, as at a __syncthreads barrier.
func (k *KernelCall) Threads(fn func(t int)) {
	for t := 0; t < k.nthreads; t++ {
		fn(t)
	}
}

func one(v uint32) uint32 {
	if v == 0 {
		return 1
	}
	return v
}

// kernelFault is what stops a kernel: a memory access the simulator
// refused, a misused accessor or a panic. It becomes a Violation and the
// device's sticky error.
type kernelFault struct {
	code int
	msg  string
}

// Failf stops the kernel as a failed device-side assert does
// (CUDA_ERROR_ASSERT, the device's sticky error, a Violation): for a Go
// kernel that checks how it was launched or what it was given.
func (k *KernelCall) Failf(format string, args ...any) {
	k.abort(symtab.CUDAAssert, format, args...)
}

// abort stops the kernel with a fault (Run's goroutine unwinds to the
// launch, which reports it).
func (k *KernelCall) abort(code int, format string, args ...any) {
	f := &kernelFault{code: code, msg: fmt.Sprintf("kernel %s, block %d: %s", k.Name, k.BlockIndex(), fmt.Sprintf(format, args...))}
	if k.fault == nil {
		k.fault = f
	}
	panic(f)
}

// Args are the arguments of a launch, by parameter index. The accessors
// check the index and the registered signature: asking for a parameter
// that does not exist, or for a type of another size (Float32 of an
// 8-byte parameter, Ptr of a scalar), stops the kernel with
// CUDA_ERROR_INVALID_VALUE.
type Args struct {
	k      *KernelCall
	params []Param
	off    []int
	buf    []byte
}

// Len is the number of arguments.
func (a Args) Len() int { return len(a.params) }

// Bytes returns a copy of argument i's bytes.
func (a Args) Bytes(i int) []byte {
	a.param(i, 0, false)
	return append([]byte(nil), a.buf[a.off[i]:a.off[i]+a.params[i].Size]...)
}

// param returns argument i's bytes after checking that it exists, has size
// bytes (any size for 0) and is a pointer if ptr.
func (a Args) param(i, size int, ptr bool) []byte {
	if i < 0 || i >= len(a.params) {
		a.k.abort(symtab.CUDAInvalidValue, "argument %d of %d", i, len(a.params))
	}
	p := a.params[i]
	if (size != 0 && p.Size != size) || (ptr && !p.Ptr) {
		a.k.abort(symtab.CUDAInvalidValue, "argument %d is %s, read as %d bytes%s", i, describeParam(p), size, map[bool]string{true: " of pointer"}[ptr])
	}
	return a.buf[a.off[i] : a.off[i]+p.Size]
}

func describeParam(p Param) string {
	if p.Ptr {
		return "a pointer"
	}
	return fmt.Sprintf("a %d-byte scalar", p.Size)
}

func le(b []byte) uint64 {
	var v uint64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// Ptr is pointer argument i.
func (a Args) Ptr(i int) gpumem.Ptr { return gpumem.Ptr(le(a.param(i, 8, true))) }

// Int32 is 4-byte argument i as an int32.
func (a Args) Int32(i int) int32 { return int32(le(a.param(i, 4, false))) }

// Uint32 is 4-byte argument i as a uint32.
func (a Args) Uint32(i int) uint32 { return uint32(le(a.param(i, 4, false))) }

// Int64 is 8-byte argument i as an int64.
func (a Args) Int64(i int) int64 { return int64(le(a.param(i, 8, false))) }

// Uint64 is 8-byte argument i as a uint64.
func (a Args) Uint64(i int) uint64 { return le(a.param(i, 8, false)) }

// Float32 is 4-byte argument i as a float32.
func (a Args) Float32(i int) float32 { return math.Float32frombits(uint32(le(a.param(i, 4, false)))) }

// Float64 is 8-byte argument i as a float64.
func (a Args) Float64(i int) float64 { return math.Float64frombits(le(a.param(i, 8, false))) }
