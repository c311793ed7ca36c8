package vendor

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/callback"
	"github.com/gpumem/gpumem/internal/capthread"
	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/dl"
	"github.com/gpumem/gpumem/internal/guard"
	"github.com/gpumem/gpumem/internal/symtab"
)

// Library is the seam between the backend and the dynamic loader: the real
// one wraps internal/dl, tests use a fake.
type Library interface {
	// Path is the library file as it was opened.
	Path() string
	// Sym returns the address of an exported symbol; a missing symbol is an
	// error matching gpumem.ErrNotSupported.
	Sym(name string) (uintptr, error)
	// Close releases the library.
	Close() error
}

// Loader opens the first loadable library among candidates.
type Loader func(candidates ...string) (Library, error)

type dlLibrary struct{ l *dl.Library }

func (d dlLibrary) Path() string                     { return d.l.Path }
func (d dlLibrary) Sym(name string) (uintptr, error) { return d.l.Sym(name) }
func (d dlLibrary) Close() error                     { return d.l.Close() }

// DL is the Loader of real libraries, through internal/dl.
func DL(candidates ...string) (Library, error) {
	l, err := dl.Open(candidates...)
	if err != nil {
		return nil, err
	}
	return dlLibrary{l}, nil
}

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
	// Sentinel maps a status code to a gpumem sentinel (nil: none).
	Sentinel func(code int) error
	// Attribute translates a device attribute.
	Attribute func(a gpumem.Attribute) (int32, bool)
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
	// Versions reads the library's versions.
	Versions func(b *Backend) (gpumem.Version, error)
}

// Struct sizes shared by CUDA and HIP (checked against the headers in tests).
const (
	AllocPropSize  = 32 // CUmemAllocationProp / hipMemAllocationProp
	PoolPropsSize  = 88 // CUmemPoolProps / hipMemPoolProps
	AccessDescSize = 12 // CUmemAccessDesc / hipMemAccessDesc
)

// Values shared by the two vendors' headers (CUDA cuda.h; HIP
// hip_runtime_api.h, checked in tests).
const (
	StatusNotReady           = 600 // CUDA_ERROR_NOT_READY, hipErrorNotReady
	StatusPeerAlreadyEnabled = 704 // CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, hipErrorPeerAccessAlreadyEnabled
	StatusNotInitialized     = 3
	StatusDeinitialized      = 4
	LocationTypeDevice       = 1 // CU_MEM_LOCATION_TYPE_DEVICE, hipMemLocationTypeDevice
	LocationTypeHost         = 2 // CU_MEM_LOCATION_TYPE_HOST (CUDA 12.2+)
	AllocationTypePinned     = 1
	AccessNone               = 0
	AccessRead               = 1
	AccessReadWrite          = 3
	DeviceCPU                = -1 // CU_DEVICE_CPU, hipCpuDeviceId
	DeviceInvalid            = -2 // CU_DEVICE_INVALID, hipInvalidDeviceId
	RangePreferredLocation   = 2  // CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, hipMemRangeAttributePreferredLocation
	RangeLastPrefetch        = 4
	MemcpyDefault            = 4 // hipMemcpyDefault
	HostAllocPortable        = 1 // CU_MEMHOSTALLOC_PORTABLE, hipHostMallocPortable
	MemAttachGlobal          = 1
	UserObjectNoDestructSync = 1 // CU_USER_OBJECT_NO_DESTRUCTOR_SYNC, hipUserObjectNoDestructorSync
	GraphUserObjectMove      = 1 // CU_GRAPH_USER_OBJECT_MOVE, hipGraphUserObjectMove
)

// Backend is the shared gpumem.Backend. Its fields are set during Open and
// read-only afterwards, except the closed flag and the error-name cache.
type Backend struct {
	d   *Dialect
	lib Library

	fns     [symtab.NumOps]uintptr
	missing [symtab.NumOps]error // why fns[op] is 0

	pre      uintptr   // make-current function
	cur      []uintptr // per device: argument to pre (CUcontext, or ordinal)
	handle   []int32   // per device: the vendor's device handle (CUdevice, ordinal)
	nDev     int
	closed   atomic.Bool
	names    sync.Map // int -> string
	locByVal bool     // Advise/Prefetch take a location by value (CUDA 12.2+)
	pins     capthread.Pins

	// State the dialect keeps (driver version, ...).
	DriverVersion  int
	RuntimeVersion int
}

var _ gpumem.Backend = (*Backend)(nil)

// OpenBackend is Open for a vendor package's Open: the backend as a
// gpumem.Backend, nil (not a typed nil) when it fails.
func OpenBackend(d *Dialect, load Loader, path string) (gpumem.Backend, error) {
	b, err := Open(d, load, path)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Open loads the library (path, or the dialect's candidates), resolves the
// table and starts the runtime.
func Open(d *Dialect, load Loader, path string) (*Backend, error) {
	b, err := Load(d, load, path)
	if err != nil {
		return nil, err
	}
	var missing []string
	for i := range symtab.Rows {
		r := &symtab.Rows[i]
		if r.Required(d.Vendor) && b.fns[i] == 0 {
			missing = append(missing, r.Symbol(d.Vendor))
		}
	}
	if len(missing) > 0 {
		return nil, &MissingError{Backend: d.Name, Library: b.lib.Path(), Symbols: missing}
	}
	if err := d.Start(b); err != nil {
		return nil, fmt.Errorf("%w (library %s)", err, b.lib.Path())
	}
	if d.Refine != nil {
		d.Refine(b)
	}
	b.locByVal = b.fns[symtab.Advise] != 0 && d.Vendor == symtab.CUDA
	return b, nil
}

// Load opens the library and resolves every row by dlsym, without starting
// the runtime.
func Load(d *Dialect, load Loader, path string) (*Backend, error) {
	cands := d.Candidates
	if path != "" {
		cands = []string{path}
	}
	lib, err := load(cands...)
	if err != nil {
		return nil, fmt.Errorf("gpumem: %s: %w", d.Name, err)
	}
	b := &Backend{d: d, lib: lib}
	for i := range symtab.Rows {
		b.resolveDL(symtab.Op(i))
	}
	return b, nil
}

func (b *Backend) resolveDL(op symtab.Op) {
	name := symtab.Rows[op].Symbol(b.d.Vendor)
	if name == "" {
		b.fns[op] = 0
		b.missing[op] = fmt.Errorf("the %s API has no such operation", b.d.Name)
		return
	}
	addr, err := b.lib.Sym(name)
	if err != nil || addr == 0 {
		b.fns[op] = 0
		b.missing[op] = fmt.Errorf("symbol %s not exported by %s", name, b.lib.Path())
		return
	}
	b.fns[op], b.missing[op] = addr, nil
}

// MissingError reports required symbols a library lacks.
type MissingError struct {
	Backend string
	Library string
	Symbols []string
}

// Error names every missing symbol.
func (e *MissingError) Error() string {
	return fmt.Sprintf("gpumem: %s: %s lacks required symbols %v", e.Backend, e.Library, e.Symbols)
}

// Is matches gpumem.ErrNotSupported.
func (e *MissingError) Is(target error) bool { return target == gpumem.ErrNotSupported }

// --- helpers for dialects -------------------------------------------------

// Fn returns the resolved address of op (0 if missing).
func (b *Backend) Fn(op symtab.Op) uintptr { return b.fns[op] }

// SetFn replaces the address of op (dialects refining their resolution).
func (b *Backend) SetFn(op symtab.Op, addr uintptr) {
	if addr != 0 {
		b.fns[op], b.missing[op] = addr, nil
	}
}

// SetDevices records the device count, the make-current function and, per
// device, its argument and vendor handle.
func (b *Backend) SetDevices(pre uintptr, cur []uintptr, handles []int32) {
	b.pre, b.cur, b.handle, b.nDev = pre, cur, handles, len(cur)
}

// NumDevices returns the device count set by SetDevices.
func (b *Backend) NumDevices() int { return b.nDev }

// Handle returns device i's vendor handle.
func (b *Backend) Handle(i int) int32 { return b.handle[i] }

// Status turns a status code of op into an error (nil for 0).
func (b *Backend) Status(op symtab.Op, code uintptr) error {
	if int32(code) == 0 {
		return nil
	}
	return b.errorFor(symtab.Rows[op].Symbol(b.d.Vendor), int(int32(code)))
}

func (b *Backend) errorFor(sym string, code int) error {
	var sentinel error
	if (code == StatusDeinitialized || code == StatusNotInitialized) && b.closed.Load() {
		sentinel = gpumem.ErrClosed
	} else {
		sentinel = b.d.Sentinel(code)
	}
	return &gpumem.Error{Backend: b.d.Name, Op: sym, Code: code, Name: b.ErrorName(code), Err: sentinel}
}

// Raw calls op directly, without making a device current (Open-time and
// device-less calls that need no context).
func (b *Backend) Raw(op symtab.Op, a ...uintptr) (uintptr, error) {
	fn := b.fns[op]
	if fn == 0 {
		return 0, b.notSupported(op)
	}
	var r uintptr
	switch len(a) {
	case 0:
		r = ccall.Call0(fn)
	case 1:
		r = ccall.Call1(fn, a[0])
	case 2:
		r = ccall.Call2(fn, a[0], a[1])
	case 3:
		r = ccall.Call3(fn, a[0], a[1], a[2])
	case 4:
		r = ccall.Call4(fn, a[0], a[1], a[2], a[3])
	case 5:
		r = ccall.Call5(fn, a[0], a[1], a[2], a[3], a[4])
	default:
		r = ccall.Call6(fn, a[0], a[1], a[2], a[3], a[4], a[5])
	}
	return r, nil
}

// Int32 calls op, a device-less function whose only argument is an int32
// out-parameter (version and device-count queries), and returns the value.
func (b *Backend) Int32(op symtab.Op) (int, error) {
	v := new(int32)
	r, err := b.Raw(op, uintptr(unsafe.Pointer(v)))
	runtime.KeepAlive(v)
	if err != nil {
		return 0, err
	}
	if err := b.Status(op, r); err != nil {
		return 0, err
	}
	return int(*v), nil
}

func (b *Backend) notSupported(op symtab.Op) error {
	reason := "not resolved"
	if b.missing[op] != nil {
		reason = b.missing[op].Error()
	}
	return &gpumem.NotSupportedError{Backend: b.d.Name, Op: symtab.Rows[op].Op, Reason: reason}
}

func (b *Backend) closedErr() error {
	return fmt.Errorf("gpumem: %s: backend is closed: %w", b.d.Name, gpumem.ErrClosed)
}

func (b *Backend) badDevice(dev int) error {
	return fmt.Errorf("gpumem: %s: device %d out of range (have %d): %w", b.d.Name, dev, b.nDev, gpumem.ErrInvalidValue)
}

// call runs op on device dev: the device is made current and op called in
// one transition into C. It allocates nothing when op succeeds.
func (b *Backend) call(dev int, op symtab.Op, a1, a2, a3, a4, a5, a6 uintptr) error {
	r, preFailed, err := b.invoke(dev, op, a1, a2, a3, a4, a5, a6)
	if err != nil || int32(r) == 0 {
		return err
	}
	return b.failed(op, r, preFailed)
}

// invoke is call without the translation of a failed status: r is the raw
// status, of the make-current function when preFailed. err is set only when
// nothing was called.
func (b *Backend) invoke(dev int, op symtab.Op, a1, a2, a3, a4, a5, a6 uintptr) (r uintptr, preFailed bool, err error) {
	fn, err := b.target(dev, op)
	if err != nil {
		return 0, false, err
	}
	r, preFailed = ccall.CallPre6(b.pre, b.cur[dev], fn, a1, a2, a3, a4, a5, a6)
	return r, preFailed, nil
}

// target is the address of op for a call on device dev, or why no call can
// be made: the backend is closed, dev is out of range or op did not resolve.
func (b *Backend) target(dev int, op symtab.Op) (uintptr, error) {
	if b.closed.Load() {
		return 0, b.closedErr()
	}
	if uint(dev) >= uint(b.nDev) {
		return 0, b.badDevice(dev)
	}
	fn := b.fns[op]
	if fn == 0 {
		return 0, b.notSupported(op)
	}
	return fn, nil
}

// failed turns the non-zero status r of invoke into an error.
func (b *Backend) failed(op symtab.Op, r uintptr, preFailed bool) error {
	if preFailed {
		return b.Status(symtab.SetCurrent, r)
	}
	return b.Status(op, r)
}

// cell is scratch memory for out-parameters and small structs passed by
// pointer. Cells come from the heap (which does not move) through a pool.
type cell [16]uint64

var cells = sync.Pool{New: func() any { return new(cell) }}

func getCell() *cell {
	c := cells.Get().(*cell)
	*c = cell{}
	return c
}

func putCell(c *cell) { cells.Put(c) }

func (c *cell) addr(i int) uintptr { return uintptr(unsafe.Pointer(&c[i])) }

func (c *cell) bytes() *[128]byte { return (*[128]byte)(unsafe.Pointer(c)) }

func (c *cell) i32(i int) int32 { return *(*int32)(unsafe.Pointer(&c[i])) }

// --- identity ---------------------------------------------------------------

// Name returns "cuda" or "hip".
func (b *Backend) Name() string { return b.d.Name }

// Library returns the path of the loaded library.
func (b *Backend) Library() string { return b.lib.Path() }

// Version returns the library's versions.
func (b *Backend) Version() (gpumem.Version, error) {
	if b.closed.Load() {
		return gpumem.Version{}, b.closedErr()
	}
	return b.d.Versions(b)
}

// ErrorName returns the library's name for code, cached per code.
func (b *Backend) ErrorName(code int) string {
	if v, ok := b.names.Load(code); ok {
		return v.(string)
	}
	n := b.d.ErrorName(b, code)
	b.names.Store(code, n)
	return n
}

// Close releases the devices' contexts. The library stays mapped: vendor
// runtimes keep threads of their own that may still run code in it. After
// Close every method returns an error matching gpumem.ErrClosed.
func (b *Backend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	if b.d.Stop != nil {
		return b.d.Stop(b)
	}
	return nil
}

// --- devices ---------------------------------------------------------------

// DeviceCount returns the number of devices.
func (b *Backend) DeviceCount() (int, error) {
	if b.closed.Load() {
		return 0, b.closedErr()
	}
	return b.nDev, nil
}

// DeviceName returns the device's name.
func (b *Backend) DeviceName(dev int) (string, error) {
	if uint(dev) >= uint(b.nDev) {
		return "", b.badDevice(dev)
	}
	c := getCell()
	defer putCell(c)
	if err := b.call(dev, symtab.DeviceName, c.addr(0), 100, uintptr(b.handle[dev]), 0, 0, 0); err != nil {
		return "", err
	}
	buf := c.bytes()[:100]
	n := 0
	for n < len(buf) && buf[n] != 0 {
		n++
	}
	return string(buf[:n]), nil
}

// DeviceAttribute reads a device attribute.
func (b *Backend) DeviceAttribute(dev int, a gpumem.Attribute) (int, error) {
	if uint(dev) >= uint(b.nDev) {
		return 0, b.badDevice(dev)
	}
	v, ok := b.d.Attribute(a)
	if !ok {
		return 0, &gpumem.NotSupportedError{Backend: b.d.Name, Op: "DeviceAttribute", Reason: fmt.Sprintf("attribute %s has no %s equivalent", a, b.d.Name)}
	}
	c := getCell()
	defer putCell(c)
	if err := b.call(dev, symtab.DeviceAttribute, c.addr(0), uintptr(v), uintptr(b.handle[dev]), 0, 0, 0); err != nil {
		return 0, err
	}
	return int(c.i32(0)), nil
}

// MemInfo reports the device's free and total memory.
func (b *Backend) MemInfo(dev int) (free, total uint64, err error) {
	c := getCell()
	defer putCell(c)
	if err := b.call(dev, symtab.MemInfo, c.addr(0), c.addr(1), 0, 0, 0, 0); err != nil {
		return 0, 0, err
	}
	return c[0], c[1], nil
}

// DeviceSynchronize waits for all work on the device.
func (b *Backend) DeviceSynchronize(dev int) error {
	return b.call(dev, symtab.DeviceSynchronize, 0, 0, 0, 0, 0, 0)
}

// --- memory -----------------------------------------------------------------

func (b *Backend) allocOut(dev int, op symtab.Op, a2, a3, a4 uintptr) (gpumem.Ptr, error) {
	c := getCell()
	err := b.call(dev, op, c.addr(0), a2, a3, a4, 0, 0)
	p := c[0]
	putCell(c)
	if err != nil {
		return 0, err
	}
	return gpumem.Ptr(p), nil
}

// Malloc allocates device memory.
func (b *Backend) Malloc(dev int, size uint64) (gpumem.Ptr, error) {
	return b.allocOut(dev, symtab.Malloc, uintptr(size), 0, 0)
}

// Free frees device memory.
func (b *Backend) Free(dev int, p gpumem.Ptr) error {
	return b.call(dev, symtab.Free, uintptr(p), 0, 0, 0, 0, 0)
}

// MallocHost allocates portable page-locked host memory.
func (b *Backend) MallocHost(size uint64) (gpumem.Ptr, error) {
	return b.allocOut(0, symtab.MallocHost, uintptr(size), HostAllocPortable, 0)
}

// FreeHost frees page-locked host memory.
func (b *Backend) FreeHost(p gpumem.Ptr) error {
	return b.call(0, symtab.FreeHost, uintptr(p), 0, 0, 0, 0, 0)
}

// MallocManaged allocates managed memory attached globally.
func (b *Backend) MallocManaged(dev int, size uint64) (gpumem.Ptr, error) {
	return b.allocOut(dev, symtab.MallocManaged, uintptr(size), MemAttachGlobal, 0)
}

// location encodes loc for the vendor: packed CUmemLocation (by value) or a
// device handle with -1 for the host. ok is false for an invalid location.
func (b *Backend) location(loc gpumem.Location) (arg uintptr, ctxDev int, ok bool) {
	switch loc.Kind {
	case gpumem.LocationHost:
		if b.locByVal {
			return uintptr(LocationTypeHost), 0, true
		}
		cpu := int64(DeviceCPU)
		return uintptr(cpu), 0, true
	case gpumem.LocationDevice:
		if uint(loc.Device) >= uint(b.nDev) {
			return 0, 0, false
		}
		h := b.handle[loc.Device]
		if b.locByVal {
			return uintptr(uint64(LocationTypeDevice) | uint64(uint32(h))<<32), loc.Device, true
		}
		return uintptr(int64(h)), loc.Device, true
	}
	return 0, 0, false
}

func (b *Backend) badLocation(loc gpumem.Location) error {
	return fmt.Errorf("gpumem: %s: %v is not a location of this machine: %w", b.d.Name, loc, gpumem.ErrInvalidValue)
}

// Advise sets a usage hint on a managed range.
func (b *Backend) Advise(p gpumem.Ptr, size uint64, advice gpumem.Advice, loc gpumem.Location) error {
	v, ok := b.d.Advice(advice)
	if !ok {
		return &gpumem.NotSupportedError{Backend: b.d.Name, Op: "Advise", Reason: fmt.Sprintf("advice %s has no %s equivalent", advice, b.d.Name)}
	}
	switch advice {
	case gpumem.AdviseSetReadMostly, gpumem.AdviseUnsetReadMostly, gpumem.AdviseSetCoarseGrain, gpumem.AdviseUnsetCoarseGrain:
		if loc.Kind == gpumem.LocationInvalid {
			loc = gpumem.DeviceLocation(0)
		}
	}
	arg, dev, ok := b.location(loc)
	if !ok {
		return b.badLocation(loc)
	}
	op := symtab.Advise
	if b.fns[op] == 0 && b.fns[symtab.AdviseLegacy] != 0 {
		op = symtab.AdviseLegacy
	}
	return b.call(dev, op, uintptr(p), uintptr(size), uintptr(v), arg, 0, 0)
}

// Prefetch migrates a managed range to loc, ordered on s.
func (b *Backend) Prefetch(p gpumem.Ptr, size uint64, loc gpumem.Location, s gpumem.Stream) error {
	arg, _, ok := b.location(loc)
	if !ok {
		return b.badLocation(loc)
	}
	if b.locByVal {
		return b.call(s.Device, symtab.Prefetch, uintptr(p), uintptr(size), arg, 0, s.Handle, 0)
	}
	op := symtab.Prefetch
	if b.fns[op] == 0 && b.fns[symtab.PrefetchLegacy] != 0 {
		op = symtab.PrefetchLegacy
	}
	return b.call(s.Device, op, uintptr(p), uintptr(size), arg, s.Handle, 0, 0)
}

// RangeLocation reads a location-valued attribute of a managed range.
func (b *Backend) RangeLocation(p gpumem.Ptr, size uint64, attr gpumem.RangeAttribute) (gpumem.Location, error) {
	var a uintptr
	switch attr {
	case gpumem.RangePreferredLocation:
		a = RangePreferredLocation
	case gpumem.RangeLastPrefetchLocation:
		a = RangeLastPrefetch
	default:
		return gpumem.Location{}, fmt.Errorf("gpumem: %s: unknown range attribute %d: %w", b.d.Name, attr, gpumem.ErrInvalidValue)
	}
	c := getCell()
	defer putCell(c)
	if err := b.call(0, symtab.RangeLocation, c.addr(0), 4, a, uintptr(p), uintptr(size), 0); err != nil {
		return gpumem.Location{}, err
	}
	v := c.i32(0)
	switch v {
	case DeviceCPU:
		return gpumem.HostLocation(), nil
	case DeviceInvalid:
		return gpumem.Location{}, nil
	}
	for i, h := range b.handle {
		if h == v {
			return gpumem.DeviceLocation(i), nil
		}
	}
	return gpumem.Location{}, nil
}

// --- copies -------------------------------------------------------------------

// Memcpy copies between unified addresses and returns when done.
func (b *Backend) Memcpy(dst, src gpumem.Ptr, size uint64) error {
	return b.memcpy(uintptr(dst), uintptr(src), size)
}

func (b *Backend) memcpy(dst, src uintptr, size uint64) error {
	dev := b.pointerDevice(dst)
	if dev == 0 {
		dev = b.pointerDevice(src)
	}
	if b.d.MemcpyKind {
		return b.call(dev, symtab.Memcpy, dst, src, uintptr(size), MemcpyDefault, 0, 0)
	}
	return b.call(dev, symtab.Memcpy, dst, src, uintptr(size), 0, 0, 0)
}

// pointerAttrDeviceOrdinal is CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL and
// HIP_POINTER_ATTRIBUTE_DEVICE_ORDINAL: 9 in both headers.
const pointerAttrDeviceOrdinal = 9

// pointerDevice is the device whose context a synchronous operation on the
// unified address p must run in: the device that owns p, or 0 when p is not
// a device's memory (host memory, Go memory), the library cannot say, or
// there is only one device. Memory of a stream-ordered pool or of a virtual
// memory mapping is reachable only from the devices granted access, so the
// owner's context matters for cuMemcpy and cuMemsetD8 on machines with
// several devices.
func (b *Backend) pointerDevice(p uintptr) int {
	fn := b.fns[symtab.PointerDevice]
	if b.nDev <= 1 || fn == 0 || p == 0 {
		return 0
	}
	c := getCell()
	defer putCell(c)
	r, _ := ccall.CallPre6(b.pre, b.cur[0], fn, c.addr(0), pointerAttrDeviceOrdinal, p, 0, 0, 0)
	if int32(r) != 0 {
		return 0
	}
	if d := int(c.i32(0)); d > 0 && d < b.nDev {
		return d
	}
	return 0
}

// MemcpyAsync copies between unified addresses, ordered on s.
func (b *Backend) MemcpyAsync(dst, src gpumem.Ptr, size uint64, s gpumem.Stream) error {
	if b.d.MemcpyKind {
		return b.call(s.Device, symtab.MemcpyAsync, uintptr(dst), uintptr(src), uintptr(size), MemcpyDefault, s.Handle, 0)
	}
	return b.call(s.Device, symtab.MemcpyAsync, uintptr(dst), uintptr(src), uintptr(size), s.Handle, 0, 0)
}

// MemcpyPeerAsync copies between two devices' memory, ordered on s.
func (b *Backend) MemcpyPeerAsync(dst gpumem.Ptr, dstDev int, src gpumem.Ptr, srcDev int, size uint64, s gpumem.Stream) error {
	if uint(dstDev) >= uint(b.nDev) {
		return b.badDevice(dstDev)
	}
	if uint(srcDev) >= uint(b.nDev) {
		return b.badDevice(srcDev)
	}
	return b.call(s.Device, symtab.MemcpyPeerAsync, uintptr(dst), b.cur[dstDev], uintptr(src), b.cur[srcDev], uintptr(size), s.Handle)
}

// Memset sets size bytes at p to value.
func (b *Backend) Memset(p gpumem.Ptr, value byte, size uint64) error {
	return b.call(b.pointerDevice(uintptr(p)), symtab.Memset, uintptr(p), uintptr(value), uintptr(size), 0, 0, 0)
}

// MemsetAsync sets size bytes at p to value, ordered on s.
func (b *Backend) MemsetAsync(p gpumem.Ptr, value byte, size uint64, s gpumem.Stream) error {
	return b.call(s.Device, symtab.MemsetAsync, uintptr(p), uintptr(value), uintptr(size), s.Handle, 0, 0)
}

// CopyToDevice copies src to dst and returns when done.
func (b *Backend) CopyToDevice(dst gpumem.Ptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return b.copyGo(uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uint64(len(src)))
}

// CopyFromDevice copies src into dst and returns when done.
func (b *Backend) CopyFromDevice(dst []byte, src gpumem.Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	return b.copyGo(uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uint64(len(dst)))
}

// copyGo copies with Go memory on one side. uintptrescapes keeps the Go
// memory alive and on the heap (where it cannot move) for the call.
//
//go:uintptrescapes
//go:noinline
func (b *Backend) copyGo(dst, src uintptr, n uint64) error {
	return b.memcpy(dst, src, n)
}

// --- streams and events -----------------------------------------------------

// StreamCreate creates a stream on dev.
func (b *Backend) StreamCreate(dev int, flags gpumem.StreamFlags, priority int) (gpumem.Stream, error) {
	c := getCell()
	defer putCell(c)
	if err := b.call(dev, symtab.StreamCreate, c.addr(0), uintptr(flags), uintptr(int64(priority)), 0, 0, 0); err != nil {
		return gpumem.Stream{}, err
	}
	return gpumem.Stream{Handle: uintptr(c[0]), Device: dev}, nil
}

// StreamDestroy destroys a stream. The default stream cannot be destroyed.
func (b *Backend) StreamDestroy(s gpumem.Stream) error {
	if s.Handle == 0 {
		return fmt.Errorf("gpumem: %s: the default stream cannot be destroyed: %w", b.d.Name, gpumem.ErrInvalidValue)
	}
	if err := b.call(s.Device, symtab.StreamDestroy, s.Handle, 0, 0, 0, 0, 0); err != nil {
		return err
	}
	b.pins.Forget(s.Handle)
	return nil
}

// StreamSynchronize waits for the work queued on s.
func (b *Backend) StreamSynchronize(s gpumem.Stream) error {
	return b.call(s.Device, symtab.StreamSynchronize, s.Handle, 0, 0, 0, 0, 0)
}

// query asks op whether the work behind h is done. Not ready is an answer,
// not an error, and is told from the raw status so that polling allocates
// nothing.
func (b *Backend) query(dev int, op symtab.Op, h uintptr) (bool, error) {
	r, preFailed, err := b.invoke(dev, op, h, 0, 0, 0, 0, 0)
	switch {
	case err != nil:
		return false, err
	case int32(r) == 0:
		return true, nil
	case !preFailed && int32(r) == StatusNotReady:
		return false, nil
	}
	return false, b.failed(op, r, preFailed)
}

// StreamQuery reports whether s has completed its work.
func (b *Backend) StreamQuery(s gpumem.Stream) (bool, error) {
	return b.query(s.Device, symtab.StreamQuery, s.Handle)
}

// StreamWaitEvent makes s wait for e's last record.
func (b *Backend) StreamWaitEvent(s gpumem.Stream, e gpumem.Event) error {
	return b.call(s.Device, symtab.StreamWaitEvent, s.Handle, e.Handle, 0, 0, 0, 0)
}

// StreamPriorityRange returns the least and greatest stream priorities.
func (b *Backend) StreamPriorityRange(dev int) (least, greatest int, err error) {
	c := getCell()
	defer putCell(c)
	if err := b.call(dev, symtab.StreamPriorityRange, c.addr(0), c.addr(1), 0, 0, 0, 0); err != nil {
		return 0, 0, err
	}
	return int(c.i32(0)), int(c.i32(1)), nil
}

// EventCreate creates an event on dev.
func (b *Backend) EventCreate(dev int, flags gpumem.EventFlags) (gpumem.Event, error) {
	c := getCell()
	defer putCell(c)
	if err := b.call(dev, symtab.EventCreate, c.addr(0), uintptr(flags), 0, 0, 0, 0); err != nil {
		return gpumem.Event{}, err
	}
	return gpumem.Event{Handle: uintptr(c[0]), Device: dev}, nil
}

// EventDestroy destroys an event.
func (b *Backend) EventDestroy(e gpumem.Event) error {
	return b.call(e.Device, symtab.EventDestroy, e.Handle, 0, 0, 0, 0, 0)
}

// EventRecord records e on s.
func (b *Backend) EventRecord(e gpumem.Event, s gpumem.Stream) error {
	return b.call(s.Device, symtab.EventRecord, e.Handle, s.Handle, 0, 0, 0, 0)
}

// EventQuery reports whether e's last record has completed.
func (b *Backend) EventQuery(e gpumem.Event) (bool, error) {
	return b.query(e.Device, symtab.EventQuery, e.Handle)
}

// EventSynchronize waits for e's last record.
func (b *Backend) EventSynchronize(e gpumem.Event) error {
	return b.call(e.Device, symtab.EventSynchronize, e.Handle, 0, 0, 0, 0, 0)
}

// EventElapsed returns the milliseconds between two completed events.
func (b *Backend) EventElapsed(start, end gpumem.Event) (float32, error) {
	c := getCell()
	defer putCell(c)
	if err := b.call(start.Device, symtab.EventElapsed, c.addr(0), start.Handle, end.Handle, 0, 0, 0); err != nil {
		return 0, err
	}
	return *(*float32)(unsafe.Pointer(&c[0])), nil
}

// LaunchHostFunc runs fn on a runtime thread when s reaches this point.
func (b *Backend) LaunchHostFunc(s gpumem.Stream, fn func()) error {
	if fn == nil {
		return fmt.Errorf("gpumem: %s: LaunchHostFunc: nil function: %w", b.d.Name, gpumem.ErrInvalidValue)
	}
	if b.fns[symtab.LaunchHostFunc] == 0 {
		return b.notSupported(symtab.LaunchHostFunc)
	}
	// Outside a capture the function runs once. Captured into a graph it
	// runs at every launch, so its registration must live as long as the
	// graph: a user object retained by the graph unregisters it when the
	// graph (and every instance of it) is destroyed.
	info, err := b.StreamCaptureInfo(s)
	if err != nil && !errors.Is(err, gpumem.ErrNotSupported) {
		return err
	}
	once := info.Status != gpumem.CaptureActive
	id := callback.Register(fn, once)
	if err := b.call(s.Device, symtab.LaunchHostFunc, s.Handle, callback.Pointer(), id, 0, 0, 0); err != nil {
		callback.Unregister(id)
		return err
	}
	if once {
		return nil
	}
	o, err := b.UserObjectCreate(s.Device, func() { callback.Unregister(id) })
	if err != nil {
		if errors.Is(err, gpumem.ErrNotSupported) {
			// No user objects (HIP before 6): the registration stays for
			// the life of the process, one small map entry per captured
			// host function.
			return nil
		}
		return err
	}
	if err := b.GraphRetainUserObject(info.Graph, o, 1, true); err != nil {
		b.UserObjectRelease(o, 1)
		return err
	}
	return nil
}

// --- pools --------------------------------------------------------------------

// DefaultMemPool returns dev's default pool.
func (b *Backend) DefaultMemPool(dev int) (gpumem.MemPool, error) {
	if uint(dev) >= uint(b.nDev) {
		return gpumem.MemPool{}, b.badDevice(dev)
	}
	c := getCell()
	defer putCell(c)
	if err := b.call(dev, symtab.DefaultMemPool, c.addr(0), uintptr(b.handle[dev]), 0, 0, 0, 0); err != nil {
		return gpumem.MemPool{}, err
	}
	return gpumem.MemPool{Handle: uintptr(c[0]), Device: dev}, nil
}

// MemPoolCreate creates a pool of pinned device memory on props.Device.
func (b *Backend) MemPoolCreate(props gpumem.PoolProps) (gpumem.MemPool, error) {
	dev := props.Device
	if uint(dev) >= uint(b.nDev) {
		return gpumem.MemPool{}, b.badDevice(dev)
	}
	if props.MaxSize != 0 && !b.d.PoolMaxSize(b) {
		return gpumem.MemPool{}, &gpumem.NotSupportedError{Backend: b.d.Name, Op: "MemPoolCreate",
			Reason: "this runtime version's pool properties have no maximum size"}
	}
	c := getCell()
	defer putCell(c)
	EncodePoolProps(c.bytes(), b.handle[dev], props.MaxSize)
	if err := b.call(dev, symtab.MemPoolCreate, c.addr(12), c.addr(0), 0, 0, 0, 0); err != nil {
		return gpumem.MemPool{}, err
	}
	return gpumem.MemPool{Handle: uintptr(c[12]), Device: dev}, nil
}

// EncodePoolProps writes CUmemPoolProps / hipMemPoolProps (88 bytes): pinned
// allocations on the device with handle dev, no export handles, maxSize at
// offset 24 when non-zero.
func EncodePoolProps(buf *[128]byte, dev int32, maxSize uint64) {
	*buf = [128]byte{}
	put32(buf[0:], AllocationTypePinned) // allocType
	put32(buf[4:], 0)                    // handleTypes: none
	put32(buf[8:], LocationTypeDevice)   // location.type
	put32(buf[12:], uint32(dev))         // location.id
	// win32SecurityAttributes at 16 stays NULL.
	if maxSize != 0 {
		*(*uint64)(unsafe.Pointer(&buf[24])) = maxSize
	}
}

// EncodeAccessDesc writes CUmemAccessDesc / hipMemAccessDesc (12 bytes).
func EncodeAccessDesc(buf []byte, dev int32, flags uint32) {
	put32(buf[0:], LocationTypeDevice)
	put32(buf[4:], uint32(dev))
	put32(buf[8:], flags)
}

func put32(b []byte, v uint32) { *(*uint32)(unsafe.Pointer(&b[0])) = v }

// MemPoolDestroy destroys a created pool.
func (b *Backend) MemPoolDestroy(p gpumem.MemPool) error {
	return b.call(p.Device, symtab.MemPoolDestroy, p.Handle, 0, 0, 0, 0, 0)
}

func poolAttr(a gpumem.PoolAttribute) (v uintptr, isInt bool, ok bool) {
	// CUmemPool_attribute and hipMemPoolAttr number them alike, 1..8; the
	// three reuse attributes are int, the others 64-bit.
	if a < gpumem.PoolReleaseThreshold || a > gpumem.PoolUsedMemHigh {
		return 0, false, false
	}
	switch a {
	case gpumem.PoolReuseFollowEventDependencies:
		return 1, true, true
	case gpumem.PoolReuseAllowOpportunistic:
		return 2, true, true
	case gpumem.PoolReuseAllowInternalDependencies:
		return 3, true, true
	case gpumem.PoolReleaseThreshold:
		return 4, false, true
	case gpumem.PoolReservedMemCurrent:
		return 5, false, true
	case gpumem.PoolReservedMemHigh:
		return 6, false, true
	case gpumem.PoolUsedMemCurrent:
		return 7, false, true
	}
	return 8, false, true // PoolUsedMemHigh
}

func (b *Backend) badPoolAttr(a gpumem.PoolAttribute) error {
	return fmt.Errorf("gpumem: %s: unknown pool attribute %d: %w", b.d.Name, int(a), gpumem.ErrInvalidValue)
}

// MemPoolSetAttribute sets a pool attribute.
func (b *Backend) MemPoolSetAttribute(p gpumem.MemPool, a gpumem.PoolAttribute, v uint64) error {
	attr, isInt, ok := poolAttr(a)
	if !ok {
		return b.badPoolAttr(a)
	}
	c := getCell()
	defer putCell(c)
	if isInt {
		*(*int32)(unsafe.Pointer(&c[0])) = int32(v)
	} else {
		c[0] = v
	}
	return b.call(p.Device, symtab.MemPoolSetAttribute, p.Handle, attr, c.addr(0), 0, 0, 0)
}

// MemPoolGetAttribute reads a pool attribute.
func (b *Backend) MemPoolGetAttribute(p gpumem.MemPool, a gpumem.PoolAttribute) (uint64, error) {
	attr, isInt, ok := poolAttr(a)
	if !ok {
		return 0, b.badPoolAttr(a)
	}
	c := getCell()
	defer putCell(c)
	if err := b.call(p.Device, symtab.MemPoolGetAttribute, p.Handle, attr, c.addr(0), 0, 0, 0); err != nil {
		return 0, err
	}
	if isInt {
		return uint64(c.i32(0)), nil
	}
	return c[0], nil
}

// MemPoolTrimTo releases unused memory down to keep bytes.
func (b *Backend) MemPoolTrimTo(p gpumem.MemPool, keep uint64) error {
	return b.call(p.Device, symtab.MemPoolTrimTo, p.Handle, uintptr(keep), 0, 0, 0, 0)
}

func accessFlags(a gpumem.Access) (uint32, bool) {
	switch a {
	case gpumem.AccessNone:
		return AccessNone, true
	case gpumem.AccessRead:
		return AccessRead, true
	case gpumem.AccessReadWrite:
		return AccessReadWrite, true
	}
	return 0, false
}

func (b *Backend) badAccess(a gpumem.Access) error {
	return fmt.Errorf("gpumem: %s: unknown access %d: %w", b.d.Name, int(a), gpumem.ErrInvalidValue)
}

// MemPoolSetAccess grants dev access to the pool's memory.
func (b *Backend) MemPoolSetAccess(p gpumem.MemPool, dev int, a gpumem.Access) error {
	if uint(dev) >= uint(b.nDev) {
		return b.badDevice(dev)
	}
	f, ok := accessFlags(a)
	if !ok {
		return b.badAccess(a)
	}
	c := getCell()
	defer putCell(c)
	EncodeAccessDesc(c.bytes()[:AccessDescSize], b.handle[dev], f)
	return b.call(p.Device, symtab.MemPoolSetAccess, p.Handle, c.addr(0), 1, 0, 0, 0)
}

// MemPoolGetAccess reads dev's access to the pool's memory.
func (b *Backend) MemPoolGetAccess(p gpumem.MemPool, dev int) (gpumem.Access, error) {
	if uint(dev) >= uint(b.nDev) {
		return 0, b.badDevice(dev)
	}
	c := getCell()
	defer putCell(c)
	put32(c.bytes()[8:], LocationTypeDevice)
	put32(c.bytes()[12:], uint32(b.handle[dev]))
	if err := b.call(p.Device, symtab.MemPoolGetAccess, c.addr(0), p.Handle, c.addr(1), 0, 0, 0); err != nil {
		return 0, err
	}
	switch c.i32(0) {
	case AccessRead:
		return gpumem.AccessRead, nil
	case AccessReadWrite:
		return gpumem.AccessReadWrite, nil
	}
	return gpumem.AccessNone, nil
}

// MallocAsync allocates from the stream's device's current pool.
func (b *Backend) MallocAsync(size uint64, s gpumem.Stream) (gpumem.Ptr, error) {
	return b.allocOut(s.Device, symtab.MallocAsync, uintptr(size), s.Handle, 0)
}

// MallocFromPoolAsync allocates from pool p, ordered on s.
func (b *Backend) MallocFromPoolAsync(size uint64, p gpumem.MemPool, s gpumem.Stream) (gpumem.Ptr, error) {
	return b.allocOut(s.Device, symtab.MallocFromPoolAsync, uintptr(size), p.Handle, s.Handle)
}

// FreeAsync frees stream-ordered memory once s reaches this point.
func (b *Backend) FreeAsync(p gpumem.Ptr, s gpumem.Stream) error {
	return b.call(s.Device, symtab.FreeAsync, uintptr(p), s.Handle, 0, 0, 0, 0)
}

var _ guard.Backend = (*Backend)(nil)

// GuardedCalls reports whether the capture-status query that guards
// MallocFromPoolAsyncUncaptured and FreeAsyncUncaptured resolved.
func (b *Backend) GuardedCalls() bool {
	return b.fns[symtab.StreamIsCapturing] != 0
}

// MallocFromPoolAsyncUncaptured is MallocFromPoolAsync made only if s is not
// being captured: the device made current, the capture status asked and the
// allocation made in one transition. A capturing stream gets its status back
// and nothing is allocated.
func (b *Backend) MallocFromPoolAsyncUncaptured(size uint64, p gpumem.MemPool, s gpumem.Stream) (gpumem.Ptr, gpumem.CaptureStatus, error) {
	c := getCell()
	st, err := b.guarded(s, symtab.MallocFromPoolAsync, c.addr(0), uintptr(size), p.Handle, s.Handle)
	out := c[0]
	putCell(c)
	if err != nil || st != gpumem.CaptureNone {
		return 0, st, err
	}
	return gpumem.Ptr(out), st, nil
}

// FreeAsyncUncaptured is FreeAsync made only if s is not being captured, in
// one transition as MallocFromPoolAsyncUncaptured.
func (b *Backend) FreeAsyncUncaptured(p gpumem.Ptr, s gpumem.Stream) (gpumem.CaptureStatus, error) {
	return b.guarded(s, symtab.FreeAsync, uintptr(p), s.Handle, 0, 0)
}

// guarded calls op(a1, a2, a3, a4) on s's device unless s is being captured
// (cuStreamIsCapturing or hipStreamIsCapturing answers a status other than
// none, which is returned).
func (b *Backend) guarded(s gpumem.Stream, op symtab.Op, a1, a2, a3, a4 uintptr) (gpumem.CaptureStatus, error) {
	fn, err := b.target(s.Device, op)
	if err != nil {
		return 0, err
	}
	q := b.fns[symtab.StreamIsCapturing]
	if q == 0 {
		return 0, b.notSupported(symtab.StreamIsCapturing)
	}
	r, stage := ccall.CallGuard6(b.pre, b.cur[s.Device], q, s.Handle, fn, a1, a2, a3, a4, 0, 0)
	switch stage {
	case 0:
		if int32(r) != 0 {
			return gpumem.CaptureNone, b.Status(op, r)
		}
		return gpumem.CaptureNone, nil
	case ccall.StagePre:
		return 0, b.Status(symtab.SetCurrent, r)
	case ccall.StageGuard:
		return 0, b.Status(symtab.StreamIsCapturing, r)
	}
	// CUstreamCaptureStatus / hipStreamCaptureStatus: ACTIVE 1, INVALIDATED 2.
	return gpumem.CaptureStatus(int32(r)), nil
}

// --- graphs --------------------------------------------------------------------

// StreamBeginCapture starts capturing s into a graph.
func (b *Backend) StreamBeginCapture(s gpumem.Stream, mode gpumem.CaptureMode) error {
	// CUstreamCaptureMode and hipStreamCaptureMode: GLOBAL 0, THREAD_LOCAL 1, RELAXED 2.
	if mode < gpumem.CaptureModeGlobal || mode > gpumem.CaptureModeRelaxed {
		return fmt.Errorf("gpumem: %s: unknown capture mode %d: %w", b.d.Name, int(mode), gpumem.ErrInvalidValue)
	}
	// A global or thread-local capture must end on this OS thread: the
	// goroutine stays on it until it ends the capture.
	return b.pins.Begin(s.Handle, mode, func() error {
		return b.call(s.Device, symtab.StreamBeginCapture, s.Handle, uintptr(mode), 0, 0, 0, 0)
	})
}

// StreamEndCapture ends the capture of s and returns the graph. A capture
// begun in global or thread-local mode must be ended by the goroutine that
// began it (which StreamBeginCapture keeps on its OS thread until then);
// from another goroutine the vendor refuses (WRONG_THREAD) and drops the
// capture.
func (b *Backend) StreamEndCapture(s gpumem.Stream) (gpumem.Graph, error) {
	c := getCell()
	defer putCell(c)
	r, preFailed, err := b.invoke(s.Device, symtab.StreamEndCapture, s.Handle, c.addr(0), 0, 0, 0, 0)
	if err != nil {
		return gpumem.Graph{}, err
	}
	if !preFailed {
		b.pins.End(s.Handle, int32(r))
	}
	if int32(r) != 0 {
		return gpumem.Graph{}, b.failed(symtab.StreamEndCapture, r, preFailed)
	}
	return gpumem.Graph{Handle: uintptr(c[0]), Device: s.Device}, nil
}

// StreamCaptureInfo reports the capture status of s.
func (b *Backend) StreamCaptureInfo(s gpumem.Stream) (gpumem.CaptureInfo, error) {
	c := getCell()
	defer putCell(c)
	// Allocators ask this on every allocation and free: the plain status
	// (cuStreamIsCapturing) is the cheap question, and the graph is asked
	// for only while a capture is active.
	if b.fns[symtab.StreamIsCapturing] != 0 {
		if err := b.call(s.Device, symtab.StreamIsCapturing, s.Handle, c.addr(0), 0, 0, 0, 0); err != nil {
			return gpumem.CaptureInfo{}, err
		}
		if st := gpumem.CaptureStatus(c.i32(0)); st != gpumem.CaptureActive {
			return gpumem.CaptureInfo{Status: st}, nil
		}
		c[0] = 0
	}
	if err := b.call(s.Device, symtab.StreamCaptureInfo, s.Handle, c.addr(0), c.addr(1), c.addr(2), 0, 0); err != nil {
		return gpumem.CaptureInfo{}, err
	}
	// CUstreamCaptureStatus / hipStreamCaptureStatus: NONE 0, ACTIVE 1, INVALIDATED 2.
	info := gpumem.CaptureInfo{Status: gpumem.CaptureStatus(c.i32(0))}
	if info.Status == gpumem.CaptureActive {
		info.ID = c[1]
		info.Graph = gpumem.Graph{Handle: uintptr(c[2]), Device: s.Device}
	}
	return info, nil
}

// GraphInstantiate instantiates a graph.
func (b *Backend) GraphInstantiate(g gpumem.Graph) (gpumem.GraphExec, error) {
	c := getCell()
	defer putCell(c)
	if err := b.call(g.Device, symtab.GraphInstantiate, c.addr(0), g.Handle, 0, 0, 0, 0); err != nil {
		return gpumem.GraphExec{}, err
	}
	return gpumem.GraphExec{Handle: uintptr(c[0]), Device: g.Device}, nil
}

// GraphLaunch launches an instantiated graph on s.
func (b *Backend) GraphLaunch(ge gpumem.GraphExec, s gpumem.Stream) error {
	return b.call(s.Device, symtab.GraphLaunch, ge.Handle, s.Handle, 0, 0, 0, 0)
}

// GraphExecDestroy destroys an instantiated graph.
func (b *Backend) GraphExecDestroy(ge gpumem.GraphExec) error {
	return b.call(ge.Device, symtab.GraphExecDestroy, ge.Handle, 0, 0, 0, 0, 0)
}

// GraphDestroy destroys a graph.
func (b *Backend) GraphDestroy(g gpumem.Graph) error {
	return b.call(g.Device, symtab.GraphDestroy, g.Handle, 0, 0, 0, 0, 0)
}

// UserObjectCreate makes a user object whose destructor runs fn once.
func (b *Backend) UserObjectCreate(dev int, fn func()) (gpumem.UserObject, error) {
	if fn == nil {
		return gpumem.UserObject{}, fmt.Errorf("gpumem: %s: UserObjectCreate: nil function: %w", b.d.Name, gpumem.ErrInvalidValue)
	}
	if b.fns[symtab.UserObjectCreate] == 0 {
		return gpumem.UserObject{}, b.notSupported(symtab.UserObjectCreate)
	}
	id := callback.Register(fn, true)
	c := getCell()
	defer putCell(c)
	if err := b.call(dev, symtab.UserObjectCreate, c.addr(0), id, callback.Pointer(), 1, UserObjectNoDestructSync, 0); err != nil {
		callback.Unregister(id)
		return gpumem.UserObject{}, err
	}
	return gpumem.UserObject{Handle: uintptr(c[0]), Device: dev}, nil
}

// UserObjectRelease drops count references to o.
func (b *Backend) UserObjectRelease(o gpumem.UserObject, count uint32) error {
	return b.call(o.Device, symtab.UserObjectRelease, o.Handle, uintptr(count), 0, 0, 0, 0)
}

// GraphRetainUserObject gives g count references to o.
func (b *Backend) GraphRetainUserObject(g gpumem.Graph, o gpumem.UserObject, count uint32, move bool) error {
	var flags uintptr
	if move {
		flags = GraphUserObjectMove
	}
	return b.call(g.Device, symtab.GraphRetainUserObject, g.Handle, o.Handle, uintptr(count), flags, 0, 0)
}

// --- virtual memory ----------------------------------------------------------

// MemGranularity returns dev's physical allocation granularity.
func (b *Backend) MemGranularity(dev int, recommended bool) (uint64, error) {
	if uint(dev) >= uint(b.nDev) {
		return 0, b.badDevice(dev)
	}
	c := getCell()
	defer putCell(c)
	b.d.WriteAllocProp(b, (*[AllocPropSize]byte)(unsafe.Pointer(&c[4])), b.handle[dev])
	var opt uintptr // CU_MEM_ALLOC_GRANULARITY_MINIMUM / hipMemAllocationGranularityMinimum
	if recommended {
		opt = 1
	}
	if err := b.call(dev, symtab.MemGranularity, c.addr(0), c.addr(4), opt, 0, 0, 0); err != nil {
		return 0, err
	}
	return c[0], nil
}

// MemAddressReserve reserves a virtual address range.
func (b *Backend) MemAddressReserve(size, alignment uint64) (gpumem.Ptr, error) {
	c := getCell()
	defer putCell(c)
	if err := b.call(0, symtab.MemAddressReserve, c.addr(0), uintptr(size), uintptr(alignment), 0, 0, 0); err != nil {
		return 0, err
	}
	return gpumem.Ptr(c[0]), nil
}

// MemAddressFree releases a reserved range.
func (b *Backend) MemAddressFree(p gpumem.Ptr, size uint64) error {
	return b.call(0, symtab.MemAddressFree, uintptr(p), uintptr(size), 0, 0, 0, 0)
}

// MemCreate creates physical memory on dev.
func (b *Backend) MemCreate(dev int, size uint64) (gpumem.MemHandle, error) {
	if uint(dev) >= uint(b.nDev) {
		return gpumem.MemHandle{}, b.badDevice(dev)
	}
	c := getCell()
	defer putCell(c)
	b.d.WriteAllocProp(b, (*[AllocPropSize]byte)(unsafe.Pointer(&c[4])), b.handle[dev])
	if err := b.call(dev, symtab.MemCreate, c.addr(0), uintptr(size), c.addr(4), 0, 0, 0); err != nil {
		return gpumem.MemHandle{}, err
	}
	return gpumem.MemHandle{Handle: c[0], Device: dev}, nil
}

// MemRelease releases physical memory.
func (b *Backend) MemRelease(h gpumem.MemHandle) error {
	return b.call(h.Device, symtab.MemRelease, uintptr(h.Handle), 0, 0, 0, 0, 0)
}

// MemMap maps physical memory into a reserved range.
func (b *Backend) MemMap(p gpumem.Ptr, size, offset uint64, h gpumem.MemHandle) error {
	return b.call(h.Device, symtab.MemMap, uintptr(p), uintptr(size), uintptr(offset), uintptr(h.Handle), 0, 0)
}

// MemUnmap unmaps a range.
func (b *Backend) MemUnmap(p gpumem.Ptr, size uint64) error {
	return b.call(0, symtab.MemUnmap, uintptr(p), uintptr(size), 0, 0, 0, 0)
}

// MemSetAccess grants dev access to a mapped range.
func (b *Backend) MemSetAccess(p gpumem.Ptr, size uint64, dev int, a gpumem.Access) error {
	if uint(dev) >= uint(b.nDev) {
		return b.badDevice(dev)
	}
	f, ok := accessFlags(a)
	if !ok {
		return b.badAccess(a)
	}
	c := getCell()
	defer putCell(c)
	EncodeAccessDesc(c.bytes()[:AccessDescSize], b.handle[dev], f)
	return b.call(dev, symtab.MemSetAccess, uintptr(p), uintptr(size), c.addr(0), 1, 0, 0)
}

// --- peers -----------------------------------------------------------------------

// CanAccessPeer reports whether dev can access peer's memory.
func (b *Backend) CanAccessPeer(dev, peer int) (bool, error) {
	if uint(dev) >= uint(b.nDev) {
		return false, b.badDevice(dev)
	}
	if uint(peer) >= uint(b.nDev) {
		return false, b.badDevice(peer)
	}
	c := getCell()
	defer putCell(c)
	if err := b.call(dev, symtab.CanAccessPeer, c.addr(0), uintptr(b.handle[dev]), uintptr(b.handle[peer]), 0, 0, 0); err != nil {
		return false, err
	}
	return c.i32(0) != 0, nil
}

// EnablePeerAccess lets dev access peer's memory.
func (b *Backend) EnablePeerAccess(dev, peer int) error {
	if uint(peer) >= uint(b.nDev) {
		return b.badDevice(peer)
	}
	err := b.call(dev, symtab.EnablePeerAccess, b.cur[peer], 0, 0, 0, 0, 0)
	var ve *gpumem.Error
	if errors.As(err, &ve) && ve.Code == StatusPeerAlreadyEnabled {
		return nil
	}
	return err
}

// DisablePeerAccess revokes dev's access to peer's memory.
func (b *Backend) DisablePeerAccess(dev, peer int) error {
	if uint(peer) >= uint(b.nDev) {
		return b.badDevice(peer)
	}
	return b.call(dev, symtab.DisablePeerAccess, b.cur[peer], 0, 0, 0, 0, 0)
}

// CallCurrent calls op on dev with no arguments beyond a1 (benchmarks of the
// per-call cost).
func (b *Backend) CallCurrent(dev int, op symtab.Op, a1 uintptr) error {
	return b.call(dev, op, a1, 0, 0, 0, 0, 0)
}
