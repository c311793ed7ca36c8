package telemetry

// A fake NVML and a fake ROCm SMI made of Go functions that C can call
// (purego.NewCallback), loaded through bind.WithLoader: the native engines
// run whole (PCI mapping, process lists, the optional rows, both layouts of
// rsmi_frequencies_t) on a machine with no GPU.

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/bind"
	"github.com/gpumem/gpumem/sim"
)

// mem is the memory at C address p.
func mem(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

func put32(p uintptr, v uint32) { *(*uint32)(mem(p)) = v }
func put64(p uintptr, v uint64) { *(*uint64)(mem(p)) = v }
func get32(p uintptr) uint32    { return *(*uint32)(mem(p)) }

func putStr(p, n uintptr, s string) {
	b := unsafe.Slice((*byte)(mem(p)), n)
	copy(b, s)
	b[min(uintptr(len(s)), n-1)] = 0
}

func cstrAt(p uintptr) string {
	var b []byte
	for i := uintptr(0); ; i++ {
		c := *(*byte)(unsafe.Add(mem(p), i))
		if c == 0 {
			return string(b)
		}
		b = append(b, c)
	}
}

// fakeDev is a device of the fake libraries.
type fakeDev struct {
	name           string
	pci            pciAddr
	total, used    uint64
	procs          [][2]uint64 // pid, bytes (^0: not available)
	util, memUtil  uint32
	tempC, powerMW uint32
	smMHz, memMHz  uint32
}

// fakeState is what the fake libraries answer; tests set it.
var fake struct {
	mu       sync.Mutex
	devs     []fakeDev
	initCode uintptr
	missing  map[string]bool // symbols the fake library lacks
	v6       bool            // ROCm: the 6.x layout of rsmi_frequencies_t
	// procCount, when not 0, is the count NVML's process list reports on
	// success, whatever the buffer held (a library that misreports).
	procCount uint32
	calls     atomic.Int64
}

func setFake(devs []fakeDev, missing ...string) {
	fake.mu.Lock()
	defer fake.mu.Unlock()
	fake.devs, fake.initCode, fake.v6, fake.procCount = devs, 0, false, 0
	fake.missing = map[string]bool{}
	for _, m := range missing {
		fake.missing[m] = true
	}
}

func dev(i uintptr) (*fakeDev, bool) {
	if i >= uintptr(len(fake.devs)) {
		return nil, false
	}
	return &fake.devs[i], true
}

const fakeHandle = 0x5000

var (
	fakeOnce sync.Once
	fakeSyms map[string]uintptr
)

// fakeSymbols makes the callbacks once (purego keeps them for the
// process's life).
func fakeSymbols() map[string]uintptr {
	fakeOnce.Do(func() {
		nvDev := func(h uintptr) (*fakeDev, bool) { return dev(h - fakeHandle) }
		f := map[string]any{
			// NVML
			"nvmlInit_v2":     func() uintptr { return fake.initCode },
			"nvmlShutdown":    func() uintptr { return 0 },
			"nvmlErrorString": func(code uintptr) uintptr { return nvmlNames[int32(code)] },
			"nvmlSystemGetDriverVersion": func(buf, n uintptr) uintptr {
				putStr(buf, n, "580.65.06")
				return 0
			},
			"nvmlDeviceGetCount_v2": func(p uintptr) uintptr { put32(p, uint32(len(fake.devs))); return 0 },
			"nvmlDeviceGetHandleByIndex_v2": func(i, p uintptr) uintptr {
				if _, ok := dev(uintptr(uint32(i))); !ok {
					return nvmlErrorInvalidArgument
				}
				put64(p, uint64(fakeHandle+uint32(i)))
				return 0
			},
			"nvmlDeviceGetHandleByPciBusId_v2": func(s, p uintptr) uintptr {
				id := cstrAt(s)
				for i := range fake.devs {
					if fake.devs[i].pci.String() == id {
						put64(p, uint64(fakeHandle+i))
						return 0
					}
				}
				return nvmlErrorNotFound
			},
			"nvmlDeviceGetPciInfo_v3": func(h, p uintptr) uintptr {
				d, ok := nvDev(h)
				if !ok {
					return nvmlErrorInvalidArgument
				}
				put32(p+16, d.pci.domain)
				put32(p+20, d.pci.bus)
				put32(p+24, d.pci.dev)
				return 0
			},
			"nvmlDeviceGetName": func(h, buf, n uintptr) uintptr {
				d, _ := nvDev(h)
				putStr(buf, n, d.name)
				return 0
			},
			"nvmlDeviceGetMemoryInfo": func(h, p uintptr) uintptr {
				d, ok := nvDev(h)
				if !ok {
					return nvmlErrorInvalidArgument
				}
				put64(p, d.total)
				put64(p+8, d.total-d.used)
				put64(p+16, d.used)
				return 0
			},
			"nvmlDeviceGetComputeRunningProcesses_v3": func(h, count, infos uintptr) uintptr {
				return fakeProcs(h, count, infos)
			},
			"nvmlDeviceGetComputeRunningProcesses_v2": func(h, count, infos uintptr) uintptr {
				return fakeProcs(h, count, infos)
			},
			"nvmlDeviceGetUtilizationRates": func(h, p uintptr) uintptr {
				d, _ := nvDev(h)
				put32(p, d.util)
				put32(p+4, d.memUtil)
				return 0
			},
			"nvmlDeviceGetTemperature": func(h, sensor, p uintptr) uintptr {
				d, _ := nvDev(h)
				if uint32(sensor) != nvmlTemperatureGPU {
					return nvmlErrorInvalidArgument
				}
				put32(p, d.tempC)
				return 0
			},
			"nvmlDeviceGetPowerUsage": func(h, p uintptr) uintptr {
				d, _ := nvDev(h)
				if d.powerMW == 0 {
					return nvmlErrorNotSupported
				}
				put32(p, d.powerMW)
				return 0
			},
			"nvmlDeviceGetClockInfo": func(h, typ, p uintptr) uintptr {
				d, _ := nvDev(h)
				switch uint32(typ) {
				case nvmlClockSM:
					put32(p, d.smMHz)
				case nvmlClockMem:
					put32(p, d.memMHz)
				default:
					return nvmlErrorInvalidArgument
				}
				return 0
			},
			// ROCm SMI
			"rsmi_init":      func(flags uintptr) uintptr { return fake.initCode },
			"rsmi_shut_down": func() uintptr { return 0 },
			"rsmi_status_string": func(code, out uintptr) uintptr {
				put64(out, uint64(rsmiNames[int32(code)]))
				return 0
			},
			"rsmi_version_get": func(p uintptr) uintptr {
				put32(p, 1)
				put32(p+4, 0)
				put32(p+8, 0)
				put64(p+16, 0)
				return 0
			},
			"rsmi_num_monitor_devices": func(p uintptr) uintptr { put32(p, uint32(len(fake.devs))); return 0 },
			"rsmi_dev_pci_id_get": func(i, p uintptr) uintptr {
				d, ok := dev(uintptr(uint32(i)))
				if !ok {
					return 7 // RSMI_STATUS_INPUT_OUT_OF_BOUNDS
				}
				// A partition id in bits 31:28 of the domain, as 6.x sets.
				put64(p, uint64(d.pci.domain|0x10000000)<<32|uint64(d.pci.bus)<<8|uint64(d.pci.dev)<<3)
				return 0
			},
			"rsmi_dev_name_get": func(i, buf, n uintptr) uintptr {
				d, _ := dev(uintptr(uint32(i)))
				putStr(buf, n, d.name)
				return 0
			},
			"rsmi_dev_memory_total_get": func(i, typ, p uintptr) uintptr {
				d, ok := dev(uintptr(uint32(i)))
				if !ok || uint32(typ) != rsmiMemTypeVRAM {
					return rsmiStatusInvalidArgs
				}
				put64(p, d.total)
				return 0
			},
			"rsmi_dev_memory_usage_get": func(i, typ, p uintptr) uintptr {
				d, _ := dev(uintptr(uint32(i)))
				put64(p, d.used)
				return 0
			},
			"rsmi_compute_process_info_get": func(procs, n uintptr) uintptr {
				var all []uint32
				seen := map[uint32]bool{}
				for _, d := range fake.devs {
					for _, p := range d.procs {
						if !seen[uint32(p[0])] {
							seen[uint32(p[0])] = true
							all = append(all, uint32(p[0]))
						}
					}
				}
				if procs == 0 {
					put32(n, uint32(len(all)))
					return 0
				}
				if int(get32(n)) < len(all) {
					put32(n, uint32(len(all)))
					return rsmiStatusInsufficientSize
				}
				for k, pid := range all {
					rec := procs + uintptr(k)*rsmiProcessInfoSize
					put32(rec, pid)
					put64(rec+8, 0) // the list has no figures: as real drivers show
				}
				put32(n, uint32(len(all)))
				return 0
			},
			"rsmi_compute_process_gpus_get": func(pid, idx, n uintptr) uintptr {
				var on []uint32
				for i, d := range fake.devs {
					for _, p := range d.procs {
						if uint32(p[0]) == uint32(pid) {
							on = append(on, uint32(i))
						}
					}
				}
				if len(on) == 0 {
					return 10 // RSMI_STATUS_NOT_FOUND
				}
				if int(get32(n)) < len(on) {
					return rsmiStatusInsufficientSize
				}
				for k, i := range on {
					put32(idx+uintptr(4*k), i)
				}
				put32(n, uint32(len(on)))
				return 0
			},
			"rsmi_compute_process_info_by_pid_get": func(pid, p uintptr) uintptr {
				var total uint64
				for _, d := range fake.devs {
					for _, q := range d.procs {
						if uint32(q[0]) == uint32(pid) {
							total += q[1]
						}
					}
				}
				put32(p, uint32(pid))
				put64(p+8, total)
				return 0
			},
			"rsmi_compute_process_info_by_device_get": func(pid, i, p uintptr) uintptr {
				d, _ := dev(uintptr(uint32(i)))
				for _, q := range d.procs {
					if uint32(q[0]) == uint32(pid) {
						put32(p, uint32(pid))
						put64(p+8, q[1])
						return 0
					}
				}
				return 10
			},
			"rsmi_dev_busy_percent_get": func(i, p uintptr) uintptr {
				d, _ := dev(uintptr(uint32(i)))
				put32(p, d.util)
				return 0
			},
			"rsmi_dev_memory_busy_percent_get": func(i, p uintptr) uintptr {
				d, _ := dev(uintptr(uint32(i)))
				put32(p, d.memUtil)
				return 0
			},
			"rsmi_dev_temp_metric_get": func(i, sensor, metric, p uintptr) uintptr {
				d, _ := dev(uintptr(uint32(i)))
				if uint32(sensor) != rsmiTempJunction || uint32(metric) != rsmiTempCurrent {
					return rsmiStatusNotSupported
				}
				put64(p, uint64(d.tempC)*1000)
				return 0
			},
			"rsmi_dev_power_get": func(i, p, typ uintptr) uintptr {
				d, _ := dev(uintptr(uint32(i)))
				put64(p, uint64(d.powerMW)*1000)
				put32(typ, 0)
				return 0
			},
			"rsmi_dev_power_ave_get": func(i, sensor, p uintptr) uintptr {
				d, _ := dev(uintptr(uint32(i)))
				put64(p, uint64(d.powerMW)*1000+1) // tells the two apart
				return 0
			},
			"rsmi_dev_gpu_clk_freq_get": func(i, typ, p uintptr) uintptr {
				d, _ := dev(uintptr(uint32(i)))
				mhz := d.smMHz
				if uint32(typ) == rsmiClkMem {
					mhz = d.memMHz
				}
				// Three levels, the current one the highest.
				if fake.v6 {
					*(*byte)(mem(p)) = 1
					put32(p+4, 3)
					put32(p+8, 2)
					for k := uintptr(0); k < 3; k++ {
						put64(p+16+8*k, uint64(mhz)*1e6*uint64(k+1)/3)
					}
				} else {
					put32(p, 3)
					put32(p+4, 2)
					for k := uintptr(0); k < 3; k++ {
						put64(p+8+8*k, uint64(mhz)*1e6*uint64(k+1)/3)
					}
				}
				return 0
			},
			"rsmi_dev_activity_metric_get": func(i, typ, p uintptr) uintptr { return rsmiStatusNotSupported },
		}
		fakeSyms = map[string]uintptr{}
		for name, fn := range f {
			fakeSyms[name] = purego.NewCallback(fn)
		}
	})
	return fakeSyms
}

var (
	nvmlNames = map[int32]uintptr{}
	rsmiNames = map[int32]uintptr{}
)

func init() {
	for code, s := range map[int32]string{nvmlErrorDriverNotLoaded: "Driver Not Loaded", nvmlErrorNotSupported: "Not Supported", nvmlErrorInsufficientSize: "Insufficient Size"} {
		b := append([]byte(s), 0)
		nvmlNames[code] = uintptr(unsafe.Pointer(&b[0])) // kept alive by keep
		keep = append(keep, b)
	}
	for code, s := range map[int32]string{rsmiStatusInitError: "RSMI_STATUS_INIT_ERROR"} {
		b := append([]byte(s), 0)
		rsmiNames[code] = uintptr(unsafe.Pointer(&b[0]))
		keep = append(keep, b)
	}
}

var keep [][]byte

func fakeProcs(h, count, infos uintptr) uintptr {
	fake.calls.Add(1)
	d, ok := dev(h - fakeHandle)
	if !ok {
		return nvmlErrorInvalidArgument
	}
	n := get32(count)
	put32(count, uint32(len(d.procs)))
	if int(n) < len(d.procs) {
		return nvmlErrorInsufficientSize
	}
	for k, p := range d.procs {
		rec := infos + uintptr(k)*nvmlProcessInfoSize
		put32(rec, uint32(p[0]))
		put64(rec+8, p[1])
		put32(rec+16, 0xFFFFFFFF)
		put32(rec+20, 0xFFFFFFFF)
	}
	if fake.procCount != 0 {
		put32(count, fake.procCount)
	}
	return 0
}

// fakeObject is a loaded fake library.
type fakeObject struct{ path string }

func (o fakeObject) Path() string { return o.path }
func (o fakeObject) Close() error { return nil }
func (o fakeObject) Sym(name string) (uintptr, error) {
	fake.mu.Lock()
	missing := fake.missing[name]
	fake.mu.Unlock()
	if a, ok := fakeSymbols()[name]; ok && !missing {
		return a, nil
	}
	return 0, fmt.Errorf("fake: no %s: %w", name, gpumem.ErrNotSupported)
}

func fakeLoader(candidates ...string) (bind.Object, error) {
	return fakeObject{path: "fake:" + candidates[0]}, nil
}

// fakeBackend is a simulator that says it is a CUDA or HIP backend, with
// the PCI addresses a test gives its devices, and a context for
// bind.ContextOf.
type fakeBackend struct {
	*sim.GPU
	name string
	pci  []pciAddr // nil: tells no address
}

func (b *fakeBackend) Name() string { return b.name }

func (b *fakeBackend) DeviceAttribute(dev int, a gpumem.Attribute) (int, error) {
	if b.pci != nil && dev < len(b.pci) {
		switch a {
		case gpumem.AttrPCIDomainID:
			return int(b.pci[dev].domain), nil
		case gpumem.AttrPCIBusID:
			return int(b.pci[dev].bus), nil
		case gpumem.AttrPCIDeviceID:
			return int(b.pci[dev].dev), nil
		}
	}
	if b.pci == nil && (a == gpumem.AttrPCIBusID || a == gpumem.AttrPCIDeviceID) {
		return 0, gpumem.ErrNotSupported
	}
	return b.GPU.DeviceAttribute(dev, a)
}

var fakeClosed atomic.Bool

func (b *fakeBackend) CurrentFunc(dev int) (fn, arg uintptr, closed *atomic.Bool, err error) {
	return fakeSymbols()["nvmlShutdown"], 0, &fakeClosed, nil
}
