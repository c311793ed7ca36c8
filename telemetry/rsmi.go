package telemetry

import (
	"fmt"
	"runtime"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/bind"
)

// ROCm SMI's table: the rows in the order of the rs* constants below. The
// prototypes, enum values and struct layouts are rocm_smi/rocm_smi.h's,
// checked in ROCm 5.2 (Debian bookworm's librocm-smi-dev 5.2.3) and in
// ROCm 6.x:
//
//	rsmi_status_t rsmi_init(uint64_t init_flags);
//	rsmi_status_t rsmi_shut_down(void);
//	rsmi_status_t rsmi_status_string(rsmi_status_t status, const char **status_string);
//	rsmi_status_t rsmi_version_get(rsmi_version_t *version);
//	rsmi_status_t rsmi_num_monitor_devices(uint32_t *num_devices);
//	rsmi_status_t rsmi_dev_pci_id_get(uint32_t dv_ind, uint64_t *bdfid);
//	rsmi_status_t rsmi_dev_name_get(uint32_t dv_ind, char *name, size_t len);
//	rsmi_status_t rsmi_dev_memory_total_get(uint32_t dv_ind, rsmi_memory_type_t mem_type, uint64_t *total);
//	rsmi_status_t rsmi_dev_memory_usage_get(uint32_t dv_ind, rsmi_memory_type_t mem_type, uint64_t *used);
//	rsmi_status_t rsmi_compute_process_info_get(rsmi_process_info_t *procs, uint32_t *num_items);
//	rsmi_status_t rsmi_compute_process_gpus_get(uint32_t pid, uint32_t *dv_indices, uint32_t *num_devices);
//	rsmi_status_t rsmi_compute_process_info_by_pid_get(uint32_t pid, rsmi_process_info_t *proc);
//	rsmi_status_t rsmi_compute_process_info_by_device_get(uint32_t pid, uint32_t dv_ind, rsmi_process_info_t *proc);  // not in 5.2
//	rsmi_status_t rsmi_dev_busy_percent_get(uint32_t dv_ind, uint32_t *busy_percent);
//	rsmi_status_t rsmi_dev_memory_busy_percent_get(uint32_t dv_ind, uint32_t *busy_percent);
//	rsmi_status_t rsmi_dev_temp_metric_get(uint32_t dv_ind, uint32_t sensor_type, rsmi_temperature_metric_t metric, int64_t *temperature);  // millidegrees C
//	rsmi_status_t rsmi_dev_power_get(uint32_t dv_ind, uint64_t *power, RSMI_POWER_TYPE *type);  // microwatts; not in 5.2
//	rsmi_status_t rsmi_dev_power_ave_get(uint32_t dv_ind, uint32_t sensor_ind, uint64_t *power);  // microwatts
//	rsmi_status_t rsmi_dev_gpu_clk_freq_get(uint32_t dv_ind, rsmi_clk_type_t clk_type, rsmi_frequencies_t *f);  // Hz
//
// Structs:
//
//	rsmi_version_t      {uint32_t major, minor, patch; const char *build}              24 bytes: 0, 4, 8, 16
//	rsmi_process_info_t {uint32_t process_id, pasid; uint64_t vram_usage, sdma_usage;
//	                     uint32_t cu_occupancy}                                        32 bytes: 0, 4, 8, 16, 24 (5.2 and 6.x)
//	rsmi_frequencies_t  5.x: {uint32_t num_supported, current; uint64_t frequency[32]}  264 bytes: 0, 4, 8
//	                    6.x: {bool has_deep_sleep; uint32_t num_supported, current;
//	                          uint64_t frequency[33]}                                  280 bytes: 0, 4, 8, 16
//
// The clock struct is read into a buffer larger than either layout and
// decoded in the 6.x layout when the library has a 6.x-only function
// (rsmi_dev_activity_metric_get) or rsmi_version_get's major is 6 or more
// (it is not reliable alone: Debian's 5.2 build reports 1.0.0, and some 6.x
// builds 7 or 1); a reading that is not sane in that layout (a deep-sleep
// flag other than 0 or 1, more frequencies than the array holds, a current
// index past them) is left out, not guessed. The bdfid is (domain << 32) | (bus << 8) | (device << 3)
// | function; bits 31:28 carry a partition id in 6.x and are ignored. Enums:
// RSMI_MEM_TYPE_VRAM 0; RSMI_TEMP_TYPE_EDGE 0, RSMI_TEMP_TYPE_JUNCTION 1;
// RSMI_TEMP_CURRENT 0; RSMI_CLK_TYPE_SYS 0, RSMI_CLK_TYPE_MEM 4.
var rsmiTable = bind.NewTable("rocm_smi",
	bind.Func{Op: "Init", Symbol: bind.Symbols("", "rsmi_init"), Args: bind.Args(1), Required: bind.HIPOnly},
	bind.Func{Op: "Shutdown", Symbol: bind.Symbols("", "rsmi_shut_down"), Args: bind.Args(0), Required: bind.HIPOnly},
	bind.Func{Op: "StatusString", Symbol: bind.Symbols("", "rsmi_status_string"), Args: bind.Args(2), Required: bind.HIPOnly},
	bind.Func{Op: "Version", Symbol: bind.Symbols("", "rsmi_version_get"), Args: bind.Args(1), Required: bind.HIPOnly},
	bind.Func{Op: "DeviceCount", Symbol: bind.Symbols("", "rsmi_num_monitor_devices"), Args: bind.Args(1), Required: bind.HIPOnly},
	bind.Func{Op: "PCIID", Symbol: bind.Symbols("", "rsmi_dev_pci_id_get"), Args: bind.Args(2), Required: bind.HIPOnly,
		Notes: "maps a backend's device to ROCm SMI's by its PCI address"},
	bind.Func{Op: "DeviceName", Symbol: bind.Symbols("", "rsmi_dev_name_get"), Args: bind.Args(3), Required: bind.HIPOnly},
	bind.Func{Op: "MemoryTotal", Symbol: bind.Symbols("", "rsmi_dev_memory_total_get"), Args: bind.Args(3), Required: bind.HIPOnly},
	bind.Func{Op: "MemoryUsage", Symbol: bind.Symbols("", "rsmi_dev_memory_usage_get"), Args: bind.Args(3), Required: bind.HIPOnly},
	bind.Func{Op: "Processes", Symbol: bind.Symbols("", "rsmi_compute_process_info_get"), Args: bind.Args(2), Required: bind.HIPOnly},
	bind.Func{Op: "ProcessGPUs", Symbol: bind.Symbols("", "rsmi_compute_process_gpus_get"), Args: bind.Args(3), Required: bind.HIPOnly},
	bind.Func{Op: "ProcessByPID", Symbol: bind.Symbols("", "rsmi_compute_process_info_by_pid_get"), Args: bind.Args(2), Required: bind.HIPOnly},
	bind.Func{Op: "ProcessByDevice", Symbol: bind.Symbols("", "rsmi_compute_process_info_by_device_get"), Args: bind.Args(3),
		Notes: "optional (not in ROCm 5.2): a process's memory on one device; without it a process on several devices has no per-device figure"},
	bind.Func{Op: "BusyPercent", Symbol: bind.Symbols("", "rsmi_dev_busy_percent_get"), Args: bind.Args(2)},
	bind.Func{Op: "MemoryBusyPercent", Symbol: bind.Symbols("", "rsmi_dev_memory_busy_percent_get"), Args: bind.Args(2)},
	bind.Func{Op: "Temperature", Symbol: bind.Symbols("", "rsmi_dev_temp_metric_get"), Args: bind.Args(4)},
	bind.Func{Op: "Power", Symbol: bind.Symbols("", "rsmi_dev_power_get"), Args: bind.Args(3), Notes: "optional (not in ROCm 5.2): else rsmi_dev_power_ave_get"},
	bind.Func{Op: "PowerAverage", Symbol: bind.Symbols("", "rsmi_dev_power_ave_get"), Args: bind.Args(3)},
	bind.Func{Op: "ClockFrequencies", Symbol: bind.Symbols("", "rsmi_dev_gpu_clk_freq_get"), Args: bind.Args(3)},
	bind.Func{Op: "ActivityMetric", Symbol: bind.Symbols("", "rsmi_dev_activity_metric_get"), Args: bind.Args(3),
		Notes: "never called: present from ROCm 6, it tells the 6.x layout of rsmi_frequencies_t where rsmi_version_get's major does not (Debian's 5.x reports 1.0.0)"},
)

// Rows of rsmiTable.
const (
	rsInit bind.Op = iota
	rsShutdown
	rsStatusString
	rsVersion
	rsDeviceCount
	rsPCIID
	rsDeviceName
	rsMemoryTotal
	rsMemoryUsage
	rsProcesses
	rsProcessGPUs
	rsProcessByPID
	rsProcessByDevice
	rsBusyPercent
	rsMemoryBusyPercent
	rsTemperature
	rsPower
	rsPowerAverage
	rsClockFrequencies
	rsActivityMetric
)

// rsmi_status_t values and enums (rocm_smi.h).
const (
	rsmiStatusInvalidArgs      = 1
	rsmiStatusNotSupported     = 2
	rsmiStatusFileError        = 3
	rsmiStatusInitError        = 8
	rsmiStatusInsufficientSize = 11

	rsmiMemTypeVRAM     = 0
	rsmiTempEdge        = 0
	rsmiTempJunction    = 1
	rsmiTempCurrent     = 0
	rsmiClkSys          = 0
	rsmiClkMem          = 4
	rsmiProcessInfoSize = 32
	rsmiFreqBufSize     = 512 // more than either layout of rsmi_frequencies_t
	rsmiNameLen         = 128
)

// ROCmSMILibraryEnv names the ROCm SMI file to load instead of the usual
// names.
const ROCmSMILibraryEnv = "GPUMEM_ROCM_SMI_LIBRARY"

// ROCmSMI is the declaration of AMD's ROCm System Management Interface
// library: librocm_smi64.so.1 up to ROCm 5.x (Debian's librocm-smi64-1),
// .so.5, .so.6 and .so.7 after.
var ROCmSMI = &bind.Library{
	Name:  "rocm_smi",
	Files: [bind.NumVendors][]string{bind.HIP: {"librocm_smi64.so.7", "librocm_smi64.so.6", "librocm_smi64.so.5", "librocm_smi64.so.1", "librocm_smi64.so"}},
	Env:   ROCmSMILibraryEnv,
	Table: rsmiTable,
	Status: bind.Status{
		Success:  0,
		Name:     bind.NameOut(rsStatusString),
		Sentinel: rsmiSentinel,
	},
	Version: func(l *bind.Lib) (string, error) {
		maj, min, patch, build, err := rsmiVersion(l)
		if err != nil {
			return "", err
		}
		v := fmt.Sprintf("%d.%d.%d", maj, min, patch)
		if build != "" {
			v += " (" + build + ")"
		}
		return v, nil
	},
}

func rsmiSentinel(code int) error {
	switch code {
	case rsmiStatusInitError, rsmiStatusFileError:
		return gpumem.ErrNoDevice
	case rsmiStatusNotSupported:
		return gpumem.ErrNotSupported
	case rsmiStatusInvalidArgs:
		return gpumem.ErrInvalidValue
	}
	return nil
}

// rsmiVersion is rsmi_version_get's answer, which needs no rsmi_init.
func rsmiVersion(l *bind.Lib) (major, minor, patch uint32, build string, err error) {
	v := newU64s(3)
	err = l.Check(rsVersion, addr(v))
	runtime.KeepAlive(v)
	if err != nil {
		return 0, 0, 0, "", err
	}
	return uint32(v[0]), uint32(v[0] >> 32), uint32(v[1]), bind.CString(uintptr(v[2])), nil
}

// rsmiEngine is ROCm SMI initialised.
type rsmiEngine struct {
	l  *bind.Lib
	n  int
	v6 bool // rsmi_frequencies_t has ROCm 6's layout
}

func openROCmSMI(opts []bind.Option) (*rsmiEngine, error) {
	l, err := bind.Open(ROCmSMI, bind.HIP, opts...)
	if err != nil {
		return nil, fmt.Errorf("gpumem: telemetry: %w", err)
	}
	e := &rsmiEngine{l: l}
	e.v6 = l.Has(rsActivityMetric)
	if maj, _, _, _, err := rsmiVersion(l); err == nil && maj >= 6 {
		e.v6 = true
	}
	if err := l.Check(rsInit, 0); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("gpumem: telemetry: ROCm SMI could not start (is the amdgpu driver loaded?): %w", err)
	}
	count := newU32()
	err = l.Check(rsDeviceCount, addr(count))
	runtime.KeepAlive(count)
	if err != nil {
		_ = e.close()
		return nil, fmt.Errorf("gpumem: telemetry: %w", err)
	}
	if count[0] == 0 {
		_ = e.close()
		return nil, fmt.Errorf("gpumem: telemetry: ROCm SMI (%s) sees no device: %w", l.Path(), gpumem.ErrNoDevice)
	}
	e.n = int(count[0])
	return e, nil
}

func (e *rsmiEngine) name() string    { return "rocm_smi" }
func (e *rsmiEngine) library() string { return e.l.Path() }
func (e *rsmiEngine) count() int      { return e.n }

func (e *rsmiEngine) close() error {
	err := e.l.Check(rsShutdown)
	if cerr := e.l.Close(); err == nil {
		err = cerr
	}
	return err
}

func (e *rsmiEngine) pci(i int) (pciAddr, bool) {
	v := newU64()
	err := e.l.Check(rsPCIID, uintptr(i), addr(v))
	runtime.KeepAlive(v)
	if err != nil {
		return pciAddr{}, false
	}
	return pciAddr{domain: uint32(v[0]>>32) & 0x0fffffff, bus: uint32(v[0]>>8) & 0xff, dev: uint32(v[0]>>3) & 0x1f}, true
}

func (e *rsmiEngine) find(a pciAddr) (int, bool) {
	for i := 0; i < e.n; i++ {
		if b, ok := e.pci(i); ok && b == a {
			return i, true
		}
	}
	return 0, false
}

func (e *rsmiEngine) u64(op bind.Op, args ...uintptr) (uint64, bool) {
	v := newU64()
	err := e.l.Check(op, append(args, addr(v))...)
	runtime.KeepAlive(v)
	return v[0], err == nil
}

func (e *rsmiEngine) u32(op bind.Op, args ...uintptr) (uint32, bool) {
	v := newU32()
	err := e.l.Check(op, append(args, addr(v))...)
	runtime.KeepAlive(v)
	return v[0], err == nil
}

func (e *rsmiEngine) device(i int) (DeviceStats, error) {
	var s DeviceStats
	dv := uintptr(i)
	mem := newU64s(2)
	err := e.l.Check(rsMemoryTotal, dv, rsmiMemTypeVRAM, addr(mem[0:]))
	if err == nil {
		err = e.l.Check(rsMemoryUsage, dv, rsmiMemTypeVRAM, addr(mem[1:]))
	}
	runtime.KeepAlive(mem)
	if err != nil {
		return s, fmt.Errorf("gpumem: telemetry: %w", err)
	}
	total, used := mem[0], mem[1]
	s.MemoryTotal, s.MemoryUsed, s.Supported = total, used, FieldMemory
	name := newBytes(rsmiNameLen)
	err = e.l.Check(rsDeviceName, dv, addr(name), uintptr(len(name)))
	runtime.KeepAlive(name)
	if err == nil {
		s.Name = cstr(name)
	}
	if a, ok := e.pci(i); ok {
		s.PCIBusID = a.String()
	}
	if v, ok := e.u32(rsBusyPercent, dv); ok {
		s.UtilizationGPU, s.Supported = int(v), s.Supported|FieldUtilizationGPU
	}
	if v, ok := e.u32(rsMemoryBusyPercent, dv); ok {
		s.UtilizationMemory, s.Supported = int(v), s.Supported|FieldUtilizationMemory
	}
	for _, sensor := range []uintptr{rsmiTempJunction, rsmiTempEdge} {
		if v, ok := e.u64(rsTemperature, dv, sensor, rsmiTempCurrent); ok {
			s.TemperatureC, s.Supported = int(int64(v)/1000), s.Supported|FieldTemperature
			break
		}
	}
	if uw, ok := e.power(dv); ok {
		s.PowerW, s.Supported = float64(uw)/1e6, s.Supported|FieldPower
	}
	if hz, ok := e.clock(dv, rsmiClkSys); ok {
		s.ClockSMMHz, s.Supported = int(hz/1e6), s.Supported|FieldClockSM
	}
	if hz, ok := e.clock(dv, rsmiClkMem); ok {
		s.ClockMemMHz, s.Supported = int(hz/1e6), s.Supported|FieldClockMem
	}
	return s, nil
}

// power is the device's power in microwatts: rsmi_dev_power_get where the
// library has it, else the average of sensor 0.
func (e *rsmiEngine) power(dv uintptr) (uint64, bool) {
	if e.l.Has(rsPower) {
		v, typ := newU64(), newU32()
		err := e.l.Check(rsPower, dv, addr(v), addr(typ))
		runtime.KeepAlive(v)
		runtime.KeepAlive(typ)
		if err == nil {
			return v[0], true
		}
	}
	return e.u64(rsPowerAverage, dv, 0)
}

// clock is the current frequency of a clock in Hz, from the
// rsmi_frequencies_t of the library's version.
func (e *rsmiEngine) clock(dv, typ uintptr) (uint64, bool) {
	buf := newBytes(rsmiFreqBufSize)
	err := e.l.Check(rsClockFrequencies, dv, typ, addr(buf))
	runtime.KeepAlive(buf)
	if err != nil {
		return 0, false
	}
	num, cur, freqs, max := le32(buf[0:]), le32(buf[4:]), 8, uint32(32)
	if e.v6 {
		if buf[0] > 1 {
			return 0, false
		}
		num, cur, freqs, max = le32(buf[4:]), le32(buf[8:]), 16, 33
	}
	if num == 0 || num > max || cur >= num {
		return 0, false
	}
	return le64(buf[freqs+8*int(cur):]), true
}

func (e *rsmiEngine) processes(i int) ([]Process, error) {
	pids, err := e.pids()
	if err != nil {
		return nil, err
	}
	var out []Process
	for _, pid := range pids {
		devs, ok := e.gpusOf(pid)
		if !ok || !contains(devs, uint32(i)) {
			continue
		}
		p := Process{PID: int(pid)}
		info := newBytes(rsmiProcessInfoSize)
		var err error
		switch {
		case e.l.Has(rsProcessByDevice):
			err = e.l.Check(rsProcessByDevice, uintptr(pid), uintptr(i), addr(info))
		case len(devs) == 1:
			err = e.l.Check(rsProcessByPID, uintptr(pid), addr(info))
		default:
			err = errNoFigure
		}
		runtime.KeepAlive(info)
		if err == nil {
			p.UsedBytes = le64(info[8:])
		} else {
			p.Unknown = true
		}
		out = append(out, p)
	}
	return out, nil
}

var errNoFigure = fmt.Errorf("no per-device figure")

// pids lists the processes with compute work on any device.
func (e *rsmiEngine) pids() ([]uint32, error) {
	n := uint32(16)
	for attempt := 0; ; attempt++ {
		count := newU32()
		count[0] = n
		buf := newBytes(int(n) * rsmiProcessInfoSize)
		err := e.l.Check(rsProcesses, addr(buf), addr(count))
		runtime.KeepAlive(buf)
		runtime.KeepAlive(count)
		if err == nil {
			var out []uint32
			for k := 0; k < int(count[0]) && k < int(n); k++ {
				out = append(out, le32(buf[k*rsmiProcessInfoSize:]))
			}
			return out, nil
		}
		if be, ok := err.(*bind.Error); ok && be.Code == rsmiStatusInsufficientSize && attempt < 4 {
			n = max(2*n, count[0]+8)
			continue
		}
		return nil, fmt.Errorf("gpumem: telemetry: %w", err)
	}
}

// gpusOf lists the ROCm SMI devices a process uses.
func (e *rsmiEngine) gpusOf(pid uint32) ([]uint32, bool) {
	n := uint32(e.n)
	idx := newU32s(int(n) + 1)
	count := newU32()
	count[0] = n + 1
	err := e.l.Check(rsProcessGPUs, uintptr(pid), addr(idx), addr(count))
	runtime.KeepAlive(idx)
	runtime.KeepAlive(count)
	if err != nil {
		return nil, false
	}
	c := min(count[0], n+1)
	return append([]uint32(nil), idx[:c]...), true
}

func contains(s []uint32, x uint32) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}
