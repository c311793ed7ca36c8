package deferrable

import (
	"strconv"

	"github.com/gpumem/gpumem/metrics"
)

// Collector returns the manager's metrics collector, for a metrics.Registry
// (AddCollector): its tiers, pinned memory, transfers and counters as the
// gpumem_deferrable_* families, labelled device (the manager's) and, per
// family, tier, from and to, or kind (package metrics documents each
// family). Its expvar value is the manager's Stats in their JSON form.
func (m *Manager) Collector() metrics.Collector { return collector{m} }

type collector struct{ m *Manager }

// Families lists the deferrable families in the order of the exposition.
func (collector) Families() []metrics.Family { return families }

// Collect reads the manager's statistics once.
func (c collector) Collect(emit func(int, []metrics.Label, float64)) {
	st := c.m.Stats()
	dev := metrics.Label{Name: "device", Value: strconv.Itoa(c.m.Device())}
	for i, v := range familyValues {
		v(&st, func(extra []metrics.Label, x float64) {
			ls := make([]metrics.Label, 0, 1+len(extra))
			ls = append(ls, dev)
			emit(i, append(ls, extra...), x)
		})
	}
}

// ExpvarValue is {device: Stats}.
func (c collector) ExpvarValue() any {
	return map[string]Stats{strconv.Itoa(c.m.Device()): c.m.Stats()}
}

type valuesFunc func(st *Stats, emit func([]metrics.Label, float64))

func lbl(kv ...string) []metrics.Label {
	out := make([]metrics.Label, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, metrics.Label{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

// tierNames are the tier labels, in the order of the tiers.
var tierNames = [3]string{"device", "host", "disk"}

// moves lists the directions of Stats' transfers with their labels.
var moves = [6]struct {
	labels []metrics.Label
	get    func(*Stats) *Transfer
}{
	{lbl("from", "device", "to", "host"), func(s *Stats) *Transfer { return &s.DeviceToHost }},
	{lbl("from", "device", "to", "disk"), func(s *Stats) *Transfer { return &s.DeviceToDisk }},
	{lbl("from", "host", "to", "disk"), func(s *Stats) *Transfer { return &s.HostToDisk }},
	{lbl("from", "host", "to", "device"), func(s *Stats) *Transfer { return &s.HostToDevice }},
	{lbl("from", "disk", "to", "device"), func(s *Stats) *Transfer { return &s.DiskToDevice }},
	{lbl("from", "disk", "to", "host"), func(s *Stats) *Transfer { return &s.DiskToHost }},
}

func tierStats(s *Stats) [3]*TierStats {
	return [3]*TierStats{&s.Device, &s.Host, &s.Disk}
}

// families and familyValues are the exposition of a manager's statistics.
var families, familyValues = func() ([]metrics.Family, []valuesFunc) {
	var fs []metrics.Family
	var vs []valuesFunc
	add := func(name, typ, help string, v valuesFunc) {
		fs = append(fs, metrics.Family{Name: name, Type: typ, Help: help})
		vs = append(vs, v)
	}
	scalar := func(name, typ, help string, get func(*Stats) float64) {
		add(name, typ, help, func(st *Stats, emit func([]metrics.Label, float64)) { emit(nil, get(st)) })
	}
	perMove := func(name, help string, get func(*Transfer) float64) {
		add(name, "counter", help, func(st *Stats, emit func([]metrics.Label, float64)) {
			for _, m := range moves {
				emit(m.labels, get(m.get(st)))
			}
		})
	}
	add("gpumem_deferrable_buffers", "gauge", "Deferrable buffers resident, by tier.",
		func(st *Stats, emit func([]metrics.Label, float64)) {
			for i, t := range tierStats(st) {
				emit(lbl("tier", tierNames[i]), float64(t.Buffers))
			}
		})
	add("gpumem_deferrable_bytes", "gauge", "Bytes of deferrable buffers resident, by tier.",
		func(st *Stats, emit func([]metrics.Label, float64)) {
			for i, t := range tierStats(st) {
				emit(lbl("tier", tierNames[i]), float64(t.Bytes))
			}
		})
	add("gpumem_deferrable_peak_bytes", "gauge", "Peak bytes of deferrable buffers resident, by tier.",
		func(st *Stats, emit func([]metrics.Label, float64)) {
			for i, t := range tierStats(st) {
				emit(lbl("tier", tierNames[i]), float64(t.PeakBytes))
			}
		})
	scalar("gpumem_deferrable_pinned_bytes", "gauge", "Page-locked host memory of the host tier.",
		func(s *Stats) float64 { return float64(s.PinnedBytes) })
	scalar("gpumem_deferrable_pinned_peak_bytes", "gauge", "Peak page-locked host memory of the host tier.",
		func(s *Stats) float64 { return float64(s.PinnedPeakBytes) })
	scalar("gpumem_deferrable_pinned_slabs", "gauge", "Pinned slabs of the host tier.",
		func(s *Stats) float64 { return float64(s.PinnedSlabs) })
	perMove("gpumem_deferrable_moves_total", "Completed moves of buffers between tiers.",
		func(t *Transfer) float64 { return float64(t.Count) })
	perMove("gpumem_deferrable_moved_bytes_total", "Bytes moved between tiers by completed moves.",
		func(t *Transfer) float64 { return float64(t.Bytes) })
	perMove("gpumem_deferrable_move_seconds_total", "Host time of the completed moves' copies, in seconds.",
		func(t *Transfer) float64 { return t.Duration.Seconds() })
	perMove("gpumem_deferrable_move_failures_total", "Moves that failed and left the buffer where it was.",
		func(t *Transfer) float64 { return float64(t.Failures) })
	perMove("gpumem_deferrable_move_fallbacks_total", "Spills to the host that the pinned arena could not place and that went to disk instead (counted there): not failures.",
		func(t *Transfer) float64 { return float64(t.Fallbacks) })
	add("gpumem_deferrable_holds", "gauge", "Holds on buffers: Acquire (sync), AcquireAsync (async), async releases not yet complete (pending_release).",
		func(st *Stats, emit func([]metrics.Label, float64)) {
			emit(lbl("kind", "sync"), float64(st.SyncLocks))
			emit(lbl("kind", "async"), float64(st.AsyncLocks))
			emit(lbl("kind", "pending_release"), float64(st.PendingReleases))
		})
	scalar("gpumem_deferrable_allocs_total", "counter", "Deferrable buffers allocated.",
		func(s *Stats) float64 { return float64(s.Allocs) })
	scalar("gpumem_deferrable_frees_total", "counter", "Deferrable buffers freed.",
		func(s *Stats) float64 { return float64(s.Frees) })
	scalar("gpumem_deferrable_alloc_retries_total", "counter", "Device allocations retried after spilling.",
		func(s *Stats) float64 { return float64(s.AllocRetries) })
	scalar("gpumem_deferrable_oom_handler_calls_total", "counter", "Calls of the manager's out-of-memory handler by other allocators.",
		func(s *Stats) float64 { return float64(s.OOMHandlerCalls) })
	scalar("gpumem_deferrable_oom_spilled_bytes_total", "counter", "Bytes spilled by those calls.",
		func(s *Stats) float64 { return float64(s.OOMSpilledBytes) })
	return fs, vs
}()
