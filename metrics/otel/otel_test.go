package otel_test

import (
	"context"
	"math"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/metrics"
	gpuotel "github.com/gpumem/gpumem/metrics/otel"
	"github.com/gpumem/gpumem/sim"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// setup returns a caching allocator on a simulated GPU, watched on device 0
// by a registry registered with a meter of a provider read by a
// ManualReader.
func setup(t *testing.T) (*caching.Allocator, *metrics.Registry, *sdkmetric.ManualReader) {
	t.Helper()
	g, err := sim.New(sim.Config{Devices: []sim.DeviceConfig{{Capacity: 1 << 30}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	a, err := caching.New(g, caching.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	reg := metrics.NewRegistry()
	if err := reg.Add("caching", a, []int{0}); err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	r, err := gpuotel.Register(mp.Meter("gpumem"), reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Unregister() })
	return a, reg, reader
}

// collect reads every metric the reader has, by name.
func collect(t *testing.T, reader *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// attrString returns the attributes as key=value, comma-separated, in the
// set's order (sorted by key).
func attrString(s attribute.Set) string {
	var out string
	for _, kv := range s.ToSlice() {
		if out != "" {
			out += ","
		}
		out += string(kv.Key) + "=" + kv.Value.String()
	}
	return out
}

func labelString(ls []metrics.Label) string {
	kvs := make([]attribute.KeyValue, len(ls))
	for i, l := range ls {
		kvs[i] = attribute.String(l.Name, l.Value)
	}
	return attrString(attribute.NewSet(kvs...))
}

// points returns the data points of m with its kind: "int64 gauge",
// "float64 sum", ...; a sum must be cumulative and monotonic.
func points(t *testing.T, m metricdata.Metrics) (string, map[string]float64) {
	t.Helper()
	out := map[string]float64{}
	switch d := m.Data.(type) {
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			out[attrString(p.Attributes)] = float64(p.Value)
		}
		return "int64 gauge", out
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			out[attrString(p.Attributes)] = p.Value
		}
		return "float64 gauge", out
	case metricdata.Sum[int64]:
		if !d.IsMonotonic || d.Temporality != metricdata.CumulativeTemporality {
			t.Errorf("%s: monotonic %v, temporality %v: want a cumulative monotonic sum", m.Name, d.IsMonotonic, d.Temporality)
		}
		for _, p := range d.DataPoints {
			out[attrString(p.Attributes)] = float64(p.Value)
		}
		return "int64 sum", out
	case metricdata.Sum[float64]:
		if !d.IsMonotonic || d.Temporality != metricdata.CumulativeTemporality {
			t.Errorf("%s: monotonic %v, temporality %v: want a cumulative monotonic sum", m.Name, d.IsMonotonic, d.Temporality)
		}
		for _, p := range d.DataPoints {
			out[attrString(p.Attributes)] = p.Value
		}
		return "float64 sum", out
	}
	t.Fatalf("%s: data %T", m.Name, m.Data)
	return "", nil
}

// Each family is an instrument of its name, kind, description and unit, with
// one data point per sample of Gather: same attributes, same value.
func TestInstrumentsMatchGather(t *testing.T) {
	a, reg, reader := setup(t)
	s := gpumem.Stream{Device: 0}
	p, err := a.Allocate(1000, s)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Deallocate(p, s)
	q, err := a.Allocate(3<<20, s)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Deallocate(q, s)

	got := collect(t, reader)
	fams := reg.Gather()
	if len(got) != len(fams) {
		t.Errorf("%d metrics, want %d (one per family)", len(got), len(fams))
	}
	for _, mf := range fams {
		m, ok := got[mf.Name]
		if !ok {
			t.Errorf("%s: no metric", mf.Name)
			continue
		}
		if m.Description != mf.Help {
			t.Errorf("%s: description %q, want %q", mf.Name, m.Description, mf.Help)
		}
		kind, pts := points(t, m)
		wantKind := "int64 "
		if mf.Name == "gpumem_fragmentation_ratio" {
			wantKind = "float64 "
		}
		if mf.Type == "counter" {
			wantKind += "sum"
		} else {
			wantKind += "gauge"
		}
		if kind != wantKind {
			t.Errorf("%s (%s): %s, want %s", mf.Name, mf.Type, kind, wantKind)
		}
		if len(pts) != len(mf.Samples) {
			t.Errorf("%s: %d points, want %d", mf.Name, len(pts), len(mf.Samples))
		}
		for _, smp := range mf.Samples {
			k := labelString(smp.Labels)
			v, ok := pts[k]
			if !ok {
				t.Errorf("%s{%s}: no point", mf.Name, k)
			} else if v != smp.Value {
				t.Errorf("%s{%s} = %v, want %v", mf.Name, k, v, smp.Value)
			}
		}
	}

	for name, unit := range map[string]string{
		"gpumem_allocated_bytes":        "By",
		"gpumem_reserved_peak_bytes":    "By",
		"gpumem_allocations":            "",
		"gpumem_num_device_alloc_total": "",
		"gpumem_fragmentation_ratio":    "1",
	} {
		if got[name].Unit != unit {
			t.Errorf("%s: unit %q, want %q", name, got[name].Unit, unit)
		}
	}
}

// The values are the allocator's: requested bytes by pool, a cumulative
// counter of device allocations, and they follow the allocator from one
// collection to the next.
func TestValues(t *testing.T) {
	a, _, reader := setup(t)
	s := gpumem.Stream{Device: 0}
	p, err := a.Allocate(1000, s)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name, attrs string, want float64) {
		t.Helper()
		_, pts := points(t, collect(t, reader)[name])
		if v, ok := pts[attrs]; !ok || v != want {
			t.Errorf("%s{%s} = %v (found %v), want %v; points %v", name, attrs, v, ok, want, pts)
		}
	}
	const small = "allocator=caching,device=0,pool=small"
	const large = "allocator=caching,device=0,pool=large"
	check("gpumem_requested_bytes", small, 1000)
	check("gpumem_requested_bytes", large, 0)
	check("gpumem_allocations", small, 1)
	check("gpumem_num_device_alloc_total", "allocator=caching,device=0", 1)
	check("gpumem_num_ooms_total", "allocator=caching,device=0", 0)

	a.Deallocate(p, s)
	q, err := a.Allocate(64<<20, s)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Deallocate(q, s)
	check("gpumem_requested_bytes", small, 0)
	check("gpumem_requested_bytes", large, 64<<20)
	check("gpumem_requested_peak_bytes", "allocator=caching,device=0", 64<<20)
	check("gpumem_allocations_removed_total", small, 1)
	check("gpumem_num_device_alloc_total", "allocator=caching,device=0", 2)

	// An allocation the device cannot hold counts an OOM.
	if _, err := a.Allocate(2<<30, s); err == nil {
		t.Fatal("2 GiB on a 1 GiB device: no error")
	}
	check("gpumem_num_ooms_total", "allocator=caching,device=0", 1)
}

// other is a collector of a family outside gpumem's: a Float64 gauge.
type other struct{ v float64 }

func (o other) Families() []metrics.Family {
	return []metrics.Family{{Name: "app_load", Type: "gauge", Help: "Load."}, {Name: "app_events_total", Type: "counter", Help: "Events."}}
}

func (o other) Collect(emit func(int, []metrics.Label, float64)) {
	emit(0, []metrics.Label{{Name: "queue", Value: "a"}}, o.v)
	emit(1, nil, 2.5)
}

func (o other) ExpvarValue() any { return o.v }

// Families known at Register are observed; a family first seen later is not.
// A family that is not gpumem's is Float64.
func TestFamiliesAtRegister(t *testing.T) {
	reg := metrics.NewRegistry()
	if err := reg.AddCollector("app", other{0.25}); err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	r, err := gpuotel.Register(mp.Meter("gpumem"), reg)
	if err != nil {
		t.Fatal(err)
	}
	got := collect(t, reader)
	kind, pts := points(t, got["app_load"])
	if kind != "float64 gauge" || pts["allocator=app,queue=a"] != 0.25 {
		t.Errorf("app_load: %s %v, want a float64 gauge with allocator=app,queue=a 0.25", kind, pts)
	}
	kind, pts = points(t, got["app_events_total"])
	if kind != "float64 sum" || pts["allocator=app"] != 2.5 {
		t.Errorf("app_events_total: %s %v, want a float64 sum with allocator=app 2.5", kind, pts)
	}
	if _, ok := got["gpumem_allocated_bytes"]; ok {
		t.Error("gpumem_allocated_bytes reported with no allocator watched")
	}

	// The allocator families are registered even with no allocator watched:
	// an allocator added later is observed. A collector of another family,
	// added later, is not.
	var st gpumem.MemoryStats
	st.AllocatedBytes.Add(gpumem.StatLarge, 3<<20)
	if err := reg.Add("later", metrics.SourceFunc(func(int) gpumem.MemoryStats { return st }), []int{1}); err != nil {
		t.Fatal(err)
	}
	if err := reg.AddCollector("late", lateCollector{}); err != nil {
		t.Fatal(err)
	}
	got = collect(t, reader)
	if _, pts := points(t, got["gpumem_allocated_bytes"]); pts["allocator=later,device=1,pool=large"] != 3<<20 {
		t.Errorf("gpumem_allocated_bytes of an allocator added after Register: %v", pts)
	}
	if _, ok := got["late_family"]; ok {
		t.Error("late_family observed: it was not known at Register")
	}

	// After Unregister nothing is observed.
	if err := r.Unregister(); err != nil {
		t.Fatal(err)
	}
	for name, m := range collect(t, reader) {
		if _, pts := points(t, m); len(pts) != 0 {
			t.Errorf("%s: %d points after Unregister", name, len(pts))
		}
	}
}

type lateCollector struct{}

func (lateCollector) Families() []metrics.Family {
	return []metrics.Family{{Name: "late_family", Type: "gauge", Help: "Late."}}
}
func (lateCollector) Collect(emit func(int, []metrics.Label, float64)) { emit(0, nil, 1) }
func (lateCollector) ExpvarValue() any                                 { return nil }

func TestRegisterNil(t *testing.T) {
	mp := sdkmetric.NewMeterProvider()
	if _, err := gpuotel.Register(nil, metrics.NewRegistry()); err == nil {
		t.Error("nil meter: no error")
	}
	if _, err := gpuotel.Register(mp.Meter("gpumem"), nil); err == nil {
		t.Error("nil registry: no error")
	}
}

// Values observed as Int64 are rounded and saturate.
func TestInt64Values(t *testing.T) {
	reg := metrics.NewRegistry()
	vals := []float64{2.6, math.Inf(1), math.Inf(-1), math.NaN()}
	c := gpumemCollector{vals}
	if err := reg.AddCollector("x", c); err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	if _, err := gpuotel.Register(mp.Meter("gpumem"), reg); err != nil {
		t.Fatal(err)
	}
	kind, pts := points(t, collect(t, reader)["gpumem_test_things"])
	want := map[string]float64{
		"allocator=x,i=0": 3,
		"allocator=x,i=1": math.MaxInt64,
		"allocator=x,i=2": math.MinInt64,
		"allocator=x,i=3": 0,
	}
	if kind != "int64 gauge" {
		t.Errorf("kind %s, want int64 gauge", kind)
	}
	for k, w := range want {
		if pts[k] != w {
			t.Errorf("%s = %v, want %v", k, pts[k], w)
		}
	}
}

type gpumemCollector struct{ vals []float64 }

func (gpumemCollector) Families() []metrics.Family {
	return []metrics.Family{{Name: "gpumem_test_things", Type: "gauge", Help: "Things."}}
}

func (c gpumemCollector) Collect(emit func(int, []metrics.Label, float64)) {
	for i, v := range c.vals {
		emit(0, []metrics.Label{{Name: "i", Value: string(rune('0' + i))}}, v)
	}
}

func (gpumemCollector) ExpvarValue() any { return nil }
