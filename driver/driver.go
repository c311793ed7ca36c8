// Package driver is the CUDA driver API backend of gpumem: libcuda.so.1,
// loaded at run time without cgo.
//
// It is the project's shared vendor implementation (one per process, see
// internal/native) with the CUDA column of the symbol table and CUDA's
// numbering of enums, attributes, advice, locations, struct layouts and
// status codes. Importing the package registers it with gpumem.Open under
// the name "cuda".
//
// # Versions
//
// Symbols are looked up by their version-correct names (cuMemAlloc_v2,
// cuMemFree_v2, cuStreamBeginCapture_v2, ...). Once the driver is
// initialised each one is resolved again through cuGetProcAddress_v2 (or
// cuGetProcAddress on 11.x) with the base name and the CUDA version whose
// ABI the project calls, so the driver picks the same variant. On CUDA 12.2
// and later cuMemAdvise_v2 and cuMemPrefetchAsync_v2 take a CUmemLocation by
// value, passed as one packed 64-bit register; older drivers get the
// CUdevice forms with CU_DEVICE_CPU (-1) for the host.
//
// # Threads
//
// Open retains each device's primary context (cuDevicePrimaryCtxRetain) and
// every call makes its device's context current on the calling thread in the
// same transition into C (cuCtxSetCurrent, then the operation), so callers on
// any goroutine never lock OS threads. Close releases the contexts.
//
// # Short calls
//
// The stream-ordered allocation and free (cuMemAllocFromPoolAsync,
// cuMemFreeAsync, cuMemAllocAsync) are short calls: made with the
// goroutine pinned to its processor, on a C stack of the processor's own,
// without the scheduler's system-call state, about 40 ns less a call. They
// are ordinary calls while any host function or graph callback of gpumem's
// may still run, and for the life of the process with GPUMEM_SHORT_CALLS=0.
// A program that hands the driver Go functions by other means (its own
// purego callbacks), or makes the device wait on host memory a goroutine
// writes, brackets that with HoldShortCalls (docs/architecture.md, "Short
// calls", says why).
package driver

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/dl"
	"github.com/gpumem/gpumem/internal/native"
	"github.com/gpumem/gpumem/internal/symtab"
)

func init() {
	gpumem.Register(gpumem.Registration{
		Name:          "cuda",
		LibraryEnv:    "GPUMEM_CUDA_LIBRARY",
		AutoOrder:     1,
		Open:          Open,
		Symbols:       Symbols,
		FormatVersion: FormatVersion,
	})
}

// Open loads the CUDA driver (library, or libcuda.so.1 and its other
// candidate names when library is ""), initialises it and retains every
// device's primary context. With no device it fails with an error matching
// gpumem.ErrNoDevice that names the library; with no loadable library, one
// matching gpumem.ErrLibraryNotFound; with a library that lacks a required
// symbol, one naming the symbol.
func Open(library string) (gpumem.Backend, error) {
	return open(native.DL, library)
}

func open(load native.Loader, library string) (gpumem.Backend, error) {
	return native.OpenBackend(&dialect, load, library)
}

// Symbols resolves the symbol table against a CUDA driver library without
// needing a device: every row by dlsym, and by cuGetProcAddress when cuInit
// succeeds. The version is the driver's (cuDriverGetVersion), as "12.2".
func Symbols(library string) (gpumem.SymbolReport, error) {
	return native.Report(&dialect, native.DL, library, func(b *native.Backend) string {
		v, err := driverVersion(b)
		if err != nil {
			return ""
		}
		b.DriverVersion = v
		if r, err := b.Raw(symtab.Init, 0); err == nil && int32(r) == 0 {
			refine(b)
		}
		return FormatVersion(v)
	})
}

// Table returns the CUDA column of the symbol table, unresolved.
func Table() []gpumem.SymbolRow { return native.Table(symtab.CUDA) }

// FormatVersion formats a CUDA version number (12020) as "12.2".
func FormatVersion(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

// Candidates are the library names Open tries when given none.
func Candidates() []string { return append([]string(nil), dl.CUDACandidates...) }

var dialect = native.Dialect{
	Vendor:            symtab.CUDA,
	Name:              "cuda",
	Candidates:        dl.CUDACandidates,
	Start:             start,
	Stop:              stop,
	Refine:            refine,
	ErrorName:         errorName,
	Attribute:         func(_ *native.Backend, a gpumem.Attribute) (int32, bool) { return symtab.Translate(attributes, a) },
	Advice:            func(a gpumem.Advice) (int32, bool) { return symtab.Translate(advices, a) },
	WriteAllocProp:    writeAllocProp,
	FuncAttribute:     func(a gpumem.FuncAttribute) (int32, bool) { return symtab.Translate(funcAttributes, a) },
	OccupancyCallback: true,
	DirectCalls:       true,
	PoolMaxSize:       func(b *native.Backend) bool { return b.DriverVersion >= cuda122 },
	ABI: func(b *native.Backend) (map[string]gpumem.StructLayout, map[string]int64) {
		return ABI(b.DriverVersion)
	},
	MigrationAttribute: gpumem.AttrConcurrentManagedAccess,
	Target:             target,
	Versions: func(b *native.Backend) (gpumem.Version, error) {
		v, err := driverVersion(b)
		return gpumem.Version{Driver: v, Runtime: v}, err
	},
}

func driverVersion(b *native.Backend) (int, error) { return b.Int32(symtab.DriverGetVersion) }

func start(b *native.Backend) error {
	r, err := b.Raw(symtab.Init, 0)
	if err != nil {
		return err
	}
	if err := b.Status(symtab.Init, r); err != nil {
		return err
	}
	v, err := driverVersion(b)
	if err != nil {
		return err
	}
	b.DriverVersion, b.RuntimeVersion = v, v
	refine(b)

	n, err := b.Int32(symtab.DeviceGetCount)
	if err != nil {
		return err
	}
	if n <= 0 {
		return fmt.Errorf("cuDeviceGetCount reports no device: %w", gpumem.ErrNoDevice)
	}
	ctxs := make([]uintptr, n)
	handles := make([]int32, n)
	release := func(upTo int) {
		for i := 0; i < upTo; i++ {
			b.Raw(symtab.PrimaryCtxRelease, uintptr(handles[i]))
		}
	}
	for i := range ctxs {
		h := new(int32)
		r, _ := b.Raw(symtab.DeviceGet, uintptr(unsafe.Pointer(h)), uintptr(i))
		runtime.KeepAlive(h)
		if err := b.Status(symtab.DeviceGet, r); err != nil {
			release(i)
			return err
		}
		handles[i] = *h
		ctx := new(uintptr)
		r, _ = b.Raw(symtab.PrimaryCtxRetain, uintptr(unsafe.Pointer(ctx)), uintptr(*h))
		runtime.KeepAlive(ctx)
		if err := b.Status(symtab.PrimaryCtxRetain, r); err != nil {
			release(i)
			return err
		}
		ctxs[i] = *ctx
	}
	b.SetDevices(b.Fn(symtab.SetCurrent), ctxs, handles)
	return nil
}

// stop releases the primary contexts start retained, each once: a context
// whose release failed is tried again by the next stop (b.Released).
func stop(b *native.Backend) error {
	var first error
	n := b.NumDevices()
	if len(b.Released) != n {
		b.Released = make([]bool, n)
	}
	for i := 0; i < n; i++ {
		if b.Released[i] {
			continue
		}
		r, err := b.Raw(symtab.PrimaryCtxRelease, uintptr(b.Handle(i)))
		if err == nil {
			err = b.Status(symtab.PrimaryCtxRelease, r)
		}
		if err != nil {
			if first == nil {
				first = fmt.Errorf("gpumem: cuda: releasing device %d's primary context: %w", i, err)
			}
			continue
		}
		b.Released[i] = true
	}
	return first
}

// cuGetProcAddress flags and status.
const (
	procLegacyStream = 1 // CU_GET_PROC_ADDRESS_LEGACY_STREAM
	procSuccess      = 0 // CU_GET_PROC_ADDRESS_SUCCESS
)

// refine resolves every row again through cuGetProcAddress, asking for the
// base name at the row's ABI version (never above the driver's), so the
// driver hands out the variant whose signature the backend calls. Rows the
// driver will not resolve keep their dlsym address.
func refine(b *native.Backend) {
	v2, v1 := b.Fn(symtab.GetProcAddress), b.Fn(symtab.GetProcAddressV1)
	if v2 == 0 && v1 == 0 {
		return
	}
	pfn := new(uintptr)
	status := new(int32)
	for i := range symtab.Driver.Rows {
		row := &symtab.Driver.Rows[i]
		if row.Symbol[symtab.CUDA] == "" || row.ID == symtab.GetProcAddress || row.ID == symtab.GetProcAddressV1 {
			continue
		}
		if row.ABI[symtab.CUDA] > b.DriverVersion {
			continue
		}
		name := append([]byte(row.Base(symtab.CUDA)), 0)
		*pfn, *status = 0, 0
		var r uintptr
		if v2 != 0 {
			r = ccall.Call5(v2, uintptr(unsafe.Pointer(&name[0])), uintptr(unsafe.Pointer(pfn)),
				uintptr(row.ABI[symtab.CUDA]), procLegacyStream, uintptr(unsafe.Pointer(status)))
		} else {
			r = ccall.Call4(v1, uintptr(unsafe.Pointer(&name[0])), uintptr(unsafe.Pointer(pfn)),
				uintptr(row.ABI[symtab.CUDA]), procLegacyStream)
		}
		runtime.KeepAlive(name)
		if int32(r) == 0 && *status == procSuccess && *pfn != 0 {
			b.SetFn(row.ID, *pfn)
		}
	}
	runtime.KeepAlive(pfn)
	runtime.KeepAlive(status)
}

func errorName(b *native.Backend, code int) string {
	p := new(uintptr)
	r, err := b.Raw(symtab.GetErrorName, uintptr(uint32(int32(code))), uintptr(unsafe.Pointer(p)))
	runtime.KeepAlive(p)
	if err != nil || int32(r) != 0 || *p == 0 {
		return ""
	}
	return ccall.GoString(*p)
}

func writeAllocProp(_ *native.Backend, buf *[native.AllocPropSize]byte, dev int32) {
	// CUmemAllocationProp: type@0, requestedHandleTypes@4, location{type@8,
	// id@12}, win32HandleMetaData@16, allocFlags@24 (compressionType,
	// gpuDirectRDMACapable, usage, reserved[4]).
	*buf = [native.AllocPropSize]byte{}
	*(*uint32)(unsafe.Pointer(&buf[0])) = native.AllocationTypePinned
	*(*uint32)(unsafe.Pointer(&buf[8])) = native.LocationTypeDevice
	*(*int32)(unsafe.Pointer(&buf[12])) = dev
}

// ErrorName loads the CUDA driver library (without initialising it) and
// returns its name for a CUresult (cuGetErrorName), "" when it has none.
func ErrorName(library string, code int) (string, error) {
	return native.LibraryErrorName(&dialect, native.DL, library, code)
}

// target names a device's compile target from its compute capability:
// "sm_90" for 9.0.
func target(b *native.Backend, dev int) (string, error) {
	major, err := b.DeviceAttribute(dev, gpumem.AttrComputeCapabilityMajor)
	if err != nil {
		return "", err
	}
	minor, err := b.DeviceAttribute(dev, gpumem.AttrComputeCapabilityMinor)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("sm_%d%d", major, minor), nil
}
