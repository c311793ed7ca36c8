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
// The ABI changes the backend follows are data (abi.go): each struct layout
// and enum value with the first runtime version that has it, read from the
// HIP headers of every ROCm release from 5.2 to 7.2. hipMemAllocationProp
// has compressionType first up to 5.2 and the CUDA-like layout from 5.3;
// hipMemPoolProps has maxSize from 6.2 (a pool with a maximum size is not
// supported before that); the virtual-memory-management attribute exists
// from 5.3. ABI returns what the backend uses for a given version, and
// `gpumem symbols --json` reports it for a loaded library.
//
// # Behaviour that differs from CUDA
//
//   - hipMemUnmap releases only the mapping at the start address of a range
//     (clr up to at least 6.2): a range holding several MemMap mappings is
//     unmapped one mapping at a time.
//   - hipMemAddressReserve checks device 0's granularity and answers a
//     misaligned size with out of memory: reservation sizes are rounded up
//     to the largest minimum granularity over the devices.
//   - User-object destructors run inside the releasing HIP call under a
//     runtime-wide lock: the backend runs them on a new goroutine.
//   - Managed pages migrate on demand only with XNACK on, which pageable
//     memory access reports (ManagedPagesMigrate).
//   - Stream-ordered pools on gfx10 and gfx11 (compute capability major 10
//     and 11) return zeroed or failing memory unless the release threshold
//     is the maximum: the backend sets it so when it hands out a pool.
//   - Before 7.0 the allocators' VMM-backed defaults are off
//     (VirtualMemoryDefault), as PyTorch turns expandable segments off.
//   - A physical allocation is mapped at one address at a time
//     (MapsHandleTwice says no): HIP documents no second mapping of a
//     handle, clr tracks mappings by their start (the hipMemUnmap note
//     above), and it has not been run on an AMD GPU here. Expandable
//     segments' moves unmap on HIP.
package hip

import (
	"bytes"
	"fmt"
	"math"
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
		b.RuntimeVersion = v
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

var dialect = native.Dialect{
	Vendor:     symtab.HIP,
	Name:       "hip",
	Candidates: dl.HIPCandidates,
	Start:      start,
	ErrorName:  errorName,
	Attribute: func(b *native.Backend, a gpumem.Attribute) (int32, bool) {
		return symtab.TranslateAt(attributes, b.RuntimeVersion, a)
	},
	Advice:         func(a gpumem.Advice) (int32, bool) { return symtab.Translate(advices, a) },
	MemcpyKind:     true,
	WriteAllocProp: writeAllocProp,
	FuncAttribute:  func(a gpumem.FuncAttribute) (int32, bool) { return symtab.Translate(funcAttributes, a) },
	PoolMaxSize:    func(b *native.Backend) bool { return b.RuntimeVersion >= ABI62 },
	ABI: func(b *native.Backend) (map[string]gpumem.StructLayout, map[string]int64) {
		return ABI(b.RuntimeVersion)
	},
	MigrationAttribute:   gpumem.AttrPageableMemoryAccess,
	UnmapByMapping:       true,
	ReserveAligned:       true,
	DeferDestructors:     true,
	PoolSetup:            poolSetup,
	VirtualMemoryDefault: virtualMemoryDefault,
	SingleMapping:        singleMapping,
	Target:               target,
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

// allocProps are hipMemAllocationProp's forms, selected by version.
var allocProps = func() map[int]*symtab.Layout {
	out := map[int]*symtab.Layout{}
	for i := range layouts {
		if layouts[i].Struct == "hipMemAllocationProp" {
			out[layouts[i].From] = &layouts[i]
		}
	}
	return out
}()

func writeAllocProp(b *native.Backend, buf *[native.AllocPropSize]byte, dev int32) {
	*buf = [native.AllocPropSize]byte{}
	l := allocProps[0]
	if b.RuntimeVersion >= ABI53 {
		l = allocProps[ABI53]
	}
	put := func(off int, v int32) { *(*int32)(unsafe.Pointer(&buf[off])) = v }
	put(l.Offset("type"), native.AllocationTypePinned)
	put(l.Offset("location.type"), native.LocationTypeDevice)
	put(l.Offset("location.id"), dev)
}

// poolSetup raises a pool's release threshold to the maximum on gfx10 and
// gfx11 (HIP's compute capability major is the gfx IP major), where
// hipMallocAsync otherwise returns zeroed or failing memory.
func poolSetup(b *native.Backend, p gpumem.MemPool) error {
	major, err := b.DeviceAttribute(p.Device, gpumem.AttrComputeCapabilityMajor)
	if err != nil {
		return fmt.Errorf("reading the gfx IP major: %w", err)
	}
	if major != 10 && major != 11 {
		return nil
	}
	if err := b.MemPoolSetAttribute(p, gpumem.PoolReleaseThreshold, math.MaxUint64); err != nil {
		return fmt.Errorf("raising the release threshold on gfx%d: %w", major, err)
	}
	return nil
}

// singleMapping is why a physical allocation is mapped at one address at a
// time on HIP (the package comment has the detail).
const singleMapping = "HIP documents no second mapping of a physical allocation, and it is untried on AMD GPUs"

// virtualMemoryDefault turns the allocators' VMM-backed defaults off before
// HIP 7.0.
func virtualMemoryDefault(b *native.Backend) (bool, string) {
	if b.RuntimeVersion >= ABI70 {
		return true, ""
	}
	return false, fmt.Sprintf("HIP %s is older than 7.0, whose virtual memory API is the first PyTorch trusts for expandable segments", FormatVersion(b.RuntimeVersion))
}

// ErrorName loads the HIP runtime library (without initialising it) and
// returns its name for a hipError_t (hipGetErrorName).
func ErrorName(library string, code int) (string, error) {
	return native.LibraryErrorName(&dialect, native.DL, library, code)
}

// target names a device's compile target: its gcnArchName
// ("gfx90a:sramecc+:xnack-"), read from the device's properties
// (hipGetDevicePropertiesR0600 from 6.0, hipGetDeviceProperties before: the
// layouts of hipDeviceProp_t in abi.go, checked against each version's
// header). The compute capability attributes cannot tell gfx908 from gfx90a.
func target(b *native.Backend, dev int) (string, error) {
	op := symtab.DeviceProperties
	if b.RuntimeVersion >= ABI60 {
		op = symtab.DevicePropertiesR0600
	}
	l := symtab.SelectLayouts(layouts, b.RuntimeVersion)["hipDeviceProp_t"]
	buf := make([]byte, l.Size) // holds no Go pointer: the runtime may write it
	r, err := b.Raw(op, uintptr(unsafe.Pointer(&buf[0])), uintptr(dev))
	runtime.KeepAlive(buf)
	if err != nil {
		return "", err
	}
	if err := b.Status(op, r); err != nil {
		return "", err
	}
	name := buf[l.Offset("gcnArchName"):][:256]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	if len(name) == 0 {
		return "", fmt.Errorf("gpumem: hip: device %d reports no gcnArchName: %w", dev, gpumem.ErrNotSupported)
	}
	return string(name), nil
}
