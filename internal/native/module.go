package native

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/symtab"
)

// Modules and functions (gpumem.Kernels).
//
// CUDA 12.0 and later load through the library API: cuLibraryLoadData
// gives a context-independent CUlibrary, cuLibraryGetKernel a CUkernel and
// cuKernelGetFunction the CUfunction of the current context, which the call
// path makes the module's device's. Older drivers, and HIP, use the module
// API (cuModuleLoadData, hipModuleLoadData) in the device's context. One
// backend uses one API for all its modules: the library API when all four
// of its symbols resolved.

var _ gpumem.Kernels = (*Backend)(nil)

// libraryAPI reports whether modules are CUlibrary handles.
func (b *Backend) libraryAPI() bool {
	return b.fns[symtab.LibraryLoadData] != 0 && b.fns[symtab.LibraryUnload] != 0 &&
		b.fns[symtab.LibraryGetKernel] != 0 && b.fns[symtab.KernelGetFunction] != 0
}

// call12 is call for functions of more than six arguments.
func (b *Backend) call12(dev int, op symtab.Op, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12 uintptr) error {
	fn, err := b.target(dev, op)
	if err != nil {
		return err
	}
	r, preFailed := ccall.CallPre12(b.pre, b.cur[dev], fn, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12)
	if int32(r) == 0 {
		return nil
	}
	return b.failed(op, r, preFailed)
}

func (b *Backend) invalid(format string, a ...any) error {
	return fmt.Errorf("gpumem: %s: %s: %w", b.d.Name, fmt.Sprintf(format, a...), gpumem.ErrInvalidValue)
}

// cString copies s into Go heap memory (which does not move) with a NUL
// appended. A string holding a NUL cannot be passed.
func (b *Backend) cString(what, s string) ([]byte, error) {
	if s == "" || strings.IndexByte(s, 0) >= 0 {
		return nil, b.invalid("%s %q: empty or holds a NUL byte", what, s)
	}
	c := make([]byte, len(s)+1)
	copy(c, s)
	return c, nil
}

func addr(p []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(p))) }

// ModuleLoadData loads a module from image on dev. The image is copied into
// Go heap memory with a NUL appended (PTX is NUL-terminated text; binary
// images carry their size and ignore it) and kept alive for the call; both
// vendors copy what they keep.
func (b *Backend) ModuleLoadData(dev int, image []byte) (gpumem.Module, error) {
	if len(image) == 0 {
		return gpumem.Module{}, b.invalid("ModuleLoadData: empty image")
	}
	img := make([]byte, len(image)+1)
	copy(img, image)
	c := getCell()
	defer putCell(c)
	var err error
	if b.libraryAPI() {
		// cuLibraryLoadData(&lib, code, jitOptions, jitOptionValues,
		// numJitOptions, libraryOptions, libraryOptionValues,
		// numLibraryOptions): no options.
		err = b.call12(dev, symtab.LibraryLoadData, c.addr(0), addr(img), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	} else {
		err = b.call(dev, symtab.ModuleLoadData, c.addr(0), addr(img), 0, 0, 0, 0)
	}
	runtime.KeepAlive(img)
	if err != nil {
		return gpumem.Module{}, err
	}
	b.modules.made(uintptr(c[0]))
	return gpumem.Module{Device: dev, Handle: uintptr(c[0])}, nil
}

// ModuleUnload unloads m. A module this backend unloaded is refused
// without reaching the library.
func (b *Backend) ModuleUnload(m gpumem.Module) error {
	if m.Handle == 0 {
		return b.invalid("ModuleUnload: zero module")
	}
	if err := b.refuseDead(&b.modules, "module", m.Handle); err != nil {
		return err
	}
	op := symtab.ModuleUnload
	if b.libraryAPI() {
		op = symtab.LibraryUnload
	}
	if err := b.call(m.Device, op, m.Handle, 0, 0, 0, 0, 0); err != nil {
		return err
	}
	b.modules.destroyed(m.Handle)
	b.params.drop(m.Handle)
	return nil
}

// ModuleFunction returns the kernel of m named name, as a function of m's
// device. Where the driver reports kernels' parameters, it learns how many
// the kernel takes, and LaunchKernel checks launches against it.
func (b *Backend) ModuleFunction(m gpumem.Module, name string) (gpumem.Function, error) {
	if m.Handle == 0 {
		return gpumem.Function{}, b.invalid("ModuleFunction: zero module")
	}
	if err := b.refuseDead(&b.modules, "module", m.Handle); err != nil {
		return gpumem.Function{}, err
	}
	cname, err := b.cString("kernel name", name)
	if err != nil {
		return gpumem.Function{}, err
	}
	c := getCell()
	defer putCell(c)
	if b.libraryAPI() {
		err = b.call(m.Device, symtab.LibraryGetKernel, c.addr(0), m.Handle, addr(cname), 0, 0, 0)
		if err == nil {
			err = b.call(m.Device, symtab.KernelGetFunction, c.addr(1), uintptr(c[0]), 0, 0, 0, 0)
		}
	} else {
		err = b.call(m.Device, symtab.ModuleGetFunction, c.addr(1), m.Handle, addr(cname), 0, 0, 0)
	}
	runtime.KeepAlive(cname)
	if err != nil {
		return gpumem.Function{}, fmt.Errorf("kernel %q: %w", name, err)
	}
	f := uintptr(c[1])
	b.learnParams(m.Handle, f, m.Device, name)
	return gpumem.Function{Device: m.Device, Handle: f, Name: name}, nil
}

// ModuleGlobal returns the device address and size of the global name of
// m on m's device.
func (b *Backend) ModuleGlobal(m gpumem.Module, name string) (gpumem.Ptr, uint64, error) {
	if m.Handle == 0 {
		return 0, 0, b.invalid("ModuleGlobal: zero module")
	}
	if err := b.refuseDead(&b.modules, "module", m.Handle); err != nil {
		return 0, 0, err
	}
	cname, err := b.cString("global name", name)
	if err != nil {
		return 0, 0, err
	}
	c := getCell()
	defer putCell(c)
	op := symtab.ModuleGetGlobal
	if b.libraryAPI() {
		op = symtab.LibraryGetGlobal
	}
	// (CUdeviceptr *dptr, size_t *bytes, CUlibrary/CUmodule, const char *name)
	err = b.call(m.Device, op, c.addr(0), c.addr(1), m.Handle, addr(cname), 0, 0)
	runtime.KeepAlive(cname)
	if err != nil {
		return 0, 0, fmt.Errorf("global %q: %w", name, err)
	}
	return gpumem.Ptr(c[0]), c[1], nil
}

// FuncAttribute reads an attribute of f.
func (b *Backend) FuncAttribute(f gpumem.Function, a gpumem.FuncAttribute) (int, error) {
	if f.Handle == 0 {
		return 0, b.invalid("FuncAttribute: zero function")
	}
	v, ok := b.d.FuncAttribute(a)
	if !ok {
		return 0, b.invalid("unknown function attribute %d", int(a))
	}
	c := getCell()
	defer putCell(c)
	// (int *pi, CUfunction_attribute attrib, CUfunction hfunc)
	if err := b.call(f.Device, symtab.FuncGetAttribute, c.addr(0), uintptr(v), f.Handle, 0, 0, 0); err != nil {
		return 0, err
	}
	return int(c.i32(0)), nil
}

// maxParams bounds the parameters FuncParams asks for: the parameters of a
// launch take at most 32764 bytes, so no kernel has more than that many.
const maxParams = 32764

// FuncParams lists f's parameters (cuFuncGetParamInfo, CUDA 12.4+), index
// after index until the driver answers CUDA_ERROR_INVALID_VALUE: the index
// past the last parameter. For a kernel of ModuleFunction the list it
// learnt then is returned, with no call.
func (b *Backend) FuncParams(f gpumem.Function) ([]gpumem.ParamInfo, error) {
	if f.Handle == 0 {
		return nil, b.invalid("FuncParams: zero function")
	}
	if _, err := b.target(f.Device, symtab.FuncGetParamInfo); err != nil {
		return nil, err // closed, another device, or no such symbol
	}
	if ps, ok := b.params.get(f.Handle); ok {
		return slices.Clone(ps), nil // learnt by ModuleFunction
	}
	return b.funcParams(f.Handle, f.Device, f.Name)
}

// funcParams asks the driver for the parameters of function f of device
// dev, one index at a time, until it answers that there are no more.
func (b *Backend) funcParams(f uintptr, dev int, name string) ([]gpumem.ParamInfo, error) {
	c := getCell()
	defer putCell(c)
	var out []gpumem.ParamInfo
	for i := 0; i < maxParams; i++ {
		// (CUfunction func, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
		r, preFailed, err := b.invoke(dev, symtab.FuncGetParamInfo, f, uintptr(i), c.addr(0), c.addr(1), 0, 0)
		if err != nil {
			return nil, err
		}
		if int32(r) != 0 {
			err := b.failed(symtab.FuncGetParamInfo, r, preFailed)
			if !preFailed && errors.Is(err, gpumem.ErrInvalidValue) {
				return out, nil
			}
			return nil, err
		}
		out = append(out, gpumem.ParamInfo{Offset: c[0], Size: c[1]})
	}
	return nil, b.invalid("FuncParams: %s reports more than %d parameters", name, maxParams)
}

// FuncSetMaxDynamicSharedMemory sets the dynamic shared-memory limit of f
// (cuFuncSetAttribute with CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES).
// HIP has no such setting for a hipFunction_t (hipFuncSetAttribute takes a
// host stub) and needs none: a kernel may use all of the LDS it has room
// for, so the backend checks bytes against the function's attribute
// instead and fails with ErrInvalidValue above it.
func (b *Backend) FuncSetMaxDynamicSharedMemory(f gpumem.Function, bytes int) error {
	if f.Handle == 0 {
		return b.invalid("FuncSetMaxDynamicSharedMemory: zero function")
	}
	if bytes < 0 || bytes > 1<<31-1 {
		return b.invalid("FuncSetMaxDynamicSharedMemory: %d bytes", bytes)
	}
	if symtab.Driver.Rows[symtab.FuncSetAttribute].Symbol[b.d.Vendor] == "" {
		limit, err := b.FuncAttribute(f, gpumem.FuncMaxDynamicSharedSizeBytes)
		if err != nil {
			return err
		}
		if bytes > limit {
			return b.invalid("kernel %q: %d bytes of dynamic shared memory, the device allows %d", f.Name, bytes, limit)
		}
		return nil
	}
	v, ok := b.d.FuncAttribute(gpumem.FuncMaxDynamicSharedSizeBytes)
	if !ok {
		return b.notSupported(symtab.FuncSetAttribute)
	}
	// (CUfunction hfunc, CUfunction_attribute attrib, int value)
	return b.call(f.Device, symtab.FuncSetAttribute, f.Handle, uintptr(v), uintptr(bytes), 0, 0, 0)
}
