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
	path := filepath.Join(traceDir, name+".trace.gz")
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
	st := a.Stats(0)
	return replayResult{uint64(st.RequestedBytes[0].Peak), uint64(st.ReservedBytes[0].Peak), st}
}

func fakeStreams() [4]gpumem.Stream {
	return [4]gpumem.Stream{{Handle: 0x10}, {Handle: 0x20}, {Handle: 0x30}, {Handle: 0x40}}
}

func TestReplayFake(t *testing.T) {
	confs := []struct {
		name string
		opts Options
	}{
		{"pytorch", Options{}},
		{"default", DefaultOptions()},
		{"expandable-pytorch", Options{ExpandableSegments: true}},
		{"expandable", func() Options { o := DefaultOptions(); o.ExpandableSegments = true; return o }()},
		{"expandable-2m", func() Options {
			o := DefaultOptions()
			o.ExpandableSegments = true
			o.ExpandableLargeChunk = 2 << 20
			return o
		}()},
	}
	for _, name := range []string{"gpt2", "mix2"} {
		tr := loadTrace(t, name)
		for _, c := range confs {
			r := replay(t, newFake(140<<30), c.opts, tr, fakeStreams())
			t.Logf("%s %-20s peak_requested %d peak_reserved %d overhead %.4f device_allocs %d frees %d xs %d",
				name, c.name, r.peakRequested, r.peakReserved, float64(r.peakReserved)/float64(r.peakRequested),
				r.stats.NumDeviceAlloc, r.stats.NumDeviceFree, r.stats.CrossStreamReuses)
		}
	}
}
