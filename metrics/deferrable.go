package metrics

import "github.com/gpumem/gpumem/deferrable"

// tierLabels are the tier labels of the deferrable families, in the order of
// deferrable's tiers.
var tierLabels = [3]string{`tier="device"`, `tier="host"`, `tier="disk"`}

// moves lists the directions of deferrable.Stats' transfers with their
// labels.
var moves = [6]struct {
	labels string
	get    func(*deferrable.Stats) *deferrable.Transfer
}{
	{`from="device",to="host"`, func(s *deferrable.Stats) *deferrable.Transfer { return &s.DeviceToHost }},
	{`from="device",to="disk"`, func(s *deferrable.Stats) *deferrable.Transfer { return &s.DeviceToDisk }},
	{`from="host",to="disk"`, func(s *deferrable.Stats) *deferrable.Transfer { return &s.HostToDisk }},
	{`from="host",to="device"`, func(s *deferrable.Stats) *deferrable.Transfer { return &s.HostToDevice }},
	{`from="disk",to="device"`, func(s *deferrable.Stats) *deferrable.Transfer { return &s.DiskToDevice }},
	{`from="disk",to="host"`, func(s *deferrable.Stats) *deferrable.Transfer { return &s.DiskToHost }},
}

func tiers(s *deferrable.Stats) [3]*deferrable.TierStats {
	return [3]*deferrable.TierStats{&s.Device, &s.Host, &s.Disk}
}

// defScalar is a deferrable family with one unlabelled sample.
func defScalar(name, typ, help string, get func(*deferrable.Stats) float64) family {
	return family{name: name, typ: typ, help: help, def: func(st *deferrable.Stats, emit func(string, float64)) {
		emit("", get(st))
	}}
}

// defMoves is a counter family with one sample per direction of transfer.
func defMoves(name, help string, get func(*deferrable.Transfer) float64) family {
	return family{name: name, typ: "counter", help: help, def: func(st *deferrable.Stats, emit func(string, float64)) {
		for _, m := range moves {
			emit(m.labels, get(m.get(st)))
		}
	}}
}

// deferrableFamilies lists the families of deferrable managers, in the order
// of the exposition; doc.go documents each.
func deferrableFamilies() []family {
	return []family{
		{name: "gpumem_deferrable_buffers", typ: "gauge", help: "Deferrable buffers resident, by tier.",
			def: func(st *deferrable.Stats, emit func(string, float64)) {
				for i, t := range tiers(st) {
					emit(tierLabels[i], float64(t.Buffers))
				}
			}},
		{name: "gpumem_deferrable_bytes", typ: "gauge", help: "Bytes of deferrable buffers resident, current and peak, by tier.",
			def: func(st *deferrable.Stats, emit func(string, float64)) {
				for i, t := range tiers(st) {
					emit(tierLabels[i]+`,stat="current"`, float64(t.Bytes))
					emit(tierLabels[i]+`,stat="peak"`, float64(t.PeakBytes))
				}
			}},
		{name: "gpumem_deferrable_pinned_bytes", typ: "gauge", help: "Page-locked host memory of the host tier, current and peak.",
			def: func(st *deferrable.Stats, emit func(string, float64)) {
				emit(`stat="current"`, float64(st.PinnedBytes))
				emit(`stat="peak"`, float64(st.PinnedPeakBytes))
			}},
		defScalar("gpumem_deferrable_pinned_slabs", "gauge", "Pinned slabs of the host tier.",
			func(s *deferrable.Stats) float64 { return float64(s.PinnedSlabs) }),
		defMoves("gpumem_deferrable_moves_total", "Completed moves of buffers between tiers.",
			func(t *deferrable.Transfer) float64 { return float64(t.Count) }),
		defMoves("gpumem_deferrable_moved_bytes_total", "Bytes moved between tiers by completed moves.",
			func(t *deferrable.Transfer) float64 { return float64(t.Bytes) }),
		defMoves("gpumem_deferrable_move_seconds_total", "Host time of the completed moves' copies, in seconds.",
			func(t *deferrable.Transfer) float64 { return t.Duration.Seconds() }),
		defMoves("gpumem_deferrable_move_failures_total", "Moves that failed and left the buffer where it was.",
			func(t *deferrable.Transfer) float64 { return float64(t.Failures) }),
		{name: "gpumem_deferrable_holds", typ: "gauge", help: "Holds on buffers: Acquire (sync), AcquireAsync (async), async releases not yet complete (pending_release).",
			def: func(st *deferrable.Stats, emit func(string, float64)) {
				emit(`kind="sync"`, float64(st.SyncLocks))
				emit(`kind="async"`, float64(st.AsyncLocks))
				emit(`kind="pending_release"`, float64(st.PendingReleases))
			}},
		defScalar("gpumem_deferrable_allocs_total", "counter", "Deferrable buffers allocated.",
			func(s *deferrable.Stats) float64 { return float64(s.Allocs) }),
		defScalar("gpumem_deferrable_frees_total", "counter", "Deferrable buffers freed.",
			func(s *deferrable.Stats) float64 { return float64(s.Frees) }),
		defScalar("gpumem_deferrable_alloc_retries_total", "counter", "Device allocations retried after spilling.",
			func(s *deferrable.Stats) float64 { return float64(s.AllocRetries) }),
		defScalar("gpumem_deferrable_oom_handler_calls_total", "counter", "Calls of the manager's out-of-memory handler by other allocators.",
			func(s *deferrable.Stats) float64 { return float64(s.OOMHandlerCalls) }),
		defScalar("gpumem_deferrable_oom_spilled_bytes_total", "counter", "Bytes spilled by those calls.",
			func(s *deferrable.Stats) float64 { return float64(s.OOMSpilledBytes) }),
	}
}
