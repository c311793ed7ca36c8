package metrics

import (
	"bufio"
	"bytes"
	"expvar"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"sync"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/deferrable"
)

// Source is anything that reports per-device statistics: every allocator of
// the project (caching, asyncpool, managed) is one.
type Source interface {
	Stats(dev int) gpumem.MemoryStats
}

// SourceFunc adapts a function to a Source.
type SourceFunc func(dev int) gpumem.MemoryStats

// Stats calls f(dev).
func (f SourceFunc) Stats(dev int) gpumem.MemoryStats { return f(dev) }

// ContentType is the media type of the Prometheus text exposition format that
// WritePrometheus writes and Handler serves.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// DeferrableSource is a manager of deferrable (spillable) buffers on one
// device: *deferrable.Manager is one.
type DeferrableSource interface {
	Stats() deferrable.Stats
	Device() int
}

type entry struct {
	name    string
	src     Source           // an allocator, or nil
	def     DeferrableSource // a deferrable manager, or nil
	devices []int
}

// Registry is a set of named sources, each watched on a list of devices. The
// zero value is an empty registry ready for use; it is safe for concurrent
// use, and its output may be read while the sources allocate.
type Registry struct {
	mu      sync.Mutex
	entries []entry // sorted by name
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{} }

// Add watches src under name (the allocator label, such as "caching") on the
// given devices. An empty name, a nil source, no devices, a negative device or
// a name already added returns an error matching gpumem.ErrInvalidValue.
func (r *Registry) Add(name string, src Source, devices []int) error {
	if name == "" {
		return fmt.Errorf("metrics: add: empty name: %w", gpumem.ErrInvalidValue)
	}
	if src == nil {
		return fmt.Errorf("metrics: add %q: nil source: %w", name, gpumem.ErrInvalidValue)
	}
	return r.add(entry{name: name, src: src}, devices)
}

// AddDeferrable watches a manager of deferrable buffers (a
// *deferrable.Manager) under name, on the manager's device: its tiers,
// pinned memory, transfers and counters appear as the gpumem_deferrable_*
// families, labelled allocator=name and device. The name shares one space
// with Add's. Errors match gpumem.ErrInvalidValue, as Add's do.
func (r *Registry) AddDeferrable(name string, m DeferrableSource) error {
	if name == "" {
		return fmt.Errorf("metrics: add: empty name: %w", gpumem.ErrInvalidValue)
	}
	if m == nil {
		return fmt.Errorf("metrics: add %q: nil manager: %w", name, gpumem.ErrInvalidValue)
	}
	if dm, ok := m.(*deferrable.Manager); ok && dm == nil {
		return fmt.Errorf("metrics: add %q: nil manager: %w", name, gpumem.ErrInvalidValue)
	}
	return r.add(entry{name: name, def: m}, []int{m.Device()})
}

// add checks the devices and inserts e, keeping the entries sorted by name.
func (r *Registry) add(e entry, devices []int) error {
	name := e.name
	if len(devices) == 0 {
		return fmt.Errorf("metrics: add %q: no devices: %w", name, gpumem.ErrInvalidValue)
	}
	devs := append([]int(nil), devices...)
	sort.Ints(devs)
	for i, d := range devs {
		if d < 0 {
			return fmt.Errorf("metrics: add %q: device %d: %w", name, d, gpumem.ErrInvalidValue)
		}
		if i > 0 && devs[i-1] == d {
			return fmt.Errorf("metrics: add %q: device %d listed twice: %w", name, d, gpumem.ErrInvalidValue)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	i := sort.Search(len(r.entries), func(i int) bool { return r.entries[i].name >= name })
	if i < len(r.entries) && r.entries[i].name == name {
		return fmt.Errorf("metrics: add %q: name already added: %w", name, gpumem.ErrInvalidValue)
	}
	r.entries = append(r.entries, entry{})
	copy(r.entries[i+1:], r.entries[i:])
	e.devices = devs
	r.entries[i] = e
	return nil
}

// Remove stops watching the source added under name and reports whether there
// was one.
func (r *Registry) Remove(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, e := range r.entries {
		if e.name == name {
			r.entries = append(r.entries[:i], r.entries[i+1:]...)
			return true
		}
	}
	return false
}

// sample is one source's statistics on one device: an allocator's (def nil)
// or a deferrable manager's.
type sample struct {
	allocator string
	device    int
	stats     gpumem.MemoryStats
	def       *deferrable.Stats
}

// collect reads every source once. The sources are called without the
// registry's lock held.
func (r *Registry) collect() []sample {
	r.mu.Lock()
	entries := append([]entry(nil), r.entries...)
	r.mu.Unlock()
	var out []sample
	for _, e := range entries {
		if e.def != nil {
			st := e.def.Stats()
			out = append(out, sample{allocator: e.name, device: e.devices[0], def: &st})
			continue
		}
		for _, d := range e.devices {
			out = append(out, sample{allocator: e.name, device: d, stats: e.src.Stats(d)})
		}
	}
	return out
}

// publishMu serializes Publish calls so that the check for a taken name and
// the publication happen together.
var publishMu sync.Mutex

// Publish makes the registry's statistics visible through expvar (and so at
// /debug/vars) under expvarName, as a JSON object
// {allocator: {device: gpumem.MemoryStats}} (a deferrable manager's value is
// its deferrable.Stats instead), read afresh each time. A name
// that is empty or already published by anyone returns an error matching
// gpumem.ErrInvalidValue; Publish never panics.
func (r *Registry) Publish(expvarName string) (err error) {
	if expvarName == "" {
		return fmt.Errorf("metrics: publish: empty name: %w", gpumem.ErrInvalidValue)
	}
	publishMu.Lock()
	defer publishMu.Unlock()
	if expvar.Get(expvarName) != nil {
		return fmt.Errorf("metrics: publish %q: name already published: %w", expvarName, gpumem.ErrInvalidValue)
	}
	defer func() {
		// expvar.Publish panics on a duplicate; a publication made between
		// the check and here by code not using this package ends up here.
		if v := recover(); v != nil {
			err = fmt.Errorf("metrics: publish %q: %v: %w", expvarName, v, gpumem.ErrInvalidValue)
		}
	}()
	expvar.Publish(expvarName, expvar.Func(r.expvarValue))
	return nil
}

// expvarValue is the value published by Publish.
func (r *Registry) expvarValue() any {
	out := make(map[string]map[string]any)
	for _, s := range r.collect() {
		m := out[s.allocator]
		if m == nil {
			m = make(map[string]any)
			out[s.allocator] = m
		}
		if s.def != nil {
			m[strconv.Itoa(s.device)] = *s.def
			continue
		}
		st := s.stats
		if math.IsNaN(st.Fragmentation) || math.IsInf(st.Fragmentation, 0) {
			st.Fragmentation = 0 // JSON has no NaN or infinity
		}
		m[strconv.Itoa(s.device)] = st
	}
	return out
}

// family is one metric family of the exposition.
type family struct {
	name string
	typ  string // "gauge" or "counter"
	help string
	// values appends the family's samples for one allocator's statistics:
	// each with its extra labels (after allocator and device) and its value.
	// Nil for the families of deferrable managers.
	values func(st *gpumem.MemoryStats, emit func(labels string, v float64))
	// def is values for a deferrable manager's statistics; nil for the
	// families of allocators.
	def func(st *deferrable.Stats, emit func(labels string, v float64))
}

var pools = [3]string{gpumem.StatAll: "all", gpumem.StatSmall: "small", gpumem.StatLarge: "large"}

// poolLabels[p][k] are the pool and stat labels of pool p and statistic k
// (current, peak, allocated, freed), built once.
var poolLabels = func() (l [3][4]string) {
	for p, pool := range pools {
		for k, stat := range [4]string{"current", "peak", "allocated", "freed"} {
			l[p][k] = `pool="` + pool + `",stat="` + stat + `"`
		}
	}
	return l
}()

// statFamilies returns the two families of one StatArray: its gauges
// (current, peak) and its counters (allocated, freed).
func statFamilies(name, what string, get func(*gpumem.MemoryStats) *gpumem.StatArray) []family {
	return []family{
		{
			name: "gpumem_" + name,
			typ:  "gauge",
			help: what + ": current value and peak since the last reset, by pool.",
			values: func(st *gpumem.MemoryStats, emit func(string, float64)) {
				a := get(st)
				for p := range pools {
					emit(poolLabels[p][0], float64(a[p].Current))
					emit(poolLabels[p][1], float64(a[p].Peak))
				}
			},
		},
		{
			name: "gpumem_" + name + "_total",
			typ:  "counter",
			help: what + ": total increments (stat=allocated) and decrements (stat=freed), by pool.",
			values: func(st *gpumem.MemoryStats, emit func(string, float64)) {
				a := get(st)
				for p := range pools {
					emit(poolLabels[p][2], float64(a[p].Allocated))
					emit(poolLabels[p][3], float64(a[p].Freed))
				}
			},
		},
	}
}

func scalar(name, typ, help string, get func(*gpumem.MemoryStats) float64) family {
	return family{name: name, typ: typ, help: help, values: func(st *gpumem.MemoryStats, emit func(string, float64)) {
		emit("", get(st))
	}}
}

// families lists the exposition in its order; doc.go documents each.
var families = func() []family {
	var fs []family
	add := func(name, what string, get func(*gpumem.MemoryStats) *gpumem.StatArray) {
		fs = append(fs, statFamilies(name, what, get)...)
	}
	add("allocation", "Blocks handed out", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.Allocation })
	add("segment", "Device allocations held", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.Segment })
	add("active", "Blocks allocated or awaiting their streams", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.Active })
	add("inactive_split", "Free blocks split from a segment with live parts", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.InactiveSplit })
	add("allocated_bytes", "Bytes handed out (rounded)", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.AllocatedBytes })
	add("reserved_bytes", "Bytes held from the device", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.ReservedBytes })
	add("active_bytes", "Bytes in active blocks", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.ActiveBytes })
	add("inactive_split_bytes", "Bytes in inactive split blocks", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.InactiveSplitBytes })
	add("requested_bytes", "Bytes asked for (unrounded)", func(s *gpumem.MemoryStats) *gpumem.StatArray { return &s.RequestedBytes })
	fs = append(fs,
		scalar("gpumem_num_alloc_retries_total", "counter", "Allocations retried after freeing cached memory.",
			func(s *gpumem.MemoryStats) float64 { return float64(s.NumAllocRetries) }),
		scalar("gpumem_num_ooms_total", "counter", "Allocations failed for lack of memory.",
			func(s *gpumem.MemoryStats) float64 { return float64(s.NumOOMs) }),
		scalar("gpumem_num_sync_all_streams_total", "counter", "Waits for every stream's pending frees.",
			func(s *gpumem.MemoryStats) float64 { return float64(s.NumSyncAllStreams) }),
		scalar("gpumem_num_device_alloc_total", "counter", "Device allocation calls.",
			func(s *gpumem.MemoryStats) float64 { return float64(s.NumDeviceAlloc) }),
		scalar("gpumem_num_device_free_total", "counter", "Device free calls.",
			func(s *gpumem.MemoryStats) float64 { return float64(s.NumDeviceFree) }),
		scalar("gpumem_largest_free_block_bytes", "gauge", "Largest block that can be handed out without a new segment.",
			func(s *gpumem.MemoryStats) float64 { return float64(s.LargestFreeBlock) }),
		scalar("gpumem_fragmentation_ratio", "gauge", "1 - largest free block / free bytes (0 when nothing is free).",
			func(s *gpumem.MemoryStats) float64 { return s.Fragmentation }),
		scalar("gpumem_pending_release_bytes", "gauge", "Bytes freed but awaiting other streams.",
			func(s *gpumem.MemoryStats) float64 { return float64(s.PendingReleaseBytes) }),
		scalar("gpumem_cross_stream_reuses_total", "counter", "Free blocks reused on another stream after a wait.",
			func(s *gpumem.MemoryStats) float64 { return float64(s.CrossStreamReuses) }),
		scalar("gpumem_segment_growths_total", "counter", "Wholly free segments grown in place instead of replaced by a new one.",
			func(s *gpumem.MemoryStats) float64 { return float64(s.SegmentGrowths) }),
	)
	return append(fs, deferrableFamilies()...)
}()

// Names returns the names of every metric family WritePrometheus writes, in
// the order it writes them.
func Names() []string {
	out := make([]string, len(families))
	for i, f := range families {
		out[i] = f.name
	}
	return out
}

// WritePrometheus writes the statistics of every source on each of its
// devices in the Prometheus text exposition format (version 0.0.4): for each
// family, one # HELP and one # TYPE line and then its samples, labelled
// allocator, device and, for the families of pooled statistics, pool and
// stat. Each source is read once per call, so all families show the same
// moment of each source. The first write error is returned.
func (r *Registry) WritePrometheus(w io.Writer) error {
	samples := r.collect()
	bw := bufio.NewWriter(w)
	var line []byte
	for _, f := range families {
		line = append(line[:0], "# HELP "...)
		line = append(line, f.name...)
		line = append(line, ' ')
		line = appendEscaped(line, f.help, false)
		line = append(line, "\n# TYPE "...)
		line = append(line, f.name...)
		line = append(line, ' ')
		line = append(line, f.typ...)
		line = append(line, '\n')
		if _, err := bw.Write(line); err != nil {
			return fmt.Errorf("metrics: write: %w", err)
		}
		for i := range samples {
			s := &samples[i]
			var werr error
			emit := func(labels string, v float64) {
				if werr != nil {
					return
				}
				line = append(line[:0], f.name...)
				line = append(line, `{allocator="`...)
				line = appendEscaped(line, s.allocator, true)
				line = append(line, `",device="`...)
				line = strconv.AppendInt(line, int64(s.device), 10)
				line = append(line, '"')
				if labels != "" {
					line = append(line, ',')
					line = append(line, labels...)
				}
				line = append(line, "} "...)
				line = appendValue(line, v)
				line = append(line, '\n')
				_, werr = bw.Write(line)
			}
			switch {
			case s.def != nil && f.def != nil:
				f.def(s.def, emit)
			case s.def == nil && f.values != nil:
				f.values(&s.stats, emit)
			}
			if werr != nil {
				return fmt.Errorf("metrics: write: %w", werr)
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("metrics: write: %w", err)
	}
	return nil
}

// appendEscaped escapes a label value (backslash, double quote, newline) or
// a HELP text (backslash, newline).
func appendEscaped(b []byte, s string, quote bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

func appendValue(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// Handler returns an http.Handler that serves WritePrometheus's output to GET
// and HEAD requests with Content-Type ContentType, for a Prometheus server
// to scrape.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		var buf bytes.Buffer
		if err := r.WritePrometheus(&buf); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", ContentType)
		w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
		if req.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(buf.Bytes())
	})
}
