package metrics_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"expvar"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/deferrable"
	"github.com/gpumem/gpumem/metrics"
)

// After spills to the host and disk and an unspill, every gpumem_deferrable_*
// sample equals the manager's Stats, and the expvar value carries the same.
func TestDeferrableExposition(t *testing.T) {
	g := newSim(t, 2)
	m, err := deferrable.New(g, 1, deferrable.Options{DiskDir: t.TempDir(), HostLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	s := gpumem.Stream{Device: 1}
	var bufs []*deferrable.Buffer
	for i := 0; i < 3; i++ {
		b, err := m.Alloc(1<<20, s)
		if err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, b)
	}
	// Spill all three: one fits the host tier, the others go to disk.
	if n, err := m.Spill(3 << 20); err != nil || n != 3<<20 {
		t.Fatalf("Spill = %d, %v", n, err)
	}
	// Bring one back and hold it.
	if _, err := bufs[0].Acquire(s); err != nil {
		t.Fatal(err)
	}
	defer bufs[0].Release()
	if err := bufs[2].Free(); err != nil {
		t.Fatal(err)
	}

	var r metrics.Registry
	if err := r.AddCollector("kv", m.Collector()); err != nil {
		t.Fatal(err)
	}
	c, err := caching.New(g, caching.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := r.Add("caching", c, []int{0}); err != nil {
		t.Fatal(err)
	}
	st := m.Stats()
	if st.Spilled().Count < 3 || st.Unspilled().Count != 1 || st.Disk.Buffers == 0 || st.Frees != 1 {
		t.Fatalf("setup: spilled %d, unspilled %d, frees %d", st.Spilled().Count, st.Unspilled().Count, st.Frees)
	}
	e := scrape(t, &r)
	lab := func(extra ...string) []string { return append([]string{"allocator", "kv", "device", "1"}, extra...) }
	check := func(series string, want float64) {
		t.Helper()
		e.expect(t, series, want)
	}
	for i, ts := range []deferrable.TierStats{st.Device, st.Host, st.Disk} {
		tier := deferrable.Tier(i).String()
		check(key("gpumem_deferrable_buffers", lab("tier", tier)...), float64(ts.Buffers))
		check(key("gpumem_deferrable_bytes", lab("tier", tier)...), float64(ts.Bytes))
		check(key("gpumem_deferrable_peak_bytes", lab("tier", tier)...), float64(ts.PeakBytes))
	}
	check(key("gpumem_deferrable_pinned_bytes", lab()...), float64(st.PinnedBytes))
	check(key("gpumem_deferrable_pinned_peak_bytes", lab()...), float64(st.PinnedPeakBytes))
	check(key("gpumem_deferrable_pinned_slabs", lab()...), float64(st.PinnedSlabs))
	dirs := map[[2]string]deferrable.Transfer{
		{"device", "host"}: st.DeviceToHost, {"device", "disk"}: st.DeviceToDisk, {"host", "disk"}: st.HostToDisk,
		{"host", "device"}: st.HostToDevice, {"disk", "device"}: st.DiskToDevice, {"disk", "host"}: st.DiskToHost,
	}
	var moved float64
	for d, tr := range dirs {
		l := lab("from", d[0], "to", d[1])
		check(key("gpumem_deferrable_moves_total", l...), float64(tr.Count))
		check(key("gpumem_deferrable_moved_bytes_total", l...), float64(tr.Bytes))
		check(key("gpumem_deferrable_move_seconds_total", l...), tr.Duration.Seconds())
		check(key("gpumem_deferrable_move_failures_total", l...), float64(tr.Failures))
		check(key("gpumem_deferrable_move_fallbacks_total", l...), float64(tr.Fallbacks))
		moved += e.samples[key("gpumem_deferrable_moved_bytes_total", l...)]
	}
	if moved != float64(st.Spilled().Bytes+st.Unspilled().Bytes) || moved < 4<<20 {
		t.Errorf("moved bytes in the exposition: %v, Stats: %d down + %d up", moved, st.Spilled().Bytes, st.Unspilled().Bytes)
	}
	check(key("gpumem_deferrable_holds", lab("kind", "sync")...), 1)
	check(key("gpumem_deferrable_holds", lab("kind", "async")...), 0)
	check(key("gpumem_deferrable_holds", lab("kind", "pending_release")...), 0)
	check(key("gpumem_deferrable_allocs_total", lab()...), 3)
	check(key("gpumem_deferrable_frees_total", lab()...), 1)
	check(key("gpumem_deferrable_alloc_retries_total", lab()...), float64(st.AllocRetries))
	check(key("gpumem_deferrable_oom_handler_calls_total", lab()...), float64(st.OOMHandlerCalls))
	check(key("gpumem_deferrable_oom_spilled_bytes_total", lab()...), float64(st.OOMSpilledBytes))
	// The allocator's families carry no deferrable sample and vice versa.
	for series := range e.samples {
		isDef := strings.HasPrefix(series, "gpumem_deferrable_")
		if isDef != strings.Contains(series, `allocator="kv"`) {
			t.Errorf("sample in the wrong family: %s", series)
		}
	}
	if want := len(metrics.Names()) + len(m.Collector().Families()); len(e.order) != want {
		t.Errorf("%d families, want the allocators' %d and the manager's %d", len(e.order), len(metrics.Names()), len(m.Collector().Families()))
	}

	const name = "gpumem_test_deferrable"
	if err := r.Publish(name); err != nil {
		t.Fatal(err)
	}
	var got map[string]map[string]json.RawMessage
	if err := json.Unmarshal([]byte(expvar.Get(name).String()), &got); err != nil {
		t.Fatal(err)
	}
	var ds deferrable.Stats
	if err := json.Unmarshal(got["kv"]["1"], &ds); err != nil {
		t.Fatalf("expvar kv: %v", err)
	}
	if ds.Spilled() != st.Spilled() || ds.Disk != st.Disk || ds.Allocs != 3 {
		t.Errorf("expvar deferrable stats = %+v, want %+v", ds, st)
	}
	var cs gpumem.MemoryStats
	if err := json.Unmarshal(got["caching"]["0"], &cs); err != nil {
		t.Errorf("expvar caching: %v", err)
	}
}

func TestAddCollectorErrors(t *testing.T) {
	g := newSim(t, 1)
	m, err := deferrable.New(g, 0, deferrable.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	var r metrics.Registry
	for _, tc := range []struct {
		name string
		c    metrics.Collector
	}{{"", m.Collector()}, {"x", nil}} {
		if err := r.AddCollector(tc.name, tc.c); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("AddCollector(%q, %v) = %v", tc.name, tc.c, err)
		}
	}
	if err := r.AddCollector("x", m.Collector()); err != nil {
		t.Fatal(err)
	}
	if err := r.Add("x", metrics.SourceFunc(func(int) gpumem.MemoryStats { return gpumem.MemoryStats{} }), []int{0}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("Add of a name taken by a deferrable manager: %v", err)
	}
	if !r.Remove("x") {
		t.Error("Remove of a deferrable manager reports none")
	}
}

// No family is another's name plus "_total" (which OpenMetrics reads as one
// counter family), among the allocators' and deferrable's families.
func TestNoTotalCollision(t *testing.T) {
	var r metrics.Registry
	_ = r.Add("a", metrics.SourceFunc(func(int) gpumem.MemoryStats { return gpumem.MemoryStats{} }), []int{0})
	names := map[string]bool{}
	for _, mf := range r.Gather() {
		names[mf.Name] = true
	}
	for _, n := range metrics.Names() {
		names[n] = true
	}
	for _, f := range (&deferrable.Manager{}).Collector().Families() {
		names[f.Name] = true
	}
	for n := range names {
		if names[n+"_total"] {
			t.Errorf("%s and %s_total collide", n, n)
		}
	}
}

// appColl is a user's collector of one family, emitting one sample.
type appColl struct {
	fam    metrics.Family
	labels []metrics.Label
}

func (c appColl) Families() []metrics.Family { return []metrics.Family{c.fam} }
func (c appColl) Collect(emit func(int, []metrics.Label, float64)) {
	emit(0, c.labels, 1)
}
func (c appColl) ExpvarValue() any { return nil }

// TestCollectorsTheFormatCannotCarry: a family name or type the exposition
// format has no place for is refused by AddCollector; a sample whose label
// names are bad, or repeat the registry's allocator label, makes
// WritePrometheus fail before it writes anything.
func TestCollectorsTheFormatCannotCarry(t *testing.T) {
	good := metrics.Family{Name: "app_load", Type: "gauge", Help: "h"}
	for name, f := range map[string]metrics.Family{
		"dash in the name": {Name: "app-load", Type: "gauge"}, "digit first": {Name: "9load", Type: "gauge"},
		"empty name": {Type: "gauge"}, "unknown type": {Name: "app_load", Type: "nonsense"},
	} {
		var r metrics.Registry
		if err := r.AddCollector("app", appColl{fam: f}); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("%s: AddCollector = %v, want ErrInvalidValue", name, err)
		}
	}
	for name, labels := range map[string][]metrics.Label{
		"allocator again": {{Name: "allocator", Value: "v"}}, "bad label": {{Name: "bad-label", Value: "v"}},
		"reserved label": {{Name: "__x", Value: "v"}}, "label twice": {{Name: "a", Value: "1"}, {Name: "a", Value: "2"}},
	} {
		var r metrics.Registry
		if err := r.AddCollector("app", appColl{fam: good, labels: labels}); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := r.WritePrometheus(&buf); !errors.Is(err, gpumem.ErrInvalidValue) || buf.Len() != 0 {
			t.Errorf("%s: WritePrometheus = %v with %d bytes written, want ErrInvalidValue and nothing", name, err, buf.Len())
		}
	}
	var r metrics.Registry
	if err := r.AddCollector("app", appColl{fam: good, labels: []metrics.Label{{Name: "shard", Value: "1"}}}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := r.WritePrometheus(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := parseExposition(buf.String()); err != nil {
		t.Errorf("a good collector's exposition: %v\n%s", err, buf.String())
	}
}

// A family that another collector (or the allocators' exposition) already
// has under the same name with another type cannot share its # TYPE line:
// AddCollector refuses it, and accepts one of the same type.
func TestAddCollectorTypeConflict(t *testing.T) {
	var r metrics.Registry
	if err := r.AddCollector("app", appColl{fam: metrics.Family{Name: "gpumem_allocated_bytes", Type: "counter"}}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("a counter named as the allocators' gauge: %v, want ErrInvalidValue", err)
	}
	if err := r.AddCollector("a", appColl{fam: metrics.Family{Name: "app_load", Type: "gauge"}}); err != nil {
		t.Fatal(err)
	}
	if err := r.AddCollector("b", appColl{fam: metrics.Family{Name: "app_load", Type: "counter"}}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("a counter named as another collector's gauge: %v, want ErrInvalidValue", err)
	}
	if err := r.AddCollector("c", appColl{fam: metrics.Family{Name: "app_load", Type: "gauge"}}); err != nil {
		t.Errorf("a gauge named as another collector's gauge: %v", err)
	}
	var buf bytes.Buffer
	if err := r.WritePrometheus(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := parseExposition(buf.String()); err != nil {
		t.Errorf("exposition: %v\n%s", err, buf.String())
	}
}
