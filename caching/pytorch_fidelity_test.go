package caching

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/trace"
)

// phaseAnchor is one line of testdata/phase/anchors.jsonl: a workload's
// floor (peak of live requested bytes) and the peak reserved bytes of
// PyTorch's allocator, natively and with expandable segments, and of the
// driver's stream-ordered pool, measured on an H200 by replaying the
// workload (testdata/README.md says how).
type phaseAnchor struct {
	Trace             string `json:"trace"`
	PeakRequested     uint64 `json:"peak_requested"`
	PyTorch           uint64 `json:"pytorch"`
	PyTorchExpandable uint64 `json:"pytorch_expandable"`
	DriverPool        uint64 `json:"driver_pool"`
}

func loadPhaseAnchors(t *testing.T) []phaseAnchor {
	return readPhaseAnchors(t, filepath.Join("..", "testdata", "phase", "anchors.jsonl"))
}

// phaseTrace reads the workload name of testdata/phase.
func phaseTrace(t testing.TB, name string) *trace.Trace {
	t.Helper()
	tr, err := trace.ReadFile(filepath.Join("..", "testdata", "phase", name+".trace.gz"))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// replayEach replays tr once under each of opts, each on a fresh simulator.
func replayEach(t testing.TB, tr *trace.Trace, opts ...Options) []replayResult {
	t.Helper()
	out := make([]replayResult, len(opts))
	for i, o := range opts {
		b, streams := replayBackend(t)
		out[i] = replay(t, b, o, tr, streams)
	}
	return out
}

// readPhaseAnchors reads a file of anchors in anchors.jsonl's format.
func readPhaseAnchors(t testing.TB, path string) []phaseAnchor {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []phaseAnchor
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var a phaseAnchor
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("%s: %q: %v", path, sc.Text(), err)
		}
		out = append(out, a)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("%s lists no workload", path)
	}
	return out
}

// The zero Options are PyTorch's caching allocator, and the zero Options
// with ExpandableSegments PyTorch's expandable segments: replayed on the
// simulator, fifty-four workloads that no policy here was tuned on reserve
// at their peak exactly the bytes that PyTorch 2.11's own allocator reserved
// for them on an H200. So the simulator measures a policy against two of
// the three anchors on any trace, with no GPU; the driver pool's placement
// is the driver's own and is not modelled. The project's configurations are
// held to what they do now: expandable segments under both PyTorch's native
// footprint and the driver pool's on every workload; with physical
// allocations of four chunks, under PyTorch's native footprint on every
// workload and the driver pool's on all but those of fourChunksAbovePool;
// the default under PyTorch's native footprint on all but the workloads of
// defaultAbovePyTorch.
func TestPyTorchFootprintsOnPhaseWorkloads(t *testing.T) {
	anchors := loadPhaseAnchors(t)
	if raceOn {
		anchors = anchors[:1] // the race run replays one workload
	}
	for _, an := range anchors {
		runs := replayEach(t, phaseTrace(t, an.Trace), sweepOptions()...)
		for i, c := range []struct {
			name string
			want uint64 // exact peak reserved, if not 0
			max  uint64 // bound on peak reserved otherwise
		}{
			{"pytorch", an.PyTorch, 0},
			{"pytorch expandable", an.PyTorchExpandable, 0},
			{"default", 0, defaultBound(an)},
			{"expandable", 0, min(an.PyTorch, an.DriverPool)},
			{"expandable four chunks a handle", 0, fourChunksBound(an)},
		} {
			r := runs[i]
			if r.peakRequested != an.PeakRequested {
				t.Errorf("%s %s: peak requested %d, want the floor %d", an.Trace, c.name, r.peakRequested, an.PeakRequested)
			}
			t.Logf("%s %-18s peak reserved %d (%.4f of the floor; PyTorch %.4f, expandable %.4f, driver pool %.4f)", an.Trace, c.name,
				r.peakReserved, ratio(r.peakReserved, an.PeakRequested), ratio(an.PyTorch, an.PeakRequested),
				ratio(an.PyTorchExpandable, an.PeakRequested), ratio(an.DriverPool, an.PeakRequested))
			switch {
			case c.want != 0 && r.peakReserved != c.want:
				t.Errorf("%s %s: peak reserved %d on the simulator, %d on the H200", an.Trace, c.name, r.peakReserved, c.want)
			case c.max != 0 && r.peakReserved > c.max:
				t.Errorf("%s %s: peak reserved %d, above %d", an.Trace, c.name, r.peakReserved, c.max)
			case c.name == "default" && defaultAbovePyTorch[an.Trace] != 0 && r.peakReserved <= an.PyTorch:
				t.Errorf("%s default: peak reserved %d, now at or under PyTorch's %d: take it out of defaultAbovePyTorch", an.Trace, r.peakReserved, an.PyTorch)
			case i == 4 && fourChunksAbovePool[an.Trace] != 0 && r.peakReserved <= min(an.PyTorch, an.DriverPool):
				t.Errorf("%s %s: peak reserved %d, now at or under the driver pool's %d: take it out of fourChunksAbovePool", an.Trace, c.name, r.peakReserved, an.DriverPool)
			}
		}
	}
}

func ratio(a, b uint64) float64 { return float64(a) / float64(b) }

// sweepOptions are the configurations the phase workloads are replayed
// under, in this order: PyTorch's native allocator, PyTorch's expandable
// segments, the project's default and its expandable segments.
func sweepOptions() []Options {
	return []Options{{}, {ExpandableSegments: true}, DefaultOptions(), expandableOptions(), fourChunksOptions()}
}

// defaultAbovePyTorch lists the workloads on which the default
// configuration reserves more than PyTorch's native allocator, with what it
// reserves there on the H200 (docs/gpu-results.md), its bound in the test:
// a change that makes it worse fails, and so does one that brings it under
// PyTorch's, so that the list stays true. Regular segments cannot be
// defragmented: on r107 the larger segments and release before growth
// leave the 1 GiB block of each pass no free segment to reuse, and each
// pass makes a new one.
var defaultAbovePyTorch = map[string]uint64{
	"r107": 3932160000, // 1.536 of the floor against PyTorch's 1.470
}

// fourChunksAbovePool lists the workloads on which expandable segments
// with physical allocations of four chunks (Options.ExpandableHandleChunks,
// fourChunksOptions) reserve more than the driver pool, with what they reserve on the
// simulator, their bound in the test. An allocation is unmapped whole:
// where a workload changes phase, a long-lived block of the new phase that
// lands on part of a free allocation of the old one keeps all of it mapped
// (caching/doc.go). With one allocation a chunk none of the fifty-four is
// above.
var fourChunksAbovePool = map[string]uint64{
	"r108": 3166699520, // driver pool 3087007744
	"r118": 4005560320, // driver pool 3992977408
	"r119": 2663383040, // driver pool 2650800128
	"r121": 2579496960, // driver pool 2550136832
	"r203": 3145728000, // driver pool 3120562176
	"r400": 3942645760, // driver pool 3825205248
	"r411": 2831155200, // driver pool 2751463424
}

// fourChunksBound is the most expandable segments with allocations of four
// chunks may reserve on a.
func fourChunksBound(a phaseAnchor) uint64 {
	if b, ok := fourChunksAbovePool[a.Trace]; ok {
		return b
	}
	return min(a.PyTorch, a.DriverPool)
}

// defaultBound is the most the default configuration may reserve on a.
func defaultBound(a phaseAnchor) uint64 {
	if b, ok := defaultAbovePyTorch[a.Trace]; ok {
		return b
	}
	return a.PyTorch
}

// BenchmarkAgainstPyTorch replays every trace (*.trace.gz) of the folder
// named by GPUMEM_SWEEP_DIR through PyTorch's two configurations and the
// project's two on the simulator, which reproduces PyTorch's footprints
// (above), and reports on how many the project's exceed PyTorch's, by how
// much at worst, and their device calls against PyTorch's: a policy's check
// on as many unseen workloads as one generates, with no GPU. With
// GPUMEM_SWEEP_ANCHORS naming a file of anchors measured on a GPU (the
// format of testdata/phase/anchors.jsonl), the traces it lists are also held
// to the driver pool's footprint, the anchor the simulator does not model
// (expandable-above-best-% counts those above the best of the three), and
// PyTorch's footprints on the simulator must be the file's, to the byte.
// testdata/phase/generated-anchors.jsonl has the H200's for 400 workloads
// that scripts/phase_traces.py writes again on any machine:
//
//	python3 scripts/phase_traces.py 200 600 DIR
//	for f in DIR/*.trace; do scripts/gpu/repeat_trace.py 3 $f DIR/$(basename $f).gz; done
//	GPUMEM_SWEEP_DIR=DIR GPUMEM_SWEEP_ANCHORS=$PWD/testdata/phase/generated-anchors.jsonl \
//	    go test ./caching -run '^$' -bench AgainstPyTorch -benchtime 1x
func BenchmarkAgainstPyTorch(b *testing.B) {
	dir := os.Getenv("GPUMEM_SWEEP_DIR")
	if dir == "" {
		b.Skip("GPUMEM_SWEEP_DIR names no folder of traces")
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.trace.gz"))
	if err != nil || len(files) == 0 {
		b.Fatalf("no *.trace.gz in %s (%v)", dir, err)
	}
	measured := map[string]phaseAnchor{}
	if path := os.Getenv("GPUMEM_SWEEP_ANCHORS"); path != "" {
		for _, a := range readPhaseAnchors(b, path) {
			measured[a.Trace] = a
		}
	}
	type side struct {
		name    string
		against int // index of the PyTorch configuration it is held to
		above   int
		under   int // workloads where PyTorch's configuration reserves more
		worst   float64
		calls   int64
		ptCalls int64
		// against all three anchors, on the traces measured on a GPU
		aboveBest int
		worstBest float64
	}
	sides := []*side{ // as sweepOptions
		{name: "pytorch"},
		{name: "pytorch-expandable"},
		{name: "default", against: 0},
		{name: "expandable", against: 1},
		{name: "expandable-four-chunks", against: 1},
	}
	checked := 0
	for range b.N {
		for _, f := range files {
			tr, err := trace.ReadFile(f)
			if err != nil {
				b.Fatal(err)
			}
			var peak [5]uint64
			var calls [5]int64
			for i, r := range replayEach(b, tr, sweepOptions()...) {
				peak[i], calls[i] = r.peakReserved, r.stats.NumDeviceAlloc+r.stats.NumDeviceFree
			}
			an, gpu := measured[strings.TrimSuffix(strings.TrimSuffix(filepath.Base(f), ".gz"), ".trace")]
			if gpu {
				checked++
				if peak[0] != an.PyTorch || peak[1] != an.PyTorchExpandable {
					b.Errorf("%s: PyTorch's footprints %d and %d on the simulator, %d and %d measured", f, peak[0], peak[1], an.PyTorch, an.PyTorchExpandable)
				}
			}
			for i, s := range sides[2:] {
				i += 2
				rel := ratio(peak[i], peak[s.against])
				if rel > 1 {
					s.above++
				} else if rel < 1 {
					s.under++
				}
				s.worst = max(s.worst, rel)
				s.calls += calls[i]
				s.ptCalls += calls[s.against]
				if gpu {
					best := min(an.PyTorch, an.PyTorchExpandable, an.DriverPool)
					if peak[i] > best {
						s.aboveBest++
					}
					s.worstBest = max(s.worstBest, ratio(peak[i], best))
				}
			}
		}
	}
	n := float64(len(files) * b.N)
	for _, s := range sides[2:] {
		b.ReportMetric(float64(s.above)/n*100, s.name+"-above-%")
		b.ReportMetric(float64(s.under)/n*100, s.name+"-under-%")
		b.ReportMetric(s.worst, s.name+"-worst-ratio")
		b.ReportMetric(float64(s.calls)/float64(max(s.ptCalls, 1)), s.name+"-calls-ratio")
		if checked > 0 {
			b.ReportMetric(float64(s.aboveBest)/float64(checked)*100, s.name+"-above-best-%")
			b.ReportMetric(s.worstBest, s.name+"-worst-of-best")
		}
	}
	if checked > 0 {
		b.ReportMetric(float64(checked)/float64(b.N), "measured-traces")
	}
}
