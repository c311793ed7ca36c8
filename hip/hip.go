// Package hip is the HIP runtime backend of gpumem: libamdhip64.so, loaded at
// run time without cgo.
//
// It is the project's shared vendor implementation (internal/native) with the
// HIP column of the symbol table and HIP's numbering of enums, device
// attributes, advice (including the coarse-grain advice 100 and 101),
// locations, struct layouts and status codes, checked against the HIP
// headers. Importing the package registers it with gpumem.Open under the name
// "hip".
//
// # Threads
//
// HIP's current device belongs to an OS thread. Every call makes its device
// current (hipSetDevice) and runs the operation in the same transition into
// C, so callers on any goroutine never lock OS threads.
//
// # Versions
//
// hipMemAllocationProp changed layout after HIP 5: the 5.x runtimes read
// {compressionType, location, requestedHandleType, type, usage, win32}; later
// ones the CUDA-like {type, requestedHandleType, location, win32, allocFlags}.
// The backend writes the one the loaded runtime's version reads.
// hipMemPoolProps has a maxSize only in HIP 6 and later; a pool with a
// maximum size is not supported before that.
package hip

import (
	"fmt"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/dl"
	"github.com/gpumem/gpumem/internal/native"
	"github.com/gpumem/gpumem/internal/symtab"
)

func init() {
	gpumem.Register(gpumem.Registration{
		Name:       "hip",
		LibraryEnv: "GPUMEM_HIP_LIBRARY",
		AutoOrder:  2,
		Open:       Open,
		Symbols:    Symbols,
		FormatVersion: func(v int) string {
			if v < 10000000 {
				return "" // not major*10^7 + minor*10^5 + patch
			}
			return FormatVersion(v)
		},
	})
}

// Open loads the HIP runtime (library, or the candidate names when library
// is ""), initialises it and counts the devices. With no device it fails
// with an error matching gpumem.ErrNoDevice that names the library; with no
// loadable library, one matching gpumem.ErrLibraryNotFound; with a library
// that lacks a required symbol, one naming the symbol.
func Open(library string) (gpumem.Backend, error) {
	return open(native.DL, library)
}

func open(load native.Loader, library string) (gpumem.Backend, error) {
	return native.OpenBackend(&dialect, load, library)
}

// Symbols resolves the symbol table against a HIP runtime library without
// needing a device. The version is the runtime's (hipRuntimeGetVersion), as
// "5.2.21153".
func Symbols(library string) (gpumem.SymbolReport, error) {
	return native.Report(&dialect, native.DL, library, func(b *native.Backend) string {
		v, err := b.Int32(symtab.RuntimeGetVersion)
		if err != nil {
			return ""
		}
		return FormatVersion(v)
	})
}

// Table returns the HIP column of the symbol table, unresolved.
func Table() []gpumem.SymbolRow { return native.Table(symtab.HIP) }

// FormatVersion formats a HIP version number (major*10^7 + minor*10^5 +
// patch, e.g. 50221153) as "5.2.21153".
func FormatVersion(v int) string {
	return fmt.Sprintf("%d.%d.%d", v/10000000, v/100000%100, v%100000)
}

// Candidates are the library names Open tries when given none.
func Candidates() []string { return append([]string(nil), dl.HIPCandidates...) }

// hip6 is the first runtime version with the CUDA-like hipMemAllocationProp
// and a maxSize in hipMemPoolProps.
const hip6 = 60000000

var dialect = native.Dialect{
	Vendor:         symtab.HIP,
	Name:           "hip",
	Candidates:     dl.HIPCandidates,
	Start:          start,
	ErrorName:      errorName,
	Attribute:      attribute,
	Advice:         advice,
	MemcpyKind:     true,
	WriteAllocProp: writeAllocProp,
	FuncAttribute:  funcAttribute,
	PoolMaxSize:    func(b *native.Backend) bool { return b.RuntimeVersion >= hip6 },
	Versions: func(b *native.Backend) (gpumem.Version, error) {
		d, err := b.Int32(symtab.DriverGetVersion)
		if err != nil {
			return gpumem.Version{}, err
		}
		r, err := b.Int32(symtab.RuntimeGetVersion)
		return gpumem.Version{Driver: d, Runtime: r}, err
	},
}

func start(b *native.Backend) error {
	r, err := b.Raw(symtab.Init, 0)
	if err != nil {
		return err
	}
	// Without a GPU, HIP 5.2's hipInit returns hipErrorInvalidDevice (101)
	// while hipGetDeviceCount says hipErrorNoDevice (100): ask the count
	// before judging the init status.
	initErr := b.Status(symtab.Init, r)
	n, err := b.Int32(symtab.DeviceGetCount)
	if err != nil {
		if initErr != nil {
			return fmt.Errorf("%w (after %v)", err, initErr)
		}
		return err
	}
	if n <= 0 {
		return fmt.Errorf("hipGetDeviceCount reports no device: %w", gpumem.ErrNoDevice)
	}
	if initErr != nil {
		return initErr
	}
	if v, err := b.Int32(symtab.RuntimeGetVersion); err == nil {
		b.RuntimeVersion = v
	}
	if v, err := b.Int32(symtab.DriverGetVersion); err == nil {
		b.DriverVersion = v
	}
	cur := make([]uintptr, n)
	handles := make([]int32, n)
	for i := range cur {
		cur[i], handles[i] = uintptr(i), int32(i)
	}
	b.SetDevices(b.Fn(symtab.SetCurrent), cur, handles)
	return nil
}

func errorName(b *native.Backend, code int) string {
	r, err := b.Raw(symtab.GetErrorName, uintptr(uint32(int32(code))))
	if err != nil {
		return ""
	}
	return ccall.GoString(r)
}

func writeAllocProp(b *native.Backend, buf *[native.AllocPropSize]byte, dev int32) {
	*buf = [native.AllocPropSize]byte{}
	put := func(off int, v int32) { *(*int32)(unsafe.Pointer(&buf[off])) = v }
	if b.RuntimeVersion < hip6 {
		// HIP 5.x: compressionType@0 (uchar), location{type@4, id@8},
		// requestedHandleType@12, type@16, usage@20, win32HandleMetaData@24.
		put(4, native.LocationTypeDevice)
		put(8, dev)
		put(16, native.AllocationTypePinned)
		return
	}
	// HIP 6+: type@0, requestedHandleType@4, location{type@8, id@12},
	// win32HandleMetaData@16, allocFlags@24.
	put(0, native.AllocationTypePinned)
	put(8, native.LocationTypeDevice)
	put(12, dev)
}

// ErrorName loads the HIP runtime library (without initialising it) and
// returns its name for a hipError_t (hipGetErrorName).
func ErrorName(library string, code int) (string, error) {
	return native.LibraryErrorName(&dialect, native.DL, library, code)
}
