package metrics_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"expvar"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/metrics"
	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/simtest"
)

func TestMain(m *testing.M) { os.Exit(simtest.Main(m)) }

func newSim(t *testing.T, devices int) *sim.GPU {
	t.Helper()
	cfg := sim.Config{}
	for i := 0; i < devices; i++ {
		cfg.Devices = append(cfg.Devices, sim.DeviceConfig{Name: "test", Capacity: 4 << 30})
	}
	g := simtest.New(t, cfg)
	t.Cleanup(func() { _ = g.Close() })
	return g
}

func scrape(t *testing.T, r *metrics.Registry) *exposition {
	t.Helper()
	var buf bytes.Buffer
	if err := r.WritePrometheus(&buf); err != nil {
		t.Fatalf("WritePrometheus: %v", err)
	}
	e, err := parseExposition(buf.String())
	if err != nil {
		t.Fatalf("invalid exposition: %v\n%s", err, buf.String())
	}
	return e
}

// expectStats checks that e holds exactly st's values for allocator name on dev.
func expectStats(t *testing.T, e *exposition, name string, dev int, st gpumem.MemoryStats) {
	t.Helper()
	d := strconv.Itoa(dev)
	arrays := map[string]gpumem.StatArray{
		"allocations": st.Allocation, "segments": st.Segment, "active_blocks": st.Active,
		"inactive_split_blocks": st.InactiveSplit, "allocated_bytes": st.AllocatedBytes,
		"reserved_bytes": st.ReservedBytes, "active_bytes": st.ActiveBytes,
		"inactive_split_bytes": st.InactiveSplitBytes, "requested_bytes": st.RequestedBytes,
	}
	check := func(series string, want float64) {
		t.Helper()
		e.expect(t, series, want)
	}
	for fam, a := range arrays {
		// gpumem_<base>[_bytes]: base and unit.
		base, unit := fam, ""
		if b, ok := strings.CutSuffix(fam, "_bytes"); ok {
			base, unit = b, "_bytes"
		}
		names := [4]string{"gpumem_" + base + unit, "gpumem_" + base + "_peak" + unit,
			"gpumem_" + base + "_added" + unit + "_total", "gpumem_" + base + "_removed" + unit + "_total"}
		for _, p := range []struct {
			i    int
			name string
		}{{gpumem.StatSmall, "small"}, {gpumem.StatLarge, "large"}} {
			l := []string{"allocator", name, "device", d, "pool", p.name}
			check(key(names[0], l...), float64(a[p.i].Current))
			check(key(names[2], l...), float64(a[p.i].Allocated))
			check(key(names[3], l...), float64(a[p.i].Freed))
		}
		check(key(names[1], "allocator", name, "device", d), float64(a[gpumem.StatAll].Peak))
		if got := poolSum(e, names[0], name, d); got != float64(a[gpumem.StatAll].Current) {
			t.Errorf("%s: the pools add up to %v, the total is %d", names[0], got, a[gpumem.StatAll].Current)
		}
		for i, typ := range [4]string{"gauge", "gauge", "counter", "counter"} {
			if e.types[names[i]] != typ {
				t.Errorf("%s: type %q, want %s", names[i], e.types[names[i]], typ)
			}
		}
	}
	scalars := map[string]float64{
		"gpumem_num_alloc_retries_total":    float64(st.NumAllocRetries),
		"gpumem_num_ooms_total":             float64(st.NumOOMs),
		"gpumem_num_sync_all_streams_total": float64(st.NumSyncAllStreams),
		"gpumem_num_device_alloc_total":     float64(st.NumDeviceAlloc),
		"gpumem_num_device_free_total":      float64(st.NumDeviceFree),
		"gpumem_largest_free_block_bytes":   float64(st.LargestFreeBlock),
		"gpumem_fragmentation_ratio":        st.Fragmentation,
		"gpumem_pending_release_bytes":      float64(st.PendingReleaseBytes),
		"gpumem_cross_stream_reuses_total":  float64(st.CrossStreamReuses),
		"gpumem_segment_growths_total":      float64(st.SegmentGrowths),
		"gpumem_unreleased_bytes":           float64(st.UnreleasedBytes),
		"gpumem_asleep_bytes":               float64(st.AsleepBytes),
		"gpumem_asleep_saved_bytes":         float64(st.AsleepSavedBytes),
		"gpumem_asleep_discarded_bytes":     float64(st.AsleepDiscardedBytes),
		"gpumem_sleeps_total":               float64(st.NumSleeps),
		"gpumem_wakes_total":                float64(st.NumWakes),
	}
	for fam, want := range scalars {
		check(key(fam, "allocator", name, "device", d), want)
	}
}

func TestCachingExposition(t *testing.T) {
	g := newSim(t, 2)
	a, err := caching.New(g, caching.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	s0, s1 := gpumem.Stream{Device: 0}, gpumem.Stream{Device: 1}
	sizes := []uint64{1000, 3000, 5 << 20}
	var ptrs []gpumem.Ptr
	var want int64
	for _, n := range sizes {
		p, err := a.Allocate(n, s0)
		if err != nil {
			t.Fatal(err)
		}
		ptrs = append(ptrs, p)
		want += int64(n)
	}
	q, err := a.Allocate(12345, s1)
	if err != nil {
		t.Fatal(err)
	}
	// Free one block of device 0 so the freed counters move.
	if err := a.Deallocate(ptrs[0], s0); err != nil {
		t.Fatal(err)
	}
	want -= int64(sizes[0])

	var r metrics.Registry
	if err := r.Add("caching", a, []int{1, 0}); err != nil {
		t.Fatal(err)
	}
	e := scrape(t, &r)
	// The exposition holds the requested bytes the test allocated ...
	if got := poolSum(e, "gpumem_requested_bytes", "caching", "0"); got != float64(want) {
		t.Errorf("device 0 requested current = %v, want %d", got, want)
	}
	if got := poolSum(e, "gpumem_requested_bytes", "caching", "1"); got != 12345 {
		t.Errorf("device 1 requested current = %v, want 12345", got)
	}
	if got := poolSum(e, "gpumem_allocations", "caching", "0"); got != 2 {
		t.Errorf("device 0 allocation current = %v, want 2", got)
	}
	if got := e.samples[key("gpumem_allocations_removed_total", "allocator", "caching", "device", "0", "pool", "small")]; got != 1 {
		t.Errorf("device 0 allocation freed = %v, want 1", got)
	}
	// ... and every figure of Stats exactly.
	expectStats(t, e, "caching", 0, a.Stats(0))
	expectStats(t, e, "caching", 1, a.Stats(1))
	if len(e.order) != len(metrics.Names()) {
		t.Errorf("%d families, Names lists %d", len(e.order), len(metrics.Names()))
	}
	for i, n := range metrics.Names() {
		if i < len(e.order) && e.order[i] != n {
			t.Errorf("family %d is %s, Names says %s", i, e.order[i], n)
		}
	}
	for _, p := range ptrs[1:] {
		_ = a.Deallocate(p, s0)
	}
	_ = a.Deallocate(q, s1)
}

func TestAsyncpoolExposition(t *testing.T) {
	g := newSim(t, 1)
	a, err := asyncpool.New(g, asyncpool.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	s := gpumem.Stream{Device: 0}
	var ptrs []gpumem.Ptr
	for _, n := range []uint64{4 << 20, 1 << 20, 777} {
		p, err := a.Allocate(n, s)
		if err != nil {
			t.Fatal(err)
		}
		ptrs = append(ptrs, p)
	}
	var r metrics.Registry
	if err := r.Add("asyncpool", a, []int{0}); err != nil {
		t.Fatal(err)
	}
	e := scrape(t, &r)
	if got := poolSum(e, "gpumem_requested_bytes", "asyncpool", "0"); got != 4<<20+1<<20+777 {
		t.Errorf("requested current = %v, want %d", got, 4<<20+1<<20+777)
	}
	if got := poolSum(e, "gpumem_allocations", "asyncpool", "0"); got != 3 {
		t.Errorf("allocation current = %v, want 3", got)
	}
	expectStats(t, e, "asyncpool", 0, a.Stats(0))
	for _, p := range ptrs {
		if err := a.Deallocate(p, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Drain(); err != nil {
		t.Fatal(err)
	}
	st := a.Stats(0)
	e = scrape(t, &r)
	expectStats(t, e, "asyncpool", 0, st)
	if got := poolSum(e, "gpumem_allocations", "asyncpool", "0"); got != 0 {
		t.Errorf("allocation current after frees = %v, want 0", got)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestExpvar(t *testing.T) {
	g := newSim(t, 1)
	a, err := caching.New(g, caching.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	s := gpumem.Stream{Device: 0}
	p, err := a.Allocate(3<<20, s)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Deallocate(p, s)
	r := metrics.NewRegistry()
	if err := r.Add("caching", a, []int{0}); err != nil {
		t.Fatal(err)
	}
	const name = "gpumem_test_expvar"
	if err := r.Publish(name); err != nil {
		t.Fatal(err)
	}
	v := expvar.Get(name)
	if v == nil {
		t.Fatal("not published")
	}
	var got map[string]map[string]gpumem.MemoryStats
	if err := json.Unmarshal([]byte(v.String()), &got); err != nil {
		t.Fatalf("expvar JSON: %v\n%s", err, v.String())
	}
	if want := a.Stats(0); got["caching"]["0"] != want {
		t.Errorf("expvar stats = %+v, want %+v", got["caching"]["0"], want)
	}
	if got["caching"]["0"].RequestedBytes[gpumem.StatAll].Current != 3<<20 {
		t.Errorf("expvar requested current = %d", got["caching"]["0"].RequestedBytes[gpumem.StatAll].Current)
	}
	// The same figures as the exposition.
	e := scrape(t, r)
	expectStats(t, e, "caching", 0, got["caching"]["0"])

	// /debug/vars stays valid JSON with the registry in it.
	rec := httptest.NewRecorder()
	expvar.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/debug/vars", nil))
	var all map[string]json.RawMessage
	if err := json.Unmarshal(rec.Body.Bytes(), &all); err != nil {
		t.Fatalf("/debug/vars: %v", err)
	}
	if _, ok := all[name]; !ok {
		t.Errorf("/debug/vars lacks %s", name)
	}
}

func TestPublishTwice(t *testing.T) {
	var r, r2 metrics.Registry
	const name = "gpumem_test_twice"
	if err := r.Publish(name); err != nil {
		t.Fatal(err)
	}
	for _, reg := range []*metrics.Registry{&r, &r2} {
		if err := reg.Publish(name); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("second Publish: %v, want ErrInvalidValue", err)
		}
	}
	expvar.NewInt("gpumem_test_taken")
	if err := r.Publish("gpumem_test_taken"); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("Publish over another variable: %v", err)
	}
	if err := r.Publish(""); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("Publish empty: %v", err)
	}
	// Concurrent publications of one name: exactly one succeeds.
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if (&metrics.Registry{}).Publish("gpumem_test_race") == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if ok != 1 {
		t.Errorf("%d concurrent publications succeeded, want 1", ok)
	}
}

func TestLabelEscaping(t *testing.T) {
	var r metrics.Registry
	name := "we\"ird\\name\nwith newline"
	src := metrics.SourceFunc(func(dev int) gpumem.MemoryStats {
		var st gpumem.MemoryStats
		st.AllocatedBytes.Add(gpumem.StatLarge, int64(1000+dev))
		st.Fragmentation = math.NaN()
		st.NumOOMs = 7
		return st
	})
	if err := r.Add(name, src, []int{3}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := r.WritePrometheus(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, `allocator="we\"ird\\name\nwith newline"`) {
		t.Errorf("label not escaped:\n%s", out)
	}
	e, err := parseExposition(out)
	if err != nil {
		t.Fatalf("invalid exposition: %v\n%s", err, out)
	}
	if got := e.samples[key("gpumem_allocated_bytes", "allocator", name, "device", "3", "pool", "large")]; got != 1003 {
		t.Errorf("escaped series value = %v, want 1003", got)
	}
	if got := e.samples[key("gpumem_num_ooms_total", "allocator", name, "device", "3")]; got != 7 {
		t.Errorf("num_ooms = %v, want 7", got)
	}
	if got := e.samples[key("gpumem_fragmentation_ratio", "allocator", name, "device", "3")]; !math.IsNaN(got) {
		t.Errorf("fragmentation = %v, want NaN", got)
	}
	// expvar JSON stays valid with a NaN fragmentation.
	if err := r.Publish("gpumem_test_nan"); err != nil {
		t.Fatal(err)
	}
	var got map[string]map[string]gpumem.MemoryStats
	if err := json.Unmarshal([]byte(expvar.Get("gpumem_test_nan").String()), &got); err != nil {
		t.Fatalf("expvar JSON with NaN: %v", err)
	}
	if got[name]["3"].NumOOMs != 7 || got[name]["3"].Fragmentation != 0 {
		t.Errorf("expvar = %+v", got[name]["3"])
	}
}

func TestAddRemove(t *testing.T) {
	var r metrics.Registry
	src := metrics.SourceFunc(func(int) gpumem.MemoryStats { return gpumem.MemoryStats{} })
	bad := []struct {
		name string
		src  metrics.Source
		devs []int
	}{
		{"", src, []int{0}},
		{"x", nil, []int{0}},
		{"x", src, nil},
		{"x", src, []int{-1}},
		{"x", src, []int{0, 0}},
	}
	for _, b := range bad {
		if err := r.Add(b.name, b.src, b.devs); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("Add(%q, %v, %v) = %v, want ErrInvalidValue", b.name, b.src, b.devs, err)
		}
	}
	if err := r.Add("b", src, []int{0}); err != nil {
		t.Fatal(err)
	}
	if err := r.Add("a", src, []int{0}); err != nil {
		t.Fatal(err)
	}
	if err := r.Add("b", src, []int{1}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("duplicate Add: %v", err)
	}
	e := scrape(t, &r)
	for _, n := range []string{"a", "b"} {
		if _, ok := e.samples[key("gpumem_num_ooms_total", "allocator", n, "device", "0")]; !ok {
			t.Errorf("no samples for %s", n)
		}
	}
	if !r.Remove("b") || r.Remove("b") {
		t.Error("Remove reports wrongly")
	}
	e = scrape(t, &r)
	if _, ok := e.samples[key("gpumem_num_ooms_total", "allocator", "b", "device", "0")]; ok {
		t.Error("removed source still written")
	}
	r.Remove("a")
	e = scrape(t, &r)
	if len(e.samples) != 0 || len(e.types) != len(metrics.Names()) {
		t.Errorf("empty registry: %d samples, %d families", len(e.samples), len(e.types))
	}
}

func TestHandler(t *testing.T) {
	var r metrics.Registry
	src := metrics.SourceFunc(func(dev int) gpumem.MemoryStats {
		var st gpumem.MemoryStats
		st.ReservedBytes.Add(gpumem.StatSmall, 2<<20)
		return st
	})
	if err := r.Add("fake", src, []int{0}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	e, err := parseExposition(string(body))
	if err != nil {
		t.Fatal(err)
	}
	if got := e.samples[key("gpumem_reserved_bytes", "allocator", "fake", "device", "0", "pool", "small")]; got != 2<<20 {
		t.Errorf("served reserved small = %v", got)
	}
	resp, err = http.Post(srv.URL, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST status %d", resp.StatusCode)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteError(t *testing.T) {
	var r metrics.Registry
	if err := r.WritePrometheus(failWriter{}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("WritePrometheus to a failing writer: %v", err)
	}
}

// Scrapes, expvar reads and registry changes run while allocators allocate
// on several goroutines (run with -race).
func TestConcurrent(t *testing.T) {
	g := newSim(t, 2)
	c, err := caching.New(g, caching.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ap, err := asyncpool.New(g, asyncpool.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var r metrics.Registry
	if err := r.Add("caching", c, []int{0, 1}); err != nil {
		t.Fatal(err)
	}
	if err := r.Add("asyncpool", ap, []int{0, 1}); err != nil {
		t.Fatal(err)
	}
	if err := r.Publish("gpumem_test_concurrent"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var workers, readers sync.WaitGroup
	for i := 0; i < 4; i++ {
		workers.Add(1)
		go func(i int) {
			defer workers.Done()
			var res gpumem.Resource = c
			if i%2 == 1 {
				res = ap
			}
			s := gpumem.Stream{Device: i / 2}
			for j := 0; j < 200; j++ {
				p, err := res.Allocate(uint64(512+j*4096), s)
				if err != nil {
					t.Error(err)
					return
				}
				if err := res.Deallocate(p, s); err != nil {
					t.Error(err)
					return
				}
			}
		}(i)
	}
	errs := make(chan error, 3)
	readers.Add(3)
	go func() {
		defer readers.Done()
		for {
			var buf bytes.Buffer
			if err := r.WritePrometheus(&buf); err != nil {
				errs <- err
				return
			}
			if _, err := parseExposition(buf.String()); err != nil {
				errs <- err
				return
			}
			if stopped(stop) {
				return
			}
		}
	}()
	go func() {
		defer readers.Done()
		for {
			var m map[string]any
			if err := json.Unmarshal([]byte(expvar.Get("gpumem_test_concurrent").String()), &m); err != nil {
				errs <- err
				return
			}
			if stopped(stop) {
				return
			}
		}
	}()
	go func() {
		defer readers.Done()
		for k := 0; ; k++ {
			n := fmt.Sprintf("extra%d", k%3)
			_ = r.Add(n, c, []int{0})
			r.Remove(n)
			if stopped(stop) {
				return
			}
		}
	}()
	workers.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := ap.Close(); err != nil {
		t.Error(err)
	}
	if err := g.Drain(); err != nil {
		t.Error(err)
	}
}

// stopped reports whether stop is closed.
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// poolSum is the sum over the pool label of one family's samples for an
// allocator and device: the total, since the pools do not overlap.
func poolSum(e *exposition, family, allocator, dev string) float64 {
	sum := 0.0
	for _, pool := range []string{"small", "large", "other"} {
		sum += e.samples[key(family, "allocator", allocator, "device", dev, "pool", pool)]
	}
	return sum
}
