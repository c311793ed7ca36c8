package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/trace/torchsnapshot"
)

// --snapshot writes the replay's snapshot in PyTorch's layout: the trace's
// allocations and frees in device_traces, read back by torchsnapshot.
func TestReplayWritesSnapshot(t *testing.T) {
	p := writeTrace(t, "x.trace", tinyTrace)
	out := filepath.Join(t.TempDir(), "run.pickle")
	code, _, e := runCmd(t, "replay", "--backend", "sim", "--allocator", "caching", "--snapshot", out, p)
	if code != exitOK || !strings.Contains(e, "wrote "+out) {
		t.Fatalf("exit %d: %s", code, e)
	}
	s, err := torchsnapshot.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if s.Segments == 0 || len(s.Devices) != 1 {
		t.Fatalf("%d segments, %d devices", s.Segments, len(s.Devices))
	}
	tr, rep, err := s.Trace(0, torchsnapshot.Options{Name: "back"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Allocations != 3 || rep.Frees != 2 || rep.LiveAtEnd != 1 || rep.PeakRequested != 4000 || len(tr.Events) != 5 {
		t.Errorf("the snapshot's history converts to %+v", rep)
	}
}

// With several replays, each writes its own file; a path that cannot be
// written fails before any replay.
func TestReplayWritesSnapshotPaths(t *testing.T) {
	p := writeTrace(t, "x.trace", tinyTrace)
	dir := t.TempDir()
	out := filepath.Join(dir, "run.pickle")
	code, _, e := runCmd(t, "replay", "--backend", "sim", "--conf", "backend:caching", "--snapshot", out, p, p)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, e)
	}
	if _, err := os.Stat(filepath.Join(dir, "run.x.caching.pickle")); err != nil {
		t.Errorf("no per-replay file: %v (%s)", err, e)
	}
	// The same trace name twice: the second replay's file is numbered,
	// not written over the first's.
	if _, err := os.Stat(filepath.Join(dir, "run.x.caching.2.pickle")); err != nil {
		t.Errorf("the second replay of a trace of the same name: %v (%s)", err, e)
	}
	for _, bad := range []string{filepath.Join(dir, "missing", "x.pickle"), dir} {
		code, o, e := runCmd(t, "replay", "--backend", "sim", "--allocator", "caching", "--snapshot", bad, p)
		if code != exitUsage || !strings.Contains(e, "--snapshot") || o != "" {
			t.Errorf("--snapshot %s: exit %d, %q, %q", bad, code, o, e)
		}
	}
}

// The recorded history keeps at most the last snapshotHistoryCap entries,
// as documented (docs/cli.md: at most the last 1,000,000).
func TestReplaySnapshotHistoryCap(t *testing.T) {
	old := snapshotHistoryCap
	snapshotHistoryCap = 4
	t.Cleanup(func() { snapshotHistoryCap = old })
	p := writeTrace(t, "x.trace", tinyTrace) // 3 allocations, 2 frees: 7 entries
	out := filepath.Join(t.TempDir(), "run.pickle")
	code, _, e := runCmd(t, "replay", "--backend", "sim", "--allocator", "caching", "--snapshot", out, p)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, e)
	}
	s, err := torchsnapshot.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	h := s.Devices[0]
	if len(h) != 4 {
		t.Fatalf("%d history entries, want the last 4", len(h))
	}
	// The trace ends with the free of allocation 2, of 3000 bytes.
	if h[len(h)-1].Action != "free_completed" || h[len(h)-1].Size != 3000 {
		t.Errorf("the history does not end with the trace's last free: %+v", h)
	}
}
