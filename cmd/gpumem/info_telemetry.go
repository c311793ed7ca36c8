package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/telemetry"
)

// deviceTelemetry is one device's telemetry in info's report: readings
// the library lacks are absent.
type deviceTelemetry struct {
	PCIBusID          string         `json:"pci_bus_id,omitempty"`
	MemoryUsedBytes   uint64         `json:"memory_used_bytes"`
	MemoryTotalBytes  uint64         `json:"memory_total_bytes"`
	SelfBytes         *uint64        `json:"self_bytes,omitempty"` // absent when the library does not list this process
	OtherBytes        uint64         `json:"other_processes_bytes"`
	OtherProcesses    []processBytes `json:"other_processes"`
	UtilizationGPU    *int           `json:"utilization_gpu_percent,omitempty"`
	UtilizationMemory *int           `json:"utilization_memory_percent,omitempty"`
	TemperatureC      *int           `json:"temperature_c,omitempty"`
	PowerW            *float64       `json:"power_w,omitempty"`
	ClockSMMHz        *int           `json:"clock_sm_mhz,omitempty"`
	ClockMemMHz       *int           `json:"clock_mem_mhz,omitempty"`
	Error             string         `json:"error,omitempty"`
}

// processBytes is a process's memory; bytes is absent when unknown.
type processBytes struct {
	PID   int     `json:"pid"`
	Bytes *uint64 `json:"bytes,omitempty"`
}

// telemetryInfo is the telemetry section of info's report.
type telemetryInfo struct {
	Source  string   `json:"source"`            // "nvml", "rocm_smi", "sim"; "" when unavailable
	Library string   `json:"library,omitempty"` // the file loaded
	Notes   []string `json:"notes,omitempty"`
	Error   string   `json:"error,omitempty"` // why there is no telemetry
}

// gatherTelemetry fills each device's telemetry from the backend's
// library; without one, the report says why.
func gatherTelemetry(b gpumem.Backend, rep *infoReport) {
	t, err := telemetry.Open(b)
	if err != nil {
		rep.Telemetry = &telemetryInfo{Error: trimPrefix(err)}
		return
	}
	defer t.Close()
	rep.Telemetry = &telemetryInfo{Source: t.Backend(), Library: t.Library(), Notes: t.Notes()}
	for i := range rep.Devices {
		d := &rep.Devices[i]
		dt := &deviceTelemetry{OtherProcesses: []processBytes{}}
		d.Telemetry = dt
		s, err := t.Device(d.Index)
		if err != nil {
			dt.Error = trimPrefix(err)
			continue
		}
		dt.PCIBusID, dt.MemoryUsedBytes, dt.MemoryTotalBytes = s.PCIBusID, s.MemoryUsed, s.MemoryTotal
		opt := func(f telemetry.Field, v int) *int {
			if s.Has(f) {
				return &v
			}
			return nil
		}
		dt.UtilizationGPU = opt(telemetry.FieldUtilizationGPU, s.UtilizationGPU)
		dt.UtilizationMemory = opt(telemetry.FieldUtilizationMemory, s.UtilizationMemory)
		dt.TemperatureC = opt(telemetry.FieldTemperature, s.TemperatureC)
		dt.ClockSMMHz = opt(telemetry.FieldClockSM, s.ClockSMMHz)
		dt.ClockMemMHz = opt(telemetry.FieldClockMem, s.ClockMemMHz)
		if s.Has(telemetry.FieldPower) {
			w := s.PowerW
			dt.PowerW = &w
		}
		if self, listed, err := t.Self(d.Index); err == nil && listed {
			dt.SelfBytes = &self
		}
		others, procs, err := t.Others(d.Index)
		if err != nil {
			dt.Error = trimPrefix(err)
			continue
		}
		dt.OtherBytes = others
		for _, p := range procs {
			pb := processBytes{PID: p.PID}
			if !p.Unknown {
				n := p.UsedBytes
				pb.Bytes = &n
			}
			dt.OtherProcesses = append(dt.OtherProcesses, pb)
		}
	}
}

// printTelemetry writes the telemetry section of info's table.
func printTelemetry(w io.Writer, rep infoReport) {
	t := rep.Telemetry
	if t == nil {
		return
	}
	if t.Source == "" {
		fmt.Fprintf(w, "\ntelemetry: not available (%s)\n", t.Error)
		return
	}
	src := t.Source
	if t.Library != "" {
		src += " " + t.Library
	}
	fmt.Fprintf(w, "\ntelemetry (%s):\n", src)
	for _, n := range t.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	for _, d := range rep.Devices {
		dt := d.Telemetry
		if dt == nil {
			continue
		}
		if dt.Error != "" {
			fmt.Fprintf(w, "  %d: %s\n", d.Index, dt.Error)
			continue
		}
		parts := []string{fmt.Sprintf("used %s of %s", gpumem.FormatBytes(dt.MemoryUsedBytes), gpumem.FormatBytes(dt.MemoryTotalBytes))}
		if dt.SelfBytes != nil {
			parts = append(parts, "this process "+gpumem.FormatBytes(*dt.SelfBytes))
		}
		others := "other processes " + gpumem.FormatBytes(dt.OtherBytes)
		if len(dt.OtherProcesses) > 0 {
			var ps []string
			for _, p := range dt.OtherProcesses {
				b := "unknown"
				if p.Bytes != nil {
					b = gpumem.FormatBytes(*p.Bytes)
				}
				ps = append(ps, fmt.Sprintf("%d: %s", p.PID, b))
			}
			others += " (" + strings.Join(ps, ", ") + ")"
		}
		parts = append(parts, others)
		if dt.UtilizationGPU != nil {
			u := fmt.Sprintf("utilization %d%%", *dt.UtilizationGPU)
			if dt.UtilizationMemory != nil {
				u += fmt.Sprintf(" (memory %d%%)", *dt.UtilizationMemory)
			}
			parts = append(parts, u)
		}
		if dt.TemperatureC != nil {
			parts = append(parts, fmt.Sprintf("%d C", *dt.TemperatureC))
		}
		if dt.PowerW != nil {
			parts = append(parts, fmt.Sprintf("%.1f W", *dt.PowerW))
		}
		if dt.ClockSMMHz != nil {
			parts = append(parts, fmt.Sprintf("clock %d MHz", *dt.ClockSMMHz))
		}
		if dt.ClockMemMHz != nil {
			parts = append(parts, fmt.Sprintf("memory clock %d MHz", *dt.ClockMemMHz))
		}
		fmt.Fprintf(w, "  %d: %s\n", d.Index, strings.Join(parts, ", "))
	}
}
