package caching

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/trace"
)

// The traces live beside the repository (../shared/traces from its root).
var traceDir = filepath.Join("..", "..", "shared", "traces")

func loadTrace(t testing.TB, name string) *trace.Trace {
	t.Helper()
	path := filepath.Join("..", "testdata", name+".trace.gz") // bundled with the repository
	if _, err := os.Stat(path); err != nil {
		path = filepath.Join(traceDir, name+".trace.gz")
	}
	if _, err := os.Stat(path); err != nil {
		t.Skipf("trace %s not found at %s (the traces are kept beside the repository, in ../shared/traces): %v", name, path, err)
	}
	tr, err := trace.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

type replayResult struct {
	peakRequested, peakReserved uint64
	stats                       gpumem.MemoryStats
}

// replay runs a trace as the GPU anchor does: four streams, allocations on
// STREAM&3, frees returning to the allocation stream's pool, a free on
// another stream recorded as a use of that stream first.
func replay(t testing.TB, b gpumem.Backend, opts Options, tr *trace.Trace, streams [4]gpumem.Stream) replayResult {
	t.Helper()
	a, err := New(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	replayPass(t, a, tr, streams)
	st := a.Stats(0)
	return replayResult{uint64(st.RequestedBytes[0].Peak), uint64(st.ReservedBytes[0].Peak), st}
}

// replayPass is one pass of replay on a, which then frees what the trace
// left live, so that another pass may follow.
func replayPass(t testing.TB, a *Allocator, tr *trace.Trace, streams [4]gpumem.Stream) {
	t.Helper()
	type live struct {
		p      gpumem.Ptr
		stream int
	}
	ptrs := make(map[uint64]live, 1024)
	for _, ev := range tr.Events {
		s := streams[ev.Stream&3]
		if ev.Alloc {
			p, err := a.Allocate(ev.Size, s)
			if err != nil {
				t.Fatalf("allocate %d: %v", ev.Size, err)
			}
			ptrs[ev.ID] = live{p, ev.Stream & 3}
			continue
		}
		l, ok := ptrs[ev.ID]
		if !ok {
			continue
		}
		delete(ptrs, ev.ID)
		if l.stream != ev.Stream&3 {
			if err := a.RecordStream(l.p, s); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Deallocate(l.p, streams[l.stream]); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range ptrs {
		if err := a.Deallocate(l.p, streams[l.stream]); err != nil {
			t.Fatal(err)
		}
	}
}

func fakeStreams() [4]gpumem.Stream {
	return [4]gpumem.Stream{{Handle: 0x10}, {Handle: 0x20}, {Handle: 0x30}, {Handle: 0x40}}
}

// Figures of the GPU anchors (peak reserved over the floor): PyTorch
// native, and the best of PyTorch expandable and the driver pool.
var anchors = map[string]struct {
	floor         uint64
	pytorch, best float64
}{
	"gpt2": {13271941480, 1.257, 1.032},
	"mix2": {7950298216, 2.144, 1.051},
	// The bundled trace; anchors from the same H200 run as the others
	// (ptreplay: PyTorch native 1,046,478,848 B reserved, as the recording
	// itself reported; expandable_segments 998,244,352 B; driver pool
	// 1,006,632,960 B).
	"pytorch-gpt": {958094408, 1.092, 1.042},
	// The traces recorded on 2026-11-24 (testdata/README.md); anchors from
	// the H200 replays of the same day (docs/gpu-results.md): PyTorch
	// native, and the best of PyTorch expandable and the driver pool.
	"unet":    {14550414906, 1.259, 1.029},
	"kvserve": {747544576, 1.327, 1.032},
	"cnn":     {5425316872, 2.751, 1.009},
	// The traces recorded on 2026-11-25, after the policies were set
	// (testdata/README.md); anchors from the H200 replays of the same day
	// (docs/gpu-results.md), to four places.
	"vit":      {8994486112, 1.2754, 1.0054},
	"moe":      {16956573928, 1.0877, 1.0141},
	"beam":     {749432168, 1.1502, 1.0634},
	"prefetch": {2595767519, 1.5698, 1.0851},
}

// aboveAnchor lists the replays that reserve more than TestReplay's bound
// (PyTorch native's footprint for the default, the best anchor's for
// expandable segments), with what they reserve on the H200 (the simulator
// gives the same bytes: TestSimMatchesGPUReplays): a change that makes one
// worse fails, and so does one that brings it under its bound, so that the
// list stays true. docs/gpu-results.md gives the mechanism and the variants
// tried.
var aboveAnchor = map[string]uint64{
	// Beam search's caches grow by a few hundred KiB a token: requests just
	// over 16 MiB, one to a 20 MiB chunk, that a chunk partly used by
	// smaller blocks cannot take, and that regular segments fit only by
	// growing, and that mapped-first placement stacks at the seams of
	// mapped runs.
	"beam/default":                 905969664, // 1.209 of the floor; PyTorch native 1.150
	"beam/expandable-mapped-first": 824180736, // 1.100; PyTorch expandable 1.063
	// Mapped-first placement with the default slack: 1.0295 of the floor
	// against PyTorch expandable's 1.0294.
	"unet/expandable-mapped-first": 14979956736,
}

func expandableOptions() Options {
	o := DefaultOptions()
	o.ExpandableSegments = true
	return o
}

// expandableHandleChunks is expandableOptions with allocations of up to n
// chunks.
func expandableHandleChunks(n int) Options {
	o := expandableOptions()
	o.ExpandableHandleChunks = n
	return o
}

// fourChunksOptions is expandable segments with physical allocations of up
// to four chunks and a slack of 2.5 % (configuration
// expandable_segments:True,expandable_handle_chunks:4,expandable_slack:0.025).
func fourChunksOptions() Options {
	o := expandableHandleChunks(4)
	o.ExpandableSlack = 0.025
	return o
}

func expandableMappedFirstOptions() Options {
	o := expandableOptions()
	o.ExpandableBestFit = false
	return o
}

func TestReplay(t *testing.T) {
	confs := []struct {
		name  string
		opts  Options
		bound func(pytorch, best float64) float64 // overhead must stay strictly below
	}{
		// PyTorch's semantics with segments placed downwards, as the
		// driver placed the anchor's: which of two equal free blocks is
		// reused depends on their addresses (addrorder_test.go).
		{"pytorch-semantics", Options{Upstream: &descendingUpstream{next: 1 << 46}}, func(p, _ float64) float64 { return p + 0.001 }},
		{"default", DefaultOptions(), func(p, _ float64) float64 { return p }},
		// Best fit with a slack of 3 % is under the best anchor on every
		// trace, beam and vit included.
		{"expandable", expandableOptions(), func(_, b float64) float64 { return b }},
		{"expandable-mapped-first", expandableMappedFirstOptions(), func(_, b float64) float64 { return b }},
		// Allocations of four chunks with a slack of 2.5 %: under the best
		// anchor on every trace (3 % puts the U-Net 0.04 % of the floor over).
		{"expandable-four-chunks", fourChunksOptions(), func(_, b float64) float64 { return b }},
	}
	names := []string{"gpt2", "mix2", "pytorch-gpt", "unet", "kvserve", "cnn", "vit", "moe", "beam", "prefetch"}
	if raceOn {
		names, confs = names[1:2], confs[1:2] // the race run checks the default configuration on one trace
	}
	for _, name := range names {
		tr := loadTrace(t, name)
		an := anchors[name]
		for _, c := range confs {
			b, streams := replayBackend(t)
			r := replay(t, b, c.opts, tr, streams)
			if r.peakRequested != an.floor {
				t.Errorf("%s %s: peak requested %d, want the floor %d", name, c.name, r.peakRequested, an.floor)
			}
			over := float64(r.peakReserved) / float64(r.peakRequested)
			t.Logf("%s %-24s peak_reserved %d overhead %.4f (anchors: pytorch %.3f, best %.3f) device_allocs %d device_frees %d cross_stream_reuses %d",
				name, c.name, r.peakReserved, over, an.pytorch, an.best, r.stats.NumDeviceAlloc, r.stats.NumDeviceFree, r.stats.CrossStreamReuses)
			if pinned, ok := aboveAnchor[name+"/"+c.name]; ok {
				if r.peakReserved != pinned {
					t.Errorf("%s %s: peak reserved %d, pinned at %d (above its anchor): update aboveAnchor", name, c.name, r.peakReserved, pinned)
				}
				if over < c.bound(an.pytorch, an.best) {
					t.Errorf("%s %s: overhead %.4f, now under its bound: take it off aboveAnchor", name, c.name, over)
				}
				continue
			}
			if bound := c.bound(an.pytorch, an.best); over >= bound {
				t.Errorf("%s %s: overhead %.4f, want below %.4f", name, c.name, over, bound)
			}
		}
	}
}

// TestCrossStreamReuseSaving measures what cross-stream reuse saves on the
// two traces with a side stream: peak reserved with and without it, under
// PyTorch's semantics and under the defaults. It pins the savings measured
// when the defaults were chosen (mix2 under PyTorch's semantics; the
// bundled trace under the defaults, where it is what keeps the footprint
// below PyTorch's) and logs the rest: under the defaults on mix2 it costs
// 0.8 % (8,894,021,632 B against 8,824,815,616 B), a reuse that a later
// growth cannot undo.
func TestCrossStreamReuseSaving(t *testing.T) {
	if raceOn {
		t.Skip("measured without the race detector (TestReplay covers the path under it)")
	}
	for _, c := range []struct {
		trace string
		base  Options
		saves bool
	}{
		{"mix2", Options{}, true},
		{"mix2", DefaultOptions(), false},
		{"pytorch-gpt", Options{}, false},
		{"pytorch-gpt", DefaultOptions(), true},
	} {
		tr := loadTrace(t, c.trace)
		var peaks [2]uint64
		for i, on := range []bool{false, true} {
			o := c.base
			o.CrossStreamReuse = on
			b, streams := replayBackend(t)
			r := replay(t, b, o, tr, streams)
			t.Logf("%s release_before_grow=%v cross_stream_reuse=%v: peak reserved %d (%.4f of the floor), %d reuses",
				c.trace, o.ReleaseBeforeGrow, on, r.peakReserved, float64(r.peakReserved)/float64(r.peakRequested), r.stats.CrossStreamReuses)
			peaks[i] = r.peakReserved
			if on && r.stats.CrossStreamReuses == 0 {
				t.Errorf("%s: no cross-stream reuse on a two-stream trace", c.trace)
			}
		}
		if c.saves && peaks[1] >= peaks[0] {
			t.Errorf("%s release_before_grow=%v: cross-stream reuse saved nothing: %d >= %d", c.trace, c.base.ReleaseBeforeGrow, peaks[1], peaks[0])
		}
	}
}

// ExpandableSlack trades moves for footprint: on the U-Net, mapping new
// memory while reserved memory stays within the slack over the allocated
// high-water mark makes fewer chunk moves than holding reserved memory at
// its high-water mark, keeps the footprint within the slack of the floor,
// and, placement being PyTorch's best fit, never above PyTorch's
// expandable segments.
func TestExpandableSlackSavesMoves(t *testing.T) {
	if raceOn {
		t.Skip("three replays of a recorded trace, checked without the race detector")
	}
	tr := loadTrace(t, "unet")
	none := expandableOptions()
	none.ExpandableSlack = 0
	r := replayEach(t, tr, Options{ExpandableSegments: true}, none, expandableOptions())
	pytorch, tight, slack := r[0], r[1], r[2]
	moves := func(x replayResult) int64 { return x.stats.NumDeviceAlloc }
	if moves(slack) >= moves(tight) {
		t.Errorf("chunks mapped: %d with a slack of %v, %d with none; want fewer", moves(slack), DefaultExpandableSlack, moves(tight))
	}
	if limit := uint64(float64(slack.peakRequested) * (1 + DefaultExpandableSlack)); slack.peakReserved > limit {
		t.Errorf("peak reserved %d with the slack, above %d (the slack over the floor %d)", slack.peakReserved, limit, slack.peakRequested)
	}
	if slack.peakReserved > pytorch.peakReserved || tight.peakReserved > slack.peakReserved {
		t.Errorf("peak reserved: %d with no slack, %d with the slack, %d for PyTorch's expandable segments; want them in that order",
			tight.peakReserved, slack.peakReserved, pytorch.peakReserved)
	}
}
