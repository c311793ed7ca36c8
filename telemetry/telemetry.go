package telemetry

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/bind"
	"github.com/gpumem/gpumem/sim"
)

// Field names one reading of DeviceStats; Supported says which were read.
type Field uint

// Fields of DeviceStats.
const (
	// FieldMemory: MemoryUsed and MemoryTotal.
	FieldMemory Field = 1 << iota
	// FieldUtilizationGPU: UtilizationGPU.
	FieldUtilizationGPU
	// FieldUtilizationMemory: UtilizationMemory.
	FieldUtilizationMemory
	// FieldTemperature: TemperatureC.
	FieldTemperature
	// FieldPower: PowerW.
	FieldPower
	// FieldClockSM: ClockSMMHz.
	FieldClockSM
	// FieldClockMem: ClockMemMHz.
	FieldClockMem
)

var fieldNames = [...]string{"memory", "utilization_gpu", "utilization_memory", "temperature", "power", "clock_sm", "clock_mem"}

// String names a field ("memory", "power"...), or lists a set of them
// joined by "|".
func (f Field) String() string {
	s := ""
	for i, n := range fieldNames {
		if f&(1<<i) != 0 {
			if s != "" {
				s += "|"
			}
			s += n
		}
	}
	if s == "" {
		return "none"
	}
	return s
}

// DeviceStats is one reading of a device's telemetry. A field is valid only
// when Supported has its Field: a library or a device that lacks a reading
// (an optional symbol missing, a sensor the device has not, a status of
// "not supported") leaves it out and the other fields stand.
type DeviceStats struct {
	Device int    // the backend's ordinal
	Name   string // the device's name as the telemetry library gives it
	// PCIBusID is the device's PCI address, "DDDD:BB:DD.F" ("" when the
	// backend does not tell it).
	PCIBusID string

	MemoryUsed  uint64 // bytes in use on the device, by every process and the driver
	MemoryTotal uint64 // bytes of device memory

	UtilizationGPU    int     // percent of the last sample period a kernel ran (NVML) or the GPU was busy (ROCm SMI)
	UtilizationMemory int     // percent of the period device memory was read or written
	TemperatureC      int     // degrees Celsius: NVML's GPU sensor, ROCm SMI's junction sensor (else edge)
	PowerW            float64 // watts drawn
	ClockSMMHz        int     // the SM (CUDA) or system (ROCm) clock, MHz
	ClockMemMHz       int     // the memory clock, MHz

	Supported Field // the fields read
}

// Has reports whether f was read.
func (s DeviceStats) Has(f Field) bool { return s.Supported&f == f }

// Process is one process's memory on a device.
type Process struct {
	PID int
	// UsedBytes is the device memory the process holds; valid unless
	// Unknown (NVML reports no figure in some configurations).
	UsedBytes uint64
	Unknown   bool
}

// selfPID is this process's ID, as the libraries list it (outside a
// container's PID namespace they list the host's IDs: see Processes).
var selfPID = os.Getpid()

// engine is one implementation of telemetry: NVML, ROCm SMI or the
// simulator's accounting. dev is the backend's ordinal, in range.
type engine interface {
	name() string
	library() string
	device(dev int) (DeviceStats, error)
	processes(dev int) ([]Process, error)
	close() error
}

// Telemetry reads a backend's devices' telemetry. Its methods are safe for
// concurrent use. The methods of a nil *Telemetry return errors matching
// gpumem.ErrInvalidValue, and zero values where they return no error.
type Telemetry struct {
	mu     sync.RWMutex // held for reading by calls, for writing by Close
	eng    engine
	n      int
	self   int
	notes  []string
	closed bool
}

// Open returns the telemetry of backend b's devices, indexed by b's
// ordinals. For a CUDA backend it loads NVML (libnvidia-ml.so.1, or the
// file GPUMEM_NVML_LIBRARY names), for a HIP backend ROCm SMI
// (librocm_smi64, or GPUMEM_ROCM_SMI_LIBRARY); neither creates a GPU
// context. Each of b's devices is found in the library by its PCI address,
// so that CUDA_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES reorderings are
// right; where the backend does not tell the address the library's index
// is taken for the ordinal, and Notes says so. For the simulator (package
// sim) the readings come from the simulator's accounting: memory used and
// total, this process's memory and the other processes'
// (sim.GPU.SetOtherProcesses); it has no utilization, temperature or power,
// and its clocks are its devices' attributes.
//
// A missing library is an error matching gpumem.ErrLibraryNotFound; a
// library with no device (no driver loaded) one matching
// gpumem.ErrNoDevice; a backend of no known vendor one matching
// gpumem.ErrNotSupported.
func Open(b gpumem.Backend, opts ...bind.Option) (*Telemetry, error) {
	if b == nil {
		return nil, fmt.Errorf("gpumem: telemetry: nil backend: %w", gpumem.ErrInvalidValue)
	}
	n, err := b.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("gpumem: telemetry: %w", err)
	}
	t := &Telemetry{n: n, self: selfPID}
	if _, err := bind.ContextOf(b, 0); err != nil && errors.Is(err, gpumem.ErrNotSupported) {
		g, ok := b.(*sim.GPU)
		if !ok {
			return nil, fmt.Errorf("gpumem: telemetry: backend %s is neither a vendor backend nor the simulator: %w", b.Name(), err)
		}
		t.eng = &simEngine{g: g}
		return t, nil
	}
	v, ok := vendorOf(b)
	if !ok {
		return nil, &gpumem.NotSupportedError{Backend: b.Name(), Op: "telemetry.Open", Reason: "no telemetry library for this backend"}
	}
	sys, err := openSystem(v, opts)
	if err != nil {
		return nil, err
	}
	eng, notes, err := sys.mapBackend(b, n)
	if err != nil {
		_ = sys.close()
		return nil, err
	}
	t.eng, t.notes = eng, notes
	return t, nil
}

// OpenSystem returns the telemetry of every device the vendor's library
// sees (NVML for bind.CUDA, ROCm SMI for bind.HIP), indexed in the
// library's own order, without any backend: a monitoring tool's view, and
// the way to check a library on a machine with no GPU. Its errors are
// Open's.
func OpenSystem(v bind.Vendor, opts ...bind.Option) (*Telemetry, error) {
	sys, err := openSystem(v, opts)
	if err != nil {
		return nil, err
	}
	return &Telemetry{eng: sys, n: sys.count(), self: selfPID}, nil
}

// vendorOf is the vendor of a native backend, by its name.
func vendorOf(b gpumem.Backend) (bind.Vendor, bool) {
	switch b.Name() {
	case "cuda":
		return bind.CUDA, true
	case "hip":
		return bind.HIP, true
	}
	return 0, false
}

// Backend returns the name of the telemetry's source: "nvml", "rocm_smi"
// or "sim".
func (t *Telemetry) Backend() string {
	if t == nil {
		return ""
	}
	return t.eng.name()
}

// Library returns the file of the library loaded ("" for the simulator).
func (t *Telemetry) Library() string {
	if t == nil {
		return ""
	}
	return t.eng.library()
}

// DeviceCount returns the number of devices.
func (t *Telemetry) DeviceCount() int {
	if t == nil {
		return 0
	}
	return t.n
}

// Notes returns what Open noted of the mapping of devices (an ordinal
// taken for the library's index), or nil.
func (t *Telemetry) Notes() []string {
	if t == nil {
		return nil
	}
	return append([]string(nil), t.notes...)
}

// errNilTelemetry is the error of the methods of a nil *Telemetry.
var errNilTelemetry = fmt.Errorf("gpumem: telemetry: nil Telemetry: %w", gpumem.ErrInvalidValue)

func (t *Telemetry) enter(dev int) error {
	if t.closed {
		return fmt.Errorf("gpumem: telemetry: closed: %w", gpumem.ErrClosed)
	}
	if dev < 0 || dev >= t.n {
		return fmt.Errorf("gpumem: telemetry: device %d does not exist (%d devices): %w", dev, t.n, gpumem.ErrInvalidValue)
	}
	return nil
}

// Device reads device dev's telemetry. Readings the library or device
// lacks are left out of Supported; an error means not even the memory
// could be read.
func (t *Telemetry) Device(dev int) (DeviceStats, error) {
	if t == nil {
		return DeviceStats{}, errNilTelemetry
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if err := t.enter(dev); err != nil {
		return DeviceStats{}, err
	}
	s, err := t.eng.device(dev)
	s.Device = dev
	return s, err
}

// Processes lists the processes holding memory on device dev, this one
// included, in the library's order. In a container NVML may list the
// processes of other PID namespaces by PIDs this process cannot see, or
// not at all.
func (t *Telemetry) Processes(dev int) ([]Process, error) {
	if t == nil {
		return nil, errNilTelemetry
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if err := t.enter(dev); err != nil {
		return nil, err
	}
	return t.eng.processes(dev)
}

// Self returns the device memory this process holds on dev, the driver's
// context included, and whether the library listed the process with a
// figure (a process with no context on the device is not listed, and holds
// 0; in a container NVML may not list this process by its PID at all).
func (t *Telemetry) Self(dev int) (bytes uint64, listed bool, err error) {
	ps, err := t.Processes(dev)
	if err != nil {
		return 0, false, err
	}
	for _, p := range ps {
		if p.PID == t.self {
			return p.UsedBytes, !p.Unknown, nil
		}
	}
	return 0, false, nil
}

// Others returns the device memory the other processes hold on dev, in
// all and each: what is left of the device to this process is its total
// less that and less what this process holds.
func (t *Telemetry) Others(dev int) (bytes uint64, procs []Process, err error) {
	ps, err := t.Processes(dev)
	if err != nil {
		return 0, nil, err
	}
	for _, p := range ps {
		if p.PID == t.self {
			continue
		}
		procs = append(procs, p)
		if !p.Unknown {
			bytes += p.UsedBytes
		}
	}
	return bytes, procs, nil
}

// Close releases the library (NVML and ROCm SMI count their users: other
// users in the process keep theirs). Calls after Close fail with an error
// matching gpumem.ErrClosed; a second Close does nothing.
func (t *Telemetry) Close() error {
	if t == nil {
		return errNilTelemetry
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	return t.eng.close()
}
