package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// info shows each device's telemetry: the simulator's accounting here.
func TestInfoTelemetry(t *testing.T) {
	code, o, _ := runCmd(t, "info", "--backend", "sim", "--sim-devices", "2", "--json")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	var rep infoReport
	if err := json.Unmarshal([]byte(o), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Telemetry == nil || rep.Telemetry.Source != "sim" || len(rep.Devices) != 2 {
		t.Fatalf("telemetry %+v, %d devices", rep.Telemetry, len(rep.Devices))
	}
	for _, d := range rep.Devices {
		dt := d.Telemetry
		if dt == nil || dt.MemoryTotalBytes != d.TotalBytes || dt.MemoryUsedBytes != d.TotalBytes-d.FreeBytes || dt.OtherBytes != 0 || dt.Error != "" {
			t.Errorf("device %d: %+v", d.Index, dt)
		}
	}
	code, o, _ = runCmd(t, "info", "--backend", "sim")
	if code != exitOK || !strings.Contains(o, "telemetry (sim):") || !strings.Contains(o, "other processes 0 B") {
		t.Fatalf("exit %d:\n%s", code, o)
	}
}

// A backend with no telemetry library: info says so and still succeeds.
func TestInfoNoTelemetry(t *testing.T) {
	withFake(t, newFakeGPU(1, 1<<30))
	code, o, _ := runCmd(t, "info", "--backend", "sim")
	if code != exitOK || !strings.Contains(o, "telemetry: not available") {
		t.Fatalf("exit %d:\n%s", code, o)
	}
}
