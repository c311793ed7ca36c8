package telemetrymetrics_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/metrics"
	"github.com/gpumem/gpumem/metrics/telemetrymetrics"
	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/telemetry"
)

func TestTelemetryCollector(t *testing.T) {
	g, err := sim.New(sim.Config{Devices: []sim.DeviceConfig{{Capacity: 1 << 30}, {Capacity: 1 << 30}}, NoStacks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.SetOtherProcesses(1, []sim.OtherProcess{{PID: 99, Bytes: 256 << 20}}); err != nil {
		t.Fatal(err)
	}
	p, err := g.Malloc(1, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Free(1, p)
	tel, err := telemetry.Open(g)
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Close()
	for _, bad := range [][]int{nil, {-1}, {2}, {0, 0}} {
		if _, err := telemetrymetrics.Collector(tel, bad); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("devices %v: %v", bad, err)
		}
	}
	c, err := telemetrymetrics.Collector(tel, []int{1, 0})
	if err != nil {
		t.Fatal(err)
	}
	var reg metrics.Registry
	if err := reg.AddCollector("telemetry", c); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := reg.WritePrometheus(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		`gpumem_device_memory_used_bytes{allocator="telemetry",device="1"} 3.3554432e+08`,
		`gpumem_device_memory_total_bytes{allocator="telemetry",device="0"} 1.073741824e+09`,
		`gpumem_device_memory_self_bytes{allocator="telemetry",device="1"} 6.7108864e+07`,
		`gpumem_device_memory_other_processes_bytes{allocator="telemetry",device="1"} 2.68435456e+08`,
		`gpumem_device_memory_other_processes_bytes{allocator="telemetry",device="0"} 0`,
		`gpumem_device_clock_sm_hertz{allocator="telemetry",device="0"} 1.98e+09`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in\n%s", want, out)
		}
	}
	// The simulator has no sensors: those families have no samples, and
	// device 0, where this process holds nothing, no self sample.
	for _, absent := range []string{`gpumem_device_power_watts{`, `gpumem_device_temperature_celsius{`, `gpumem_device_memory_self_bytes{allocator="telemetry",device="0"}`} {
		if strings.Contains(out, absent) {
			t.Errorf("unexpected %s in\n%s", absent, out)
		}
	}
	if v, ok := c.ExpvarValue().(map[string]any); !ok || len(v) != 2 {
		t.Errorf("expvar %v", c.ExpvarValue())
	}
}
