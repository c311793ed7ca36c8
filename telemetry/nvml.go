package telemetry

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/bind"
)

// NVML's table: the rows in the order of the nv* constants below. The
// prototypes, enum values and struct layouts are nvml.h's (CUDA 12.x and
// 13.x; the functions used are in every driver since R470):
//
//	nvmlReturn_t nvmlInit_v2(void);
//	nvmlReturn_t nvmlShutdown(void);
//	const char *nvmlErrorString(nvmlReturn_t result);
//	nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length);   // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
//	nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount);
//	nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
//	nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device);  // "domain:bus:device.function", hex
//	nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci);
//	nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);  // NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
//	nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
//	nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos);
//	nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_v2_t *infos);
//	nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization);
//	nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType, unsigned int *temp);
//	nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power);  // milliwatts
//	nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock);  // MHz
//
// Structs (x86-64 and arm64 alike):
//
//	nvmlMemory_t      {unsigned long long total, free, used}                      24 bytes: 0, 8, 16
//	nvmlProcessInfo_t {unsigned int pid; unsigned long long usedGpuMemory;
//	                   unsigned int gpuInstanceId, computeInstanceId}             24 bytes: 0, 8, 16, 20
//	                  (nvmlProcessInfo_v2_t, which _v2 fills, is the same; the
//	                  unversioned function's v1 struct of 16 bytes is not used)
//	nvmlUtilization_t {unsigned int gpu, memory}                                  8 bytes: 0, 4
//	nvmlPciInfo_t     {char busIdLegacy[16]; unsigned int domain, bus, device,
//	                   pciDeviceId, pciSubSystemId; char busId[32]}               68 bytes: domain 16, bus 20, device 24
//
// usedGpuMemory is NVML_VALUE_NOT_AVAILABLE (~0ULL) where the driver has no
// figure. Enums: NVML_TEMPERATURE_GPU 0; NVML_CLOCK_SM 1, NVML_CLOCK_MEM 2.
var nvmlTable = bind.NewTable("nvml",
	bind.Func{Op: "Init", Symbol: bind.Symbols("nvmlInit_v2", ""), Args: bind.Args(0), Required: bind.CUDAOnly},
	bind.Func{Op: "Shutdown", Symbol: bind.Symbols("nvmlShutdown", ""), Args: bind.Args(0), Required: bind.CUDAOnly},
	bind.Func{Op: "ErrorString", Symbol: bind.Symbols("nvmlErrorString", ""), Args: bind.Args(1), Required: bind.CUDAOnly},
	bind.Func{Op: "DriverVersion", Symbol: bind.Symbols("nvmlSystemGetDriverVersion", ""), Args: bind.Args(2), Required: bind.CUDAOnly},
	bind.Func{Op: "DeviceCount", Symbol: bind.Symbols("nvmlDeviceGetCount_v2", ""), Args: bind.Args(1), Required: bind.CUDAOnly},
	bind.Func{Op: "HandleByIndex", Symbol: bind.Symbols("nvmlDeviceGetHandleByIndex_v2", ""), Args: bind.Args(2), Required: bind.CUDAOnly},
	bind.Func{Op: "HandleByPCIBusID", Symbol: bind.Symbols("nvmlDeviceGetHandleByPciBusId_v2", ""), Args: bind.Args(2), Required: bind.CUDAOnly,
		Notes: "maps a backend's device to NVML's by its PCI address"},
	bind.Func{Op: "PCIInfo", Symbol: bind.Symbols("nvmlDeviceGetPciInfo_v3", ""), Args: bind.Args(2),
		Notes: "optional: the PCI address of NVML's devices when no backend tells it"},
	bind.Func{Op: "DeviceName", Symbol: bind.Symbols("nvmlDeviceGetName", ""), Args: bind.Args(3), Required: bind.CUDAOnly},
	bind.Func{Op: "MemoryInfo", Symbol: bind.Symbols("nvmlDeviceGetMemoryInfo", ""), Args: bind.Args(2), Required: bind.CUDAOnly},
	bind.Func{Op: "ComputeProcesses", Symbol: bind.Symbols("nvmlDeviceGetComputeRunningProcesses_v3", ""), Args: bind.Args(3),
		Notes: "optional: drivers before R510 have _v2, with the same 24-byte nvmlProcessInfo_t"},
	bind.Func{Op: "ComputeProcessesV2", Symbol: bind.Symbols("nvmlDeviceGetComputeRunningProcesses_v2", ""), Args: bind.Args(3),
		Notes: "optional: the fallback of _v3"},
	bind.Func{Op: "UtilizationRates", Symbol: bind.Symbols("nvmlDeviceGetUtilizationRates", ""), Args: bind.Args(2)},
	bind.Func{Op: "Temperature", Symbol: bind.Symbols("nvmlDeviceGetTemperature", ""), Args: bind.Args(3)},
	bind.Func{Op: "PowerUsage", Symbol: bind.Symbols("nvmlDeviceGetPowerUsage", ""), Args: bind.Args(2)},
	bind.Func{Op: "ClockInfo", Symbol: bind.Symbols("nvmlDeviceGetClockInfo", ""), Args: bind.Args(3)},
)

// Rows of nvmlTable.
const (
	nvInit bind.Op = iota
	nvShutdown
	nvErrorString
	nvDriverVersion
	nvDeviceCount
	nvHandleByIndex
	nvHandleByPCIBusID
	nvPCIInfo
	nvDeviceName
	nvMemoryInfo
	nvComputeProcesses
	nvComputeProcessesV2
	nvUtilizationRates
	nvTemperature
	nvPowerUsage
	nvClockInfo
)

// nvmlReturn_t values (nvml.h) that mean something to the engine.
const (
	nvmlErrorUninitialized    = 1
	nvmlErrorInvalidArgument  = 2
	nvmlErrorNotSupported     = 3
	nvmlErrorNotFound         = 6
	nvmlErrorInsufficientSize = 7
	nvmlErrorDriverNotLoaded  = 9
	nvmlErrorLibraryNotFound  = 12
	nvmlErrorGPUIsLost        = 15
	nvmlErrorGPUNotFound      = 28

	nvmlTemperatureGPU = 0
	nvmlClockSM        = 1
	nvmlClockMem       = 2

	nvmlValueNotAvailable = ^uint64(0)
	nvmlProcessInfoSize   = 24
	nvmlDriverVersionLen  = 80
	nvmlDeviceNameLen     = 96
	nvmlPCIInfoSize       = 68
)

// NVMLLibraryEnv names the NVML file to load instead of libnvidia-ml.so.1.
const NVMLLibraryEnv = "GPUMEM_NVML_LIBRARY"

// NVML is the declaration of NVIDIA's management library.
var NVML = &bind.Library{
	Name:  "nvml",
	Files: [bind.NumVendors][]string{bind.CUDA: {"libnvidia-ml.so.1", "libnvidia-ml.so"}},
	Env:   NVMLLibraryEnv,
	Table: nvmlTable,
	Status: bind.Status{
		Success:  0,
		Name:     bind.NameFunc(nvErrorString),
		Sentinel: nvmlSentinel,
	},
	Version: nvmlVersion,
}

// nvmlSentinel is the gpumem sentinel of an NVML status.
func nvmlSentinel(code int) error {
	switch code {
	case nvmlErrorDriverNotLoaded, nvmlErrorLibraryNotFound, nvmlErrorGPUNotFound, nvmlErrorGPUIsLost:
		return gpumem.ErrNoDevice
	case nvmlErrorNotSupported:
		return gpumem.ErrNotSupported
	case nvmlErrorInvalidArgument:
		return gpumem.ErrInvalidValue
	case nvmlErrorUninitialized:
		return gpumem.ErrClosed
	}
	return nil
}

// nvmlVersion is the driver's version, which NVML tells once initialised
// (it fails where no driver is loaded).
func nvmlVersion(l *bind.Lib) (string, error) {
	if err := l.Check(nvInit); err != nil {
		return "", err
	}
	defer l.Check(nvShutdown) //nolint:errcheck
	buf := newBytes(nvmlDriverVersionLen)
	err := l.Check(nvDriverVersion, addr(buf), uintptr(len(buf)))
	runtime.KeepAlive(buf)
	if err != nil {
		return "", err
	}
	return "driver " + cstr(buf), nil
}

// nvmlEngine is NVML initialised, with its devices' handles in its order.
type nvmlEngine struct {
	l       *bind.Lib
	handles []uintptr
}

func openNVML(opts []bind.Option) (*nvmlEngine, error) {
	l, err := bind.Open(NVML, bind.CUDA, opts...)
	if err != nil {
		return nil, fmt.Errorf("gpumem: telemetry: %w", err)
	}
	if err := l.Check(nvInit); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("gpumem: telemetry: NVML could not start (is the NVIDIA driver loaded?): %w", err)
	}
	e := &nvmlEngine{l: l}
	count := newU32()
	err = l.Check(nvDeviceCount, addr(count))
	runtime.KeepAlive(count)
	if err != nil {
		_ = e.close()
		return nil, fmt.Errorf("gpumem: telemetry: %w", err)
	}
	if count[0] == 0 {
		_ = e.close()
		return nil, fmt.Errorf("gpumem: telemetry: NVML (%s) sees no device: %w", l.Path(), gpumem.ErrNoDevice)
	}
	for i := uint32(0); i < count[0]; i++ {
		h := newU64()
		err := l.Check(nvHandleByIndex, uintptr(i), addr(h))
		runtime.KeepAlive(h)
		if err != nil {
			_ = e.close()
			return nil, fmt.Errorf("gpumem: telemetry: NVML device %d: %w", i, err)
		}
		e.handles = append(e.handles, uintptr(h[0]))
	}
	return e, nil
}

func (e *nvmlEngine) name() string    { return "nvml" }
func (e *nvmlEngine) library() string { return e.l.Path() }
func (e *nvmlEngine) count() int      { return len(e.handles) }

func (e *nvmlEngine) close() error {
	err := e.l.Check(nvShutdown)
	if cerr := e.l.Close(); err == nil {
		err = cerr
	}
	return err
}

// find returns the index of the device at a PCI address.
func (e *nvmlEngine) find(a pciAddr) (int, bool) {
	id := append([]byte(a.String()), 0)
	h := newU64()
	err := e.l.Check(nvHandleByPCIBusID, addr(id), addr(h))
	runtime.KeepAlive(id)
	runtime.KeepAlive(h)
	if err != nil {
		return 0, false
	}
	for i, x := range e.handles {
		if x == uintptr(h[0]) {
			return i, true
		}
	}
	return 0, false
}

func (e *nvmlEngine) pci(i int) (pciAddr, bool) {
	buf := newBytes(nvmlPCIInfoSize)
	err := e.l.Check(nvPCIInfo, e.handles[i], addr(buf))
	runtime.KeepAlive(buf)
	if err != nil {
		return pciAddr{}, false
	}
	return pciAddr{domain: le32(buf[16:]), bus: le32(buf[20:]), dev: le32(buf[24:])}, true
}

func (e *nvmlEngine) device(i int) (DeviceStats, error) {
	var s DeviceStats
	h := e.handles[i]
	mem := newU64s(3)
	err := e.l.Check(nvMemoryInfo, h, addr(mem))
	runtime.KeepAlive(mem)
	if err != nil {
		return s, fmt.Errorf("gpumem: telemetry: %w", err)
	}
	s.MemoryTotal, s.MemoryUsed = mem[0], mem[2]
	s.Supported = FieldMemory
	name := newBytes(nvmlDeviceNameLen)
	err = e.l.Check(nvDeviceName, h, addr(name), uintptr(len(name)))
	runtime.KeepAlive(name)
	if err == nil {
		s.Name = cstr(name)
	}
	if a, ok := e.pci(i); ok {
		s.PCIBusID = a.String()
	}
	u := newU32s(2)
	err = e.l.Check(nvUtilizationRates, h, addr(u))
	runtime.KeepAlive(u)
	if err == nil {
		s.UtilizationGPU, s.UtilizationMemory = int(u[0]), int(u[1])
		s.Supported |= FieldUtilizationGPU | FieldUtilizationMemory
	}
	v := newU32()
	err = e.l.Check(nvTemperature, h, nvmlTemperatureGPU, addr(v))
	runtime.KeepAlive(v)
	if err == nil {
		s.TemperatureC = int(v[0])
		s.Supported |= FieldTemperature
	}
	err = e.l.Check(nvPowerUsage, h, addr(v))
	runtime.KeepAlive(v)
	if err == nil {
		s.PowerW = float64(v[0]) / 1000
		s.Supported |= FieldPower
	}
	err = e.l.Check(nvClockInfo, h, nvmlClockSM, addr(v))
	runtime.KeepAlive(v)
	if err == nil {
		s.ClockSMMHz = int(v[0])
		s.Supported |= FieldClockSM
	}
	err = e.l.Check(nvClockInfo, h, nvmlClockMem, addr(v))
	runtime.KeepAlive(v)
	if err == nil {
		s.ClockMemMHz = int(v[0])
		s.Supported |= FieldClockMem
	}
	return s, nil
}

func (e *nvmlEngine) processes(i int) ([]Process, error) {
	op := nvComputeProcesses
	if !e.l.Has(op) {
		op = nvComputeProcessesV2
	}
	n := uint32(16)
	for attempt := 0; ; attempt++ {
		count := newU32()
		count[0] = n
		buf := newBytes(int(n) * nvmlProcessInfoSize)
		err := e.l.Check(op, e.handles[i], addr(count), addrOrNil(buf))
		runtime.KeepAlive(count)
		runtime.KeepAlive(buf)
		if err == nil {
			out := make([]Process, 0, min(count[0], n))
			for k := 0; k < int(count[0]) && k < int(n); k++ {
				rec := buf[k*nvmlProcessInfoSize:]
				p := Process{PID: int(le32(rec)), UsedBytes: le64(rec[8:])}
				if p.UsedBytes == nvmlValueNotAvailable {
					p.UsedBytes, p.Unknown = 0, true
				}
				out = append(out, p)
			}
			return out, nil
		}
		if be, ok := err.(*bind.Error); ok && be.Code == nvmlErrorInsufficientSize && attempt < 4 {
			// count holds the number needed; processes may start meanwhile.
			n = count[0] + 8
			continue
		}
		return nil, fmt.Errorf("gpumem: telemetry: %w", err)
	}
}

// addrOrNil is the address of b's first byte, or 0 for an empty b.
func addrOrNil(b []byte) uintptr {
	if len(b) == 0 {
		return 0
	}
	return addr(b)
}

// addr is the address of the memory of a buffer from the new* functions.
func addr[T any](s []T) uintptr { return uintptr(unsafe.Pointer(&s[0])) }
