package native

import (
	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// Dialect is what distinguishes one vendor from another. Every field is
// required unless its comment says otherwise.
type Dialect struct {
	Vendor     symtab.Vendor
	Name       string   // "cuda", "hip"
	Candidates []string // library names tried when no path is given
	// Start initialises the runtime once the symbols are resolved: it sets
	// the device count and each device's current-making argument with
	// SetDevices. An error from it fails Open.
	Start func(b *Backend) error
	// Stop releases what Start acquired (optional).
	Stop func(b *Backend) error
	// Refine re-resolves symbols once the runtime is initialised (optional;
	// CUDA uses cuGetProcAddress with the driver's version).
	Refine func(b *Backend)
	// ErrorName asks the library for the name of a status code ("" if it
	// has none).
	ErrorName func(b *Backend, code int) string
	// Attribute translates a device attribute for the loaded library's
	// version; false when that version's enum lacks it.
	Attribute func(b *Backend, a gpumem.Attribute) (int32, bool)
	// Advice translates an advice value.
	Advice func(a gpumem.Advice) (int32, bool)
	// MemcpyKind is true when the copy functions take a kind argument
	// (HIP: hipMemcpyDefault, 4).
	MemcpyKind bool
	// WriteAllocProp fills the 32-byte allocation properties of a pinned
	// device allocation on the device with handle dev.
	WriteAllocProp func(b *Backend, buf *[AllocPropSize]byte, dev int32)
	// PoolMaxSize reports whether the runtime's pool properties have the
	// maxSize field (at offset 24).
	PoolMaxSize func(b *Backend) bool
	// FuncAttribute translates a function attribute (CUfunction_attribute,
	// hipFunction_attribute).
	FuncAttribute func(a gpumem.FuncAttribute) (int32, bool)
	// OccupancyCallback is true when the potential-block-size function
	// takes a block-size-to-shared-memory callback before the dynamic
	// shared memory (CUDA's cuOccupancyMaxPotentialBlockSize; HIP's
	// hipModuleOccupancyMaxPotentialBlockSize has none).
	OccupancyCallback bool
	// Versions reads the library's versions.
	Versions func(b *Backend) (gpumem.Version, error)

	// ABI returns the struct layouts and constants the backend uses with
	// the loaded library's version, for the symbols report (optional).
	ABI func(b *Backend) (map[string]gpumem.StructLayout, map[string]int64)
	// MigrationAttribute is the device attribute that says whether managed
	// pages migrate on demand (CUDA: concurrent managed access; HIP:
	// pageable memory access, which follows XNACK, where clr derives
	// concurrent managed access from system SVM support).
	MigrationAttribute gpumem.Attribute
	// DirectCalls lets the backend call the functions marked
	// symtab.Row.StreamContext for the vendor alone on an explicit stream,
	// with no context made current before them (Backend.callOnStream says
	// what happens when such a call fails). False: every call makes its
	// context current first.
	DirectCalls bool
	// UnmapByMapping makes MemUnmap unmap a range holding several mappings
	// one mapping at a time (HIP: clr's hipMemUnmap releases only the
	// mapping at the start address and leaks the others).
	UnmapByMapping bool
	// ReserveAligned rounds reservation sizes up to the largest minimum
	// granularity over the devices (HIP: clr checks device 0's granularity
	// and answers a misaligned size with out of memory).
	ReserveAligned bool
	// DeferDestructors runs user-object destructors on a new goroutine, not
	// inside the releasing call (HIP runs them synchronously under a
	// runtime-wide lock: a destructor that calls HIP would deadlock).
	DeferDestructors bool
	// PoolSetup adjusts a pool the backend hands out, once per pool
	// (optional; HIP raises the release threshold on gfx10 and gfx11).
	PoolSetup func(b *Backend, p gpumem.MemPool) error
	// SingleMapping, when not empty, says why a physical allocation should
	// be mapped at one address at a time with this vendor's library
	// (gpumem.MappingAliaser); empty: it may be mapped at several.
	SingleMapping string
	// VirtualMemoryDefault reports whether allocators should use the
	// virtual memory API by default with this library, and why not
	// (optional; absent: yes).
	VirtualMemoryDefault func(b *Backend) (bool, string)
	// Target names device dev's compile target ("sm_90", "gfx90a"), the
	// one a run-time compiler takes for it (optional; absent: not
	// supported).
	Target func(b *Backend, dev int) (string, error)
}
