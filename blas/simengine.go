package blas

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/kernel"
	"github.com/gpumem/gpumem/sim"
)

// The simulator's engine: every routine is one launch of a Go kernel
// (simkernel.go) on the handle's stream, so it runs in stream order after
// the work queued before it, its memory accesses are checked by the
// simulator's detector (an access outside a live allocation faults the
// kernel, which becomes the device's sticky error, as on a GPU), and its
// pointer arguments are resolved at launch like any kernel's. Host-mode Dot
// and Nrm2 write their result to a small device buffer of the handle, then
// synchronize the stream and read it, as the libraries' host mode blocks.

// simKernelName is the Go kernel's name.
const simKernelName = "gpumem_blas"

// simFields are the scalar words of a launch, in this order.
const (
	fKind = iota
	fType
	fOut
	fTA
	fTB
	fM
	fN
	fK
	fLda
	fLdb
	fLdc
	fSa
	fSb
	fSc
	fBatches
	fIncx
	fIncy
	fAlpha
	fBeta
	fMode
	numFields
)

// Pointer parameters after the scalar struct.
const (
	pA = 1 + iota // A, or x
	pB            // B, or y
	pC
	pAlpha
	pBeta
	pRes
	numParams
)

var simKernel = sim.Kernel{
	Name: simKernelName,
	Params: []sim.Param{sim.ScalarParam(8 * numFields),
		sim.PtrParam, sim.PtrParam, sim.PtrParam, sim.PtrParam, sim.PtrParam, sim.PtrParam},
	MaxThreads: 1,
	Run:        runSimKernel,
}

var registerSim = sync.OnceValue(func() error { return sim.RegisterKernel(simKernel) })

type simEngine struct {
	g       *sim.GPU
	dev     int
	stream  gpumem.Stream
	mod     gpumem.Module // zero once unloaded
	l       *kernel.Launcher
	scratch gpumem.Ptr
	args    [8 * numFields]byte
}

func openSim(g *sim.GPU, dev int) (*simEngine, error) {
	if err := registerSim(); err != nil {
		return nil, fmt.Errorf("gpumem: blas: registering the simulator's kernel: %w", err)
	}
	mod, err := g.ModuleLoadData(dev, sim.ModuleImage{Kernels: []string{simKernelName}}.Bytes())
	if err != nil {
		return nil, fmt.Errorf("gpumem: blas: Open: %w", err)
	}
	e := &simEngine{g: g, dev: dev, stream: gpumem.Stream{Device: dev}, mod: mod}
	f, err := g.ModuleFunction(mod, simKernelName)
	if err == nil {
		e.l, err = kernel.New(g, f, kernel.Struct(8*numFields, 8), kernel.Ptr, kernel.Ptr, kernel.Ptr, kernel.Ptr, kernel.Ptr, kernel.Ptr)
	}
	if err == nil {
		e.scratch, err = g.Malloc(dev, 16)
	}
	if err != nil {
		_ = e.destroy()
		return nil, fmt.Errorf("gpumem: blas: Open: %w", err)
	}
	return e, nil
}

func (e *simEngine) library() string { return "sim" }

// setStream takes s as the libraries do, unchecked: an unknown stream
// fails the first launch on it. (Querying it here would end a capture of
// it, where the libraries' calls are captured.)
func (e *simEngine) setStream(s gpumem.Stream) error {
	e.stream = s
	return nil
}

func (e *simEngine) setWorkspace(gpumem.Ptr, uint64) error { return nil }

// destroy releases what the engine holds, forgetting each part as it is
// released, so that a destroy that failed can be tried again.
func (e *simEngine) destroy() error {
	var err error
	if e.l != nil {
		if err = e.l.Close(); err == nil {
			e.l = nil
		}
	}
	if e.scratch != 0 {
		if ferr := e.g.Free(e.dev, e.scratch); ferr != nil {
			err = cmp.Or(err, ferr)
		} else {
			e.scratch = 0
		}
	}
	if e.mod.Handle != 0 {
		if uerr := e.g.ModuleUnload(e.mod); uerr != nil {
			err = cmp.Or(err, uerr)
		} else {
			e.mod = gpumem.Module{}
		}
	}
	if err != nil {
		return fmt.Errorf("gpumem: blas: Close: %w", err)
	}
	return nil
}

func (e *simEngine) run(c *call) error {
	v := [numFields]uint64{
		fKind: uint64(c.kind), fType: uint64(c.t), fOut: uint64(c.out), fTA: uint64(c.ta), fTB: uint64(c.tb),
		fM: uint64(c.m), fN: uint64(c.n), fK: uint64(c.k), fLda: uint64(c.lda), fLdb: uint64(c.ldb), fLdc: uint64(c.ldc),
		fSa: uint64(c.sa), fSb: uint64(c.sb), fSc: uint64(c.sc), fBatches: uint64(c.batches()),
		fIncx: uint64(int64(c.incx)), fIncy: uint64(int64(c.incy)),
		fAlpha: math.Float64bits(c.alpha), fBeta: math.Float64bits(c.beta), fMode: uint64(c.mode),
	}
	for i, x := range v {
		binary.LittleEndian.PutUint64(e.args[8*i:], x)
	}
	ptrs := [numParams]gpumem.Ptr{pA: c.a, pB: c.b, pC: c.c, pAlpha: c.alphaP, pBeta: c.betaP, pRes: c.res}
	if c.kind <= kScal { // vectors travel as A and B
		ptrs[pA], ptrs[pB] = c.x, c.y
	} else if c.kind == kGemv {
		ptrs[pB], ptrs[pC] = c.x, c.y
	}
	// Operands the call does not read, device scalars included, are not
	// passed: the launch resolves every pointer it is given, and the
	// checks let any pointer stand for one that is not read.
	switch {
	case c.kind <= kScal && c.n == 0:
		ptrs[pA], ptrs[pB], ptrs[pAlpha] = 0, 0, 0
	case c.kind == kGemv && (c.m == 0 || c.n == 0):
		ptrs[pA], ptrs[pB], ptrs[pC], ptrs[pAlpha], ptrs[pBeta] = 0, 0, 0, 0, 0
	case c.kind >= kGemm && (c.m == 0 || c.n == 0 || c.batches() == 0):
		ptrs[pA], ptrs[pB], ptrs[pC], ptrs[pAlpha], ptrs[pBeta] = 0, 0, 0, 0, 0
	case c.kind >= kGemm && c.k == 0:
		ptrs[pA], ptrs[pB] = 0, 0
	}
	hostResult := (c.kind == kDot || c.kind == kNrm2) && c.mode == Host
	if hostResult {
		ptrs[pRes] = e.scratch
	}
	if c.mode == Host {
		ptrs[pAlpha], ptrs[pBeta] = 0, 0
	}
	err := e.l.SetStruct(0, e.args[:])
	for i := pA; i < numParams && err == nil; i++ {
		err = e.l.SetPtr(i, ptrs[i])
	}
	if err == nil {
		err = e.l.Launch(e.stream, gpumem.Dim3{X: 1}, gpumem.Dim3{X: 1}, 0)
	}
	if err == nil && hostResult {
		err = e.g.StreamSynchronize(e.stream)
		if err == nil {
			var b [8]byte
			err = e.g.CopyFromDevice(b[:c.t.Size()], e.scratch)
			c.result = decode(c.t, b[:])
		}
	}
	if err != nil {
		return fmt.Errorf("gpumem: blas: %s: %w", c.routine, err)
	}
	return nil
}
