// Package telemetrymetrics publishes a GPU's telemetry (package telemetry)
// through a metrics.Registry: memory used and total, this process's and
// the other processes' memory, utilization, temperature, power and clocks,
// as gauges labelled by device. It is a package of its own so that package
// metrics, and the exporter modules built on it, keep to the standard
// library.
//
//	t, _ := telemetry.Open(backend)
//	c, _ := telemetrymetrics.Collector(t, []int{0})
//	_ = reg.AddCollector("telemetry", c)
package telemetrymetrics

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/metrics"
	"github.com/gpumem/gpumem/telemetry"
)

// telemetryFamilies are Collector's families, in the order of
// telemetryValues.
var telemetryFamilies = []metrics.Family{
	{Name: "gpumem_device_memory_used_bytes", Type: "gauge", Help: "Device memory in use by every process and the driver, as the device's telemetry reports it."},
	{Name: "gpumem_device_memory_total_bytes", Type: "gauge", Help: "Device memory in all."},
	{Name: "gpumem_device_memory_self_bytes", Type: "gauge", Help: "Device memory this process holds, the driver's context included (absent when the telemetry does not list this process)."},
	{Name: "gpumem_device_memory_other_processes_bytes", Type: "gauge", Help: "Device memory other processes hold."},
	{Name: "gpumem_device_utilization_gpu_percent", Type: "gauge", Help: "Percent of the last sample period the GPU was busy."},
	{Name: "gpumem_device_utilization_memory_percent", Type: "gauge", Help: "Percent of the last sample period device memory was read or written."},
	{Name: "gpumem_device_temperature_celsius", Type: "gauge", Help: "GPU temperature."},
	{Name: "gpumem_device_power_watts", Type: "gauge", Help: "Power drawn."},
	{Name: "gpumem_device_clock_sm_hertz", Type: "gauge", Help: "SM (CUDA) or system (ROCm) clock."},
	{Name: "gpumem_device_clock_memory_hertz", Type: "gauge", Help: "Memory clock."},
}

// Indexes of telemetryFamilies.
const (
	tfUsed = iota
	tfTotal
	tfSelf
	tfOthers
	tfUtilGPU
	tfUtilMem
	tfTemp
	tfPower
	tfClockSM
	tfClockMem
)

// Names returns the names of Collector's families.
func Names() []string {
	out := make([]string, len(telemetryFamilies))
	for i, f := range telemetryFamilies {
		out[i] = f.Name
	}
	return out
}

type telemetryCollector struct {
	t       *telemetry.Telemetry
	devices []int
}

// Collector returns the collector of the telemetry t reads on the given
// devices: the families of Names, labelled device (and, as
// every collector's samples, with the name the registry knows it by). A
// reading the device or library lacks has no sample; a device whose
// telemetry cannot be read has none. No devices, a negative device, one
// listed twice or one past t's devices is an error matching
// gpumem.ErrInvalidValue.
func Collector(t *telemetry.Telemetry, devices []int) (metrics.Collector, error) {
	if t == nil {
		return nil, fmt.Errorf("metrics: nil telemetry: %w", gpumem.ErrInvalidValue)
	}
	if len(devices) == 0 {
		return nil, fmt.Errorf("metrics: no devices: %w", gpumem.ErrInvalidValue)
	}
	devs := append([]int(nil), devices...)
	sort.Ints(devs)
	for i, d := range devs {
		if d < 0 || d >= t.DeviceCount() {
			return nil, fmt.Errorf("metrics: device %d (telemetry has %d): %w", d, t.DeviceCount(), gpumem.ErrInvalidValue)
		}
		if i > 0 && devs[i-1] == d {
			return nil, fmt.Errorf("metrics: device %d listed twice: %w", d, gpumem.ErrInvalidValue)
		}
	}
	return &telemetryCollector{t: t, devices: devs}, nil
}

// Families returns the families of Names.
func (c *telemetryCollector) Families() []metrics.Family { return telemetryFamilies }

// telemetryReading is one device's reading, as Collect emits it and
// ExpvarValue shows it.
type telemetryReading struct {
	telemetry.DeviceStats
	SelfBytes   *uint64 `json:"self_bytes,omitempty"`
	OthersBytes uint64  `json:"other_processes_bytes"`
	Error       string  `json:"error,omitempty"`
}

func (c *telemetryCollector) read(dev int) telemetryReading {
	var r telemetryReading
	s, err := c.t.Device(dev)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.DeviceStats = s
	if self, listed, err := c.t.Self(dev); err == nil && listed {
		r.SelfBytes = &self
	}
	if o, _, err := c.t.Others(dev); err == nil {
		r.OthersBytes = o
	} else {
		r.Error = err.Error()
	}
	return r
}

// Collect reads each device's telemetry once.
func (c *telemetryCollector) Collect(emit func(int, []metrics.Label, float64)) {
	for _, d := range c.devices {
		r := c.read(d)
		if r.Error != "" && r.Supported == 0 {
			continue
		}
		ls := []metrics.Label{{Name: "device", Value: strconv.Itoa(d)}}
		s := r.DeviceStats
		put := func(fam int, f telemetry.Field, v float64) {
			if f == 0 || s.Has(f) {
				emit(fam, ls, v)
			}
		}
		put(tfUsed, telemetry.FieldMemory, float64(s.MemoryUsed))
		put(tfTotal, telemetry.FieldMemory, float64(s.MemoryTotal))
		if r.SelfBytes != nil {
			put(tfSelf, 0, float64(*r.SelfBytes))
		}
		if r.Error == "" {
			put(tfOthers, 0, float64(r.OthersBytes))
		}
		put(tfUtilGPU, telemetry.FieldUtilizationGPU, float64(s.UtilizationGPU))
		put(tfUtilMem, telemetry.FieldUtilizationMemory, float64(s.UtilizationMemory))
		put(tfTemp, telemetry.FieldTemperature, float64(s.TemperatureC))
		put(tfPower, telemetry.FieldPower, s.PowerW)
		put(tfClockSM, telemetry.FieldClockSM, float64(s.ClockSMMHz)*1e6)
		put(tfClockMem, telemetry.FieldClockMem, float64(s.ClockMemMHz)*1e6)
	}
}

// ExpvarValue is {device: reading}: the device's DeviceStats with this
// process's and the other processes' bytes.
func (c *telemetryCollector) ExpvarValue() any {
	m := make(map[string]any, len(c.devices))
	for _, d := range c.devices {
		m[strconv.Itoa(d)] = c.read(d)
	}
	return m
}
