package sim

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// This file is the modules, functions, attributes and occupancy of the
// gpumem.Kernels interface; see doc.go for the kernel model.

// ModuleImage describes a simulator module: the kernels it contains (looked
// up by name among the registered kernels) and its globals. Bytes encodes
// it as an image for ModuleLoadData, a few lines of text:
//
//	gpumem-sim-module 1
//	kernel saxpy
//	global counter 4 2a000000
//
// (a global's initial bytes in hex are optional; it is zeroed otherwise).
type ModuleImage struct {
	Kernels []string
	Globals []Global
}

// Global is a global variable of a module (a __device__ or __constant__
// variable): Size bytes of device memory allocated when the module is
// loaded and freed when it is unloaded, holding Init (zero-padded) at load.
type Global struct {
	Name string
	Size uint64
	Init []byte
}

const simImageMagic = "gpumem-sim-module 1\n"

// Bytes encodes the image.
func (m ModuleImage) Bytes() []byte {
	var b bytes.Buffer
	b.WriteString(simImageMagic)
	for _, k := range m.Kernels {
		fmt.Fprintf(&b, "kernel %s\n", k)
	}
	for _, g := range m.Globals {
		fmt.Fprintf(&b, "global %s %d", g.Name, g.Size)
		if len(g.Init) > 0 {
			fmt.Fprintf(&b, " %x", g.Init)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// parsedImage is what ModuleLoadData learned from an image: the names it
// declares (nil: an image the simulator cannot read, whose names are any
// registered kernel's) and its globals.
type parsedImage struct {
	format  string
	names   map[string]bool
	globals []Global
}

var (
	ptxEntry  = regexp.MustCompile(`\.entry\s+([A-Za-z_$%][\w$%]*)`)
	ptxGlobal = regexp.MustCompile(`(?m)^\s*(?:\.visible\s+)?\.(?:global|const)\s+(?:\.align\s+\d+\s+)?\.([a-z]+)(\d+)\s+([A-Za-z_$%][\w$%]*)\s*(?:\[(\d+)\])?`)
)

// parseImage reads a simulator image or PTX text; anything else (a cubin,
// a fatbin, a code object) is opaque.
func parseImage(image []byte) (*parsedImage, error) {
	switch {
	case bytes.HasPrefix(image, []byte(simImageMagic)):
		return parseSimImage(image)
	case bytes.Contains(image, []byte(".version")) && bytes.Contains(image, []byte(".target")):
		p := &parsedImage{format: "PTX", names: map[string]bool{}}
		for _, m := range ptxEntry.FindAllSubmatch(image, -1) {
			p.names[string(m[1])] = true
		}
		seen := map[string]bool{}
		for _, m := range ptxGlobal.FindAllSubmatch(image, -1) {
			name := string(m[3])
			if seen[name] {
				return nil, fmt.Errorf("PTX global %s declared twice", name)
			}
			seen[name] = true
			bits, err := strconv.Atoi(string(m[2]))
			if err != nil || bits < 1 || bits > 128 {
				return nil, fmt.Errorf("PTX global %s: bad type width %q", name, m[2])
			}
			size := uint64(max(bits/8, 1))
			if len(m[4]) > 0 {
				n, err := strconv.ParseUint(string(m[4]), 10, 40)
				if err != nil {
					return nil, fmt.Errorf("PTX global %s: bad length %q", m[3], m[4])
				}
				size *= n
			}
			if size > 0 {
				p.globals = append(p.globals, Global{Name: string(m[3]), Size: size})
			}
		}
		return p, nil
	}
	return &parsedImage{format: "opaque"}, nil
}

func parseSimImage(image []byte) (*parsedImage, error) {
	p := &parsedImage{format: "simulator", names: map[string]bool{}}
	sc := bufio.NewScanner(bytes.NewReader(image[len(simImageMagic):]))
	seen := map[string]bool{}
	for line := 2; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 0:
		case f[0] == "kernel" && len(f) == 2:
			p.names[f[1]] = true
		case f[0] == "global" && (len(f) == 3 || len(f) == 4):
			size, err := strconv.ParseUint(f[2], 10, 40)
			if err != nil || size == 0 {
				return nil, fmt.Errorf("line %d: global %s: bad size %q", line, f[1], f[2])
			}
			gl := Global{Name: f[1], Size: size}
			if len(f) == 4 {
				if gl.Init, err = hex.DecodeString(f[3]); err != nil || uint64(len(gl.Init)) > size {
					return nil, fmt.Errorf("line %d: global %s: bad initial bytes", line, f[1])
				}
			}
			if seen[gl.Name] {
				return nil, fmt.Errorf("line %d: global %s declared twice", line, f[1])
			}
			seen[gl.Name] = true
			p.globals = append(p.globals, gl)
		default:
			return nil, fmt.Errorf("line %d: %q is not a kernel or global declaration", line, sc.Text())
		}
	}
	return p, sc.Err()
}

// kernelState is the GPU's kernels: its own registrations, and the loaded
// modules and their functions (under the GPU's lock).
type kernelState struct {
	reg     kernelRegistry
	modules map[uintptr]*module
	funcs   map[uintptr]*function
}

type module struct {
	h        uintptr
	dev      *device
	img      *parsedImage
	globals  map[string]*object
	funcs    map[string]*function
	unloaded bool
	stack    stack
}

type function struct {
	h      uintptr
	mod    *module
	k      *Kernel // the registration it resolved to when looked up
	maxDyn int     // the dynamic shared memory limit
}

var (
	_ gpumem.Kernels       = (*GPU)(nil)
	_ gpumem.ParamReporter = (*GPU)(nil)
)

// ModuleLoadData loads a module on device dev. The image is a simulator
// image (ModuleImage.Bytes), PTX text, or anything else a compiler makes
// (a cubin, a fatbin, a code object), which the simulator does not read.
// A simulator image or PTX declares the module's kernel names (PTX's
// .entry directives) and globals (PTX's .global and .const variables,
// zeroed: initializers are not read); ModuleFunction finds only the names
// declared, and only if a kernel of that name is registered. An opaque
// image declares nothing: every registered kernel is one of its functions,
// and it has no globals. Globals are device memory counted against the
// device's capacity.
func (g *GPU) ModuleLoadData(dev int, image []byte) (gpumem.Module, error) {
	if err := g.enter(symtab.ModuleLoadData); err != nil {
		return gpumem.Module{}, err
	}
	if dev < 0 || dev >= len(g.devs) {
		return gpumem.Module{}, errf(symtab.ModuleLoadData, symtab.CUDAInvalidDevice, "device %d does not exist", dev)
	}
	if len(image) == 0 {
		return gpumem.Module{}, errf(symtab.ModuleLoadData, symtab.CUDAInvalidValue, "empty image")
	}
	img, err := parseImage(image)
	if err != nil {
		return gpumem.Module{}, errf(symtab.ModuleLoadData, symtab.CUDAInvalidValue, "bad image: %v", err)
	}
	stk := g.callers(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	d := g.devs[dev]
	m := &module{h: g.handle(), dev: d, img: img, globals: map[string]*object{}, funcs: map[string]*function{}, stack: stk}
	for _, gl := range img.globals {
		rs := roundUp(gl.Size, Alignment)
		start, ok := uint64(0), g.reserve(d, rs)
		if ok {
			if start, ok = d.va.alloc(rs); !ok {
				d.used -= rs
			}
		}
		if !ok {
			g.unloadLocked(m)
			return gpumem.Module{}, errf(symtab.ModuleLoadData, symtab.CUDAOutOfMemory, "global %s of %d bytes", gl.Name, gl.Size)
		}
		o := g.newObject(objGlobal, start, rs, gl.Size, dev, stk)
		g.spans.insert(start, o)
		m.globals[gl.Name] = o
		g.writeMem(start, gl.Init)
	}
	if g.kern.modules == nil {
		g.kern.modules = map[uintptr]*module{}
		g.kern.funcs = map[uintptr]*function{}
	}
	g.kern.modules[m.h] = m
	return gpumem.Module{Device: dev, Handle: m.h}, nil
}

// lookupModule resolves a module handle; lock held.
func (g *GPU) lookupModule(k symtab.Op, h gpumem.Module) (*module, error) {
	m := g.kern.modules[h.Handle]
	if m == nil || m.dev.ord != h.Device {
		return nil, errf(k, symtab.CUDAInvalidHandle, "module(dev %d, %#x) is not a loaded module", h.Device, h.Handle)
	}
	return m, nil
}

// unloadLocked frees m's globals and forgets its functions; lock held.
func (g *GPU) unloadLocked(m *module) {
	m.unloaded = true
	for _, o := range m.globals {
		o.freed = true
		g.spans.remove(o.start, o)
		g.dropTags(o.start, o.size)
		d := g.devs[o.dev]
		d.used -= o.size
		d.store.drop(o.start, o.size)
		d.va.release(o.start, o.size)
	}
	for _, f := range m.funcs {
		delete(g.kern.funcs, f.h)
	}
	delete(g.kern.modules, m.h)
}

// ModuleUnload unloads m: its globals are freed and its functions become
// invalid. Like Free, it first waits for the work queued on the device;
// graphs that launch its kernels later report a Violation.
func (g *GPU) ModuleUnload(h gpumem.Module) error {
	if err := g.enter(symtab.ModuleUnload); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	m, err := g.lookupModule(symtab.ModuleUnload, h)
	if err != nil {
		return err
	}
	if err := g.syncDevice(symtab.ModuleUnload, m.dev); err != nil {
		return err
	}
	g.unloadLocked(m)
	return nil
}

// ModuleFunction returns the kernel named name in m: a kernel registered
// under that name (GPU.RegisterKernel, then RegisterKernel) that m
// declares (see ModuleLoadData). Anything else is CUDA_ERROR_NOT_FOUND.
// Looking a name up again returns the same function.
func (g *GPU) ModuleFunction(h gpumem.Module, name string) (gpumem.Function, error) {
	if err := g.enter(symtab.ModuleGetFunction); err != nil {
		return gpumem.Function{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	m, err := g.lookupModule(symtab.ModuleGetFunction, h)
	if err != nil {
		return gpumem.Function{}, err
	}
	if f := m.funcs[name]; f != nil {
		return gpumem.Function{Device: h.Device, Handle: f.h, Name: name}, nil
	}
	if m.img.names != nil && !m.img.names[name] {
		return gpumem.Function{}, errf(symtab.ModuleGetFunction, symtab.CUDANotFound, "the %s image declares no kernel %q", m.img.format, name)
	}
	k := g.lookupKernel(name)
	if k == nil {
		return gpumem.Function{}, errf(symtab.ModuleGetFunction, symtab.CUDANotFound, "no Go kernel is registered as %q (sim.RegisterKernel)", name)
	}
	f := &function{h: g.handle(), mod: m, k: k, maxDyn: defDynamicShared - k.SharedBytes}
	m.funcs[name] = f
	g.kern.funcs[f.h] = f
	return gpumem.Function{Device: h.Device, Handle: f.h, Name: name}, nil
}

// ModuleGlobal returns the address and size of the global name of m.
func (g *GPU) ModuleGlobal(h gpumem.Module, name string) (gpumem.Ptr, uint64, error) {
	if err := g.enter(symtab.ModuleGetGlobal); err != nil {
		return 0, 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	m, err := g.lookupModule(symtab.ModuleGetGlobal, h)
	if err != nil {
		return 0, 0, err
	}
	o := m.globals[name]
	if o == nil {
		return 0, 0, errf(symtab.ModuleGetGlobal, symtab.CUDANotFound, "the %s image declares no global %q", m.img.format, name)
	}
	return gpumem.Ptr(o.start), o.req, nil
}

// lookupFunc resolves a function handle of a loaded module; lock held.
func (g *GPU) lookupFunc(k symtab.Op, h gpumem.Function) (*function, error) {
	f := g.kern.funcs[h.Handle]
	if f == nil || f.mod.unloaded || f.mod.dev.ord != h.Device {
		return nil, errf(k, symtab.CUDAInvalidHandle, "function(dev %d, %#x) %q is not a function of a loaded module", h.Device, h.Handle, h.Name)
	}
	return f, nil
}

// FuncParams lists f's parameters as its registration declares them
// (sim.Kernel.Params), at the offsets of the simulator's copy of a launch's
// arguments (packed, in order).
func (g *GPU) FuncParams(h gpumem.Function) ([]gpumem.ParamInfo, error) {
	if err := g.enter(symtab.FuncGetParamInfo); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	f, err := g.lookupFunc(symtab.FuncGetParamInfo, h)
	if err != nil {
		return nil, err
	}
	out := make([]gpumem.ParamInfo, len(f.k.Params))
	for i, p := range f.k.Params {
		out[i] = gpumem.ParamInfo{Offset: uint64(f.k.off[i]), Size: uint64(p.Size)}
	}
	return out, nil
}

// FuncAttribute reads an attribute of f: MaxThreads, SharedBytes and Regs
// of its registration, no constant or local memory, PTX and binary version
// 90 (compute capability 9.0), and its dynamic shared memory limit (48 KiB
// less its static shared memory until FuncSetMaxDynamicSharedMemory).
func (g *GPU) FuncAttribute(h gpumem.Function, a gpumem.FuncAttribute) (int, error) {
	if err := g.enter(symtab.FuncGetAttribute); err != nil {
		return 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	f, err := g.lookupFunc(symtab.FuncGetAttribute, h)
	if err != nil {
		return 0, err
	}
	switch a {
	case gpumem.FuncMaxThreadsPerBlock:
		return f.k.maxThreads(), nil
	case gpumem.FuncSharedSizeBytes:
		return f.k.SharedBytes, nil
	case gpumem.FuncConstSizeBytes, gpumem.FuncLocalSizeBytes:
		return 0, nil
	case gpumem.FuncNumRegs:
		return f.k.Regs, nil
	case gpumem.FuncPTXVersion, gpumem.FuncBinaryVersion:
		return 90, nil
	case gpumem.FuncMaxDynamicSharedSizeBytes:
		return f.maxDyn, nil
	}
	return 0, errf(symtab.FuncGetAttribute, symtab.CUDAInvalidValue, "unknown function attribute %d", int(a))
}

// FuncSetMaxDynamicSharedMemory sets the dynamic shared memory limit of f:
// at most 227 KiB less its static shared memory, as on an H100 or H200.
func (g *GPU) FuncSetMaxDynamicSharedMemory(h gpumem.Function, n int) error {
	if err := g.enter(symtab.FuncSetAttribute); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	f, err := g.lookupFunc(symtab.FuncSetAttribute, h)
	if err != nil {
		return err
	}
	if n < 0 || n > maxBlockShared-f.k.SharedBytes {
		return errf(symtab.FuncSetAttribute, symtab.CUDAInvalidValue, "%d bytes of dynamic shared memory (at most %d with %d static)", n, maxBlockShared-f.k.SharedBytes, f.k.SharedBytes)
	}
	f.maxDyn = n
	return nil
}

// The occupancy model: one multiprocessor of an H100 or H200.
const (
	smThreads    = 2048      // resident threads
	smBlocks     = 32        // resident blocks
	smRegisters  = 65536     // 32-bit registers
	smShared     = 228 << 10 // shared memory
	smCount      = 132       // multiprocessors of the device
	warpSize     = 32
	regAllocUnit = 256 // registers are allocated per warp in units of 256
)

// activeBlocks is the occupancy model; blockSize is in [1, maxThreads].
func activeBlocks(k *Kernel, blockSize int, dynSmem uint64) int {
	warps := (blockSize + warpSize - 1) / warpSize
	n := min(smBlocks, smThreads/(warps*warpSize))
	if smem := uint64(k.SharedBytes) + dynSmem; smem > 0 {
		n = min(n, int(min(smShared/smem, smBlocks)))
	}
	if k.Regs > 0 {
		perWarp := (k.Regs*warpSize + regAllocUnit - 1) / regAllocUnit * regAllocUnit
		n = min(n, smRegisters/(perWarp*warps))
	}
	return n
}

// OccupancyMaxActiveBlocks is the number of blocks of blockSize threads,
// with dynSmem bytes of dynamic shared memory each, that fit on one
// simulated multiprocessor: 2048 threads in whole warps of 32, at most 32
// blocks, 228 KiB of shared memory and 65536 registers (allocated per warp
// in units of 256) when the kernel registered Regs. A block larger than
// the kernel's MaxThreads gives 0.
func (g *GPU) OccupancyMaxActiveBlocks(h gpumem.Function, blockSize int, dynSmem uint64) (int, error) {
	if err := g.enter(symtab.OccupancyMaxActiveBlocks); err != nil {
		return 0, err
	}
	g.mu.Lock()
	f, err := g.lookupFunc(symtab.OccupancyMaxActiveBlocks, h)
	g.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if blockSize <= 0 {
		return 0, errf(symtab.OccupancyMaxActiveBlocks, symtab.CUDAInvalidValue, "block size %d", blockSize)
	}
	if blockSize > f.k.maxThreads() || dynSmem > maxBlockShared {
		return 0, nil
	}
	return activeBlocks(f.k, blockSize, dynSmem), nil
}

// OccupancyMaxPotentialBlockSize returns the block size (a multiple of 32,
// at most the kernel's MaxThreads and blockLimit when it is positive) that
// keeps the most threads active on a multiprocessor (the largest such
// size on a tie), and the grid that fills the device's 132
// multiprocessors with it.
func (g *GPU) OccupancyMaxPotentialBlockSize(h gpumem.Function, dynSmem uint64, blockLimit int) (minGrid, blockSize int, err error) {
	if err := g.enter(symtab.OccupancyMaxPotentialBlockSize); err != nil {
		return 0, 0, err
	}
	g.mu.Lock()
	f, err := g.lookupFunc(symtab.OccupancyMaxPotentialBlockSize, h)
	g.mu.Unlock()
	if err != nil {
		return 0, 0, err
	}
	if blockLimit < 0 {
		return 0, 0, errf(symtab.OccupancyMaxPotentialBlockSize, symtab.CUDAInvalidValue, "block size limit %d", blockLimit)
	}
	if dynSmem > maxBlockShared {
		return 0, 0, errf(symtab.OccupancyMaxPotentialBlockSize, symtab.CUDAInvalidValue, "%d bytes of dynamic shared memory (a block has at most %d)", dynSmem, maxBlockShared)
	}
	limit := f.k.maxThreads()
	if blockLimit > 0 {
		limit = min(limit, blockLimit)
	}
	best, bestBlocks := 0, 0
	for bs := limit; bs > 0; bs = (bs - 1) / warpSize * warpSize {
		if n := activeBlocks(f.k, bs, dynSmem); n*bs > bestBlocks*best {
			best, bestBlocks = bs, n
		}
	}
	if best == 0 {
		return 0, 0, errf(symtab.OccupancyMaxPotentialBlockSize, symtab.CUDAInvalidValue, "no block size fits %d bytes of dynamic shared memory", dynSmem)
	}
	return bestBlocks * smCount, best, nil
}

// moduleLeaks describes the loaded modules; lock held.
func (g *GPU) moduleLeaks(add func(string, *stack)) {
	for _, m := range g.kern.modules {
		names := make([]string, 0, len(m.globals))
		for n := range m.globals {
			names = append(names, n)
		}
		sort.Strings(names)
		add(fmt.Sprintf("module(dev %d, %#x) from a %s image with globals %v", m.dev.ord, m.h, m.img.format, names), &m.stack)
	}
}
