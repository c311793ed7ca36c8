package sim

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/capthread"
	"github.com/gpumem/gpumem/internal/symtab"
)

// DeviceConfig describes one simulated device. Zero fields take the defaults
// of an H200: 140 GiB, 2 MiB granularity, name "Simulated NVIDIA H200".
type DeviceConfig struct {
	Name        string
	Capacity    uint64 // bytes of device memory
	Granularity uint64 // virtual memory (and pool) granularity in bytes; a power of two >= 64 KiB
	NoVMM       bool   // the virtual memory API returns ErrNotSupported
	NoManaged   bool   // managed memory returns ErrNotSupported
	NoPools     bool   // stream-ordered pools return ErrNotSupported

	// ManagedPageSize is the residency granule of managed memory (default 2 MiB).
	ManagedPageSize uint64
	// PoolGranularity is the unit stream-ordered pools grow by (default
	// 32 MiB, what CUDA 13's pools reserve on an H200); a multiple of
	// Granularity.
	PoolGranularity uint64
}

// Config configures a simulated machine.
type Config struct {
	Devices []DeviceConfig // empty: one default device
	// Peer reports whether device a can access device b's memory (a != b);
	// nil: every pair can.
	Peer func(a, b int) bool
	// Manual makes streams run only when Step, Drain or a synchronizing call
	// (StreamSynchronize, EventSynchronize, DeviceSynchronize, synchronous
	// copies) drives them, for deterministic tests. Otherwise streams run
	// freely, each on its own goroutine.
	Manual bool
	// NoStacks skips recording the creation stack of objects (Leaks then
	// reports objects without their stacks); for benchmarks.
	NoStacks bool
}

// Defaults of a simulated device.
const (
	DefaultCapacity        = 140 << 30
	DefaultGranularity     = 2 << 20
	DefaultManagedPageSize = 2 << 20
	DefaultPoolGranularity = 32 << 20
	DefaultName            = "Simulated NVIDIA H200"
	// Alignment is the alignment of every address the simulator hands out
	// and the unit sizes are rounded up to.
	Alignment = 512
	// MaxDevices is the most devices a simulated machine has.
	MaxDevices = 64
	// MaxCapacity is the most memory a simulated device has (4 TiB): a
	// quarter of the address range each device is given.
	MaxCapacity = deviceVASize / 4
)

// Address layout: device d's memory lives in [(d+1)<<44, (d+2)<<44); pinned
// host, managed and virtual-memory reservations have their own regions above.
const (
	deviceVASize = 1 << 44
	hostVABase   = 1 << 61
	managedVA    = hostVABase + 1<<58
	reserveVA    = hostVABase + 2<<58
	regionVASize = 1 << 57
	// contiguousLimit: host and managed allocations up to this size get one
	// contiguous Go slice (so HostBytes can alias it); larger ones are paged.
	contiguousLimit = 4 << 30
	// maxHostAlloc and maxManagedAlloc bound what the host side can hold.
	maxHostAlloc    = 1 << 40
	maxManagedAlloc = 4 << 40
)

// GPU is a simulated machine of one or more devices. It implements
// gpumem.Backend; see the package documentation for what it models.
type GPU struct {
	mu     sync.Mutex
	pins   capthread.Pins // goroutines held on their thread by a capture
	cond   sync.Cond
	nwait  int
	cfg    Config
	manual bool
	closed atomic.Bool

	devs       []*device
	nextHandle uintptr
	nextID     uint64

	streams map[uintptr]*stream
	// streamEpoch counts destroyed streams and Close (StreamEpoch).
	streamEpoch atomic.Uint64
	all         map[*stream]struct{} // created streams, and destroyed ones still draining
	events      map[uintptr]*event
	pools       map[uintptr]*pool
	graphs      map[uintptr]*graph
	execs       map[uintptr]*graphExec
	uobjs       map[uintptr]*userObject
	handles     map[uint64]*memHandle

	allocs   map[uint64]*object // what Free/FreeHost/FreeAsync take, by start
	spans    treap              // top-level objects by start
	tags     treap              // Tag annotations by start
	reserves treap              // virtual-memory reservations by start

	hostVA, managedVA, reserveVA *rangeSet
	bigStore                     *pageStore // paged backing of large host/managed allocations

	captures  map[uint64]*capture
	captureID uint64

	kern kernelState // Go kernels, modules and functions

	violations []Violation
	migrated   Migration

	calls    [symtab.NumOps]atomic.Int64
	faultMu  sync.Mutex
	faults   [symtab.NumOps][]fault
	anyFault atomic.Bool
}

type fault struct {
	call int64
	err  error
}

type device struct {
	ord      int
	cfg      DeviceConfig
	used     uint64 // physical bytes: Malloc, pool reserves, MemCreate, graph allocations
	resident uint64 // managed bytes resident on the device
	va       *rangeSet
	store    *pageStore
	legacy   *stream
	blocking map[*stream]struct{} // blocking streams, which the legacy stream orders with
	defPool  *pool
	curPool  *pool
	peer     []bool         // peer[p]: this device may access p's memory
	kfault   *kernelFault   // the first fault of a Go kernel: the sticky error
	others   []OtherProcess // memory other processes hold (others.go), counted in used
}

var (
	_ gpumem.Backend       = (*GPU)(nil)
	_ gpumem.StreamChecker = (*GPU)(nil)
)

// New makes a simulated machine.
func New(cfg Config) (*GPU, error) {
	if len(cfg.Devices) == 0 {
		cfg.Devices = []DeviceConfig{{}}
	}
	g := &GPU{
		cfg:        cfg,
		manual:     cfg.Manual,
		nextHandle: 0x10000,
		streams:    map[uintptr]*stream{},
		all:        map[*stream]struct{}{},
		events:     map[uintptr]*event{},
		pools:      map[uintptr]*pool{},
		graphs:     map[uintptr]*graph{},
		execs:      map[uintptr]*graphExec{},
		uobjs:      map[uintptr]*userObject{},
		handles:    map[uint64]*memHandle{},
		allocs:     map[uint64]*object{},
		hostVA:     newRangeSet(),
		managedVA:  newRangeSet(),
		reserveVA:  newRangeSet(),
		bigStore:   newPageStore(),
		captures:   map[uint64]*capture{},
	}
	g.cond.L = &g.mu
	g.hostVA.release(hostVABase+Alignment, regionVASize)
	g.managedVA.release(managedVA, regionVASize)
	g.reserveVA.release(reserveVA, regionVASize)
	n := len(cfg.Devices)
	if n > MaxDevices {
		return nil, fmt.Errorf("sim: %d devices is too many (at most %d): %w", n, MaxDevices, gpumem.ErrInvalidValue)
	}
	for i, dc := range cfg.Devices {
		if dc.Name == "" {
			dc.Name = DefaultName
		}
		if dc.Capacity == 0 {
			dc.Capacity = DefaultCapacity
		}
		if dc.Granularity == 0 {
			dc.Granularity = DefaultGranularity
		}
		if dc.ManagedPageSize == 0 {
			dc.ManagedPageSize = DefaultManagedPageSize
		}
		if dc.PoolGranularity == 0 {
			dc.PoolGranularity = max(DefaultPoolGranularity, dc.Granularity)
		}
		if !pow2(dc.Granularity) || dc.Granularity < pageSize {
			return nil, fmt.Errorf("sim: device %d: granularity %d is not a power of two >= 64 KiB: %w", i, dc.Granularity, gpumem.ErrInvalidValue)
		}
		if dc.PoolGranularity%dc.Granularity != 0 {
			return nil, fmt.Errorf("sim: device %d: pool granularity %d is not a multiple of the granularity %d: %w", i, dc.PoolGranularity, dc.Granularity, gpumem.ErrInvalidValue)
		}
		if !pow2(dc.ManagedPageSize) || dc.ManagedPageSize < pageSize {
			return nil, fmt.Errorf("sim: device %d: managed page size %d is not a power of two >= 64 KiB: %w", i, dc.ManagedPageSize, gpumem.ErrInvalidValue)
		}
		if dc.Capacity > MaxCapacity {
			return nil, fmt.Errorf("sim: device %d: capacity %d exceeds the simulator's limit of %s: %w", i, dc.Capacity, gpumem.FormatBytes(MaxCapacity), gpumem.ErrInvalidValue)
		}
		d := &device{ord: i, cfg: dc, va: newRangeSet(), store: newPageStore(), blocking: map[*stream]struct{}{}, peer: make([]bool, n)}
		base := uint64(i+1) << 44
		d.va.release(base, deviceVASize)
		d.legacy = &stream{g: g, dev: d, legacy: true}
		g.devs = append(g.devs, d)
		if !dc.NoPools {
			d.defPool = g.newPool(d, true, 0)
			d.curPool = d.defPool
		}
	}
	return g, nil
}

// NewDefault makes one free-running 140 GiB device.
func NewDefault() *GPU {
	g, err := New(Config{})
	if err != nil {
		panic("sim: default configuration rejected: " + err.Error()) // cannot happen
	}
	return g
}

func pow2(x uint64) bool { return x != 0 && x&(x-1) == 0 }

func init() {
	gpumem.Register(gpumem.Registration{Name: "sim", Open: openFromEnv, FormatVersion: formatVersion})
}

// formatVersion formats a version in CUDA's numbering, which the simulator
// reports (12020 is "12.2").
func formatVersion(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

// openFromEnv is gpumem.Open's way into the simulator: the machine
// GPUMEM_SIM_DEVICES and GPUMEM_SIM_CAPACITY describe.
func openFromEnv(_ string) (gpumem.Backend, error) {
	n := 1
	if s := strings.TrimSpace(os.Getenv("GPUMEM_SIM_DEVICES")); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > MaxDevices {
			return nil, fmt.Errorf("sim: GPUMEM_SIM_DEVICES=%q: want a device count from 1 to 64: %w", s, gpumem.ErrInvalidValue)
		}
		n = v
	}
	var capacity uint64
	if s := strings.TrimSpace(os.Getenv("GPUMEM_SIM_CAPACITY")); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil || v == 0 {
			return nil, fmt.Errorf("sim: GPUMEM_SIM_CAPACITY=%q: want a byte count: %w", s, gpumem.ErrInvalidValue)
		}
		capacity = v
	}
	cfg := Config{Devices: make([]DeviceConfig, n)}
	for i := range cfg.Devices {
		cfg.Devices[i].Capacity = capacity
	}
	g, err := New(cfg)
	if err != nil {
		return nil, err // a nil Backend, not a nil *GPU in one
	}
	return g, nil
}

// enter counts a call of m and reports ErrClosed or an injected fault. It
// refuses a nil *GPU: the methods that call it first need no guard of
// their own.
func (g *GPU) enter(m symtab.Op) error {
	if g == nil {
		return errNil(opName(m))
	}
	n := g.calls[m].Add(1)
	if g.anyFault.Load() {
		if err := g.takeFault(m, n); err != nil {
			return err
		}
	}
	if g.closed.Load() {
		return errf(m, symtab.CUDADeinitialized, "the simulated GPU is closed")
	}
	return nil
}

func (g *GPU) takeFault(m symtab.Op, n int64) error {
	g.faultMu.Lock()
	defer g.faultMu.Unlock()
	fs := g.faults[m]
	for i, f := range fs {
		if f.call == n {
			g.faults[m] = append(fs[:i:i], fs[i+1:]...)
			if f.err != nil {
				return f.err
			}
			return vendorErr(m, naturalCode(m))
		}
	}
	return nil
}

// InjectFault makes the nth (1-based) future call of the Backend method op
// (its Go name, e.g. "Malloc", "EventRecord", or "Launch") fail with err; a
// nil err means the *gpumem.Error the driver would give, matching the
// method's natural sentinel (ErrOutOfMemory for the allocating methods,
// ErrNoDevice for DeviceCount, ErrInvalidValue for the rest). The failing
// call has no other effect. Every method that returns an error can fail
// this way; Name, Library and ErrorName cannot. An unknown op name panics:
// it is a mistake in the test that names it.
func (g *GPU) InjectFault(op string, nth int, err error) {
	if g == nil {
		return
	}
	m, ok := methodByName[op]
	if !ok {
		panic("sim: InjectFault: no Backend method named " + strconv.Quote(op))
	}
	if nth < 1 {
		panic("sim: InjectFault: nth counts from 1")
	}
	g.faultMu.Lock()
	defer g.faultMu.Unlock()
	g.faults[m] = append(g.faults[m], fault{call: g.calls[m].Load() + int64(nth), err: err})
	g.anyFault.Store(true)
}

// ClearFaults removes every pending injected fault.
func (g *GPU) ClearFaults() {
	if g == nil {
		return
	}
	g.faultMu.Lock()
	defer g.faultMu.Unlock()
	for i := range g.faults {
		g.faults[i] = nil
	}
	g.anyFault.Store(false)
}

// Calls reports how many times the Backend method op (its Go name) was
// called, failed calls included; 0 for an unknown name.
func (g *GPU) Calls(op string) int {
	if g == nil {
		return 0
	}
	m, ok := methodByName[op]
	if !ok {
		return 0
	}
	return int(g.calls[m].Load())
}

// Name returns "sim".
func (g *GPU) Name() string {
	if g == nil {
		return ""
	}
	g.calls[symtab.Name].Add(1)
	return "sim"
}

// Library returns "": the simulator loads no library.
func (g *GPU) Library() string {
	if g == nil {
		return ""
	}
	g.calls[symtab.Library].Add(1)
	return ""
}

// Version reports driver and runtime version 13000 (CUDA 13.0).
func (g *GPU) Version() (gpumem.Version, error) {
	if err := g.enter(symtab.DriverGetVersion); err != nil {
		return gpumem.Version{}, err
	}
	return gpumem.Version{Driver: 13000, Runtime: 13000}, nil
}

// ErrorName returns CUDA's name for a status code ("CUDA_ERROR_OUT_OF_MEMORY"
// for 2), or "" for a code it does not know.
func (g *GPU) ErrorName(code int) string {
	if g == nil {
		return ""
	}
	g.calls[symtab.GetErrorName].Add(1)
	return errorName(code)
}

// Close shuts the machine down: queued work that has not run is dropped, and
// every later call returns an error matching ErrClosed. Leaks and Violations
// still answer after Close.
func (g *GPU) Close() error {
	if g == nil {
		return errNil("Close")
	}
	if err := g.enter(symtab.Close); err != nil {
		return err
	}
	g.mu.Lock()
	if g.closed.Swap(true) {
		g.mu.Unlock()
		return errf(symtab.Close, symtab.CUDADeinitialized, "closed twice")
	}
	g.streamEpoch.Add(1)
	g.cond.Broadcast()
	g.mu.Unlock()
	return nil
}

// handle returns a fresh handle value; lock held.
func (g *GPU) handle() uintptr {
	g.nextHandle += 0x10
	return g.nextHandle
}

func (g *GPU) id() uint64 {
	g.nextID++
	return g.nextID
}

func (g *GPU) device(m symtab.Op, dev int) (*device, error) {
	if dev < 0 || dev >= len(g.devs) {
		return nil, errf(m, symtab.CUDAInvalidDevice, "device %d does not exist (the machine has %d)", dev, len(g.devs))
	}
	return g.devs[dev], nil
}

// DeviceCount reports the number of devices.
func (g *GPU) DeviceCount() (int, error) {
	if err := g.enter(symtab.DeviceGetCount); err != nil {
		return 0, err
	}
	return len(g.devs), nil
}

// DeviceName reports the configured name of dev.
func (g *GPU) DeviceName(dev int) (string, error) {
	if err := g.enter(symtab.DeviceName); err != nil {
		return "", err
	}
	d, err := g.device(symtab.DeviceName, dev)
	if err != nil {
		return "", err
	}
	return d.cfg.Name, nil
}

// DeviceAttribute answers like an H200 (compute capability 9.0, 132
// multiprocessors, unified addressing), with managed memory, pools and the
// virtual memory API reported as the device's configuration says.
func (g *GPU) DeviceAttribute(dev int, a gpumem.Attribute) (int, error) {
	if err := g.enter(symtab.DeviceAttribute); err != nil {
		return 0, err
	}
	d, err := g.device(symtab.DeviceAttribute, dev)
	if err != nil {
		return 0, err
	}
	b2i := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	switch a {
	case gpumem.AttrComputeCapabilityMajor:
		return 9, nil
	case gpumem.AttrComputeCapabilityMinor:
		return 0, nil
	case gpumem.AttrMultiprocessorCount:
		return 132, nil
	case gpumem.AttrUnifiedAddressing:
		return 1, nil
	case gpumem.AttrManagedMemory, gpumem.AttrConcurrentManagedAccess:
		return b2i(!d.cfg.NoManaged), nil
	case gpumem.AttrPageableMemoryAccess:
		return 0, nil
	case gpumem.AttrCanMapHostMemory:
		return 1, nil
	case gpumem.AttrMemoryPoolsSupported:
		return b2i(!d.cfg.NoPools), nil
	case gpumem.AttrVirtualMemoryManagement:
		return b2i(!d.cfg.NoVMM), nil
	case gpumem.AttrIntegrated:
		return 0, nil
	case gpumem.AttrPCIBusID:
		return 0x18 + 0x10*dev, nil
	case gpumem.AttrPCIDeviceID, gpumem.AttrPCIDomainID:
		return 0, nil
	case gpumem.AttrClockRateKHz:
		return 1980000, nil
	case gpumem.AttrMemoryClockRateKHz:
		return 3201000, nil
	case gpumem.AttrGlobalMemoryBusWidth:
		return 6144, nil
	case gpumem.AttrL2CacheSize:
		return 60 << 20, nil
	}
	return 0, errf(symtab.DeviceAttribute, symtab.CUDAInvalidValue, "unknown attribute %v", a)
}

// MemInfo reports free and total device memory. Used memory counts Malloc,
// the pools' reserves, MemCreate, graph allocations and managed memory
// resident on the device.
func (g *GPU) MemInfo(dev int) (free, total uint64, err error) {
	if err := g.enter(symtab.MemInfo); err != nil {
		return 0, 0, err
	}
	d, err := g.device(symtab.MemInfo, dev)
	if err != nil {
		return 0, 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	used := d.used + d.resident
	if used > d.cfg.Capacity {
		used = d.cfg.Capacity
	}
	return d.cfg.Capacity - used, d.cfg.Capacity, nil
}

// stack is the creation site of an object, formatted only when reported.
type stack struct {
	pcs [8]uintptr
	n   uint8
}

// callers records the stack of the Backend method's caller: skip counts the
// simulator's frames between the caller of callers and the user's code (1:
// the caller of callers is the Backend method itself).
//
//go:noinline
func (g *GPU) callers(skip int) stack {
	var s stack
	if g.cfg.NoStacks {
		return s
	}
	s.n = uint8(callerPCs(skip, s.pcs[:]))
	return s
}

func (s *stack) String() string {
	if s.n == 0 {
		return "\t(creation stack not recorded)"
	}
	var b strings.Builder
	frames := runtime.CallersFrames(s.pcs[:s.n])
	for {
		f, more := frames.Next()
		if f.Function != "" {
			fmt.Fprintf(&b, "\t%s\n\t\t%s:%d\n", f.Function, f.File, f.Line)
		}
		if !more {
			break
		}
	}
	return strings.TrimRight(b.String(), "\n")
}
