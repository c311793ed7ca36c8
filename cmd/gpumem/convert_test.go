package main

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/trace"
)

// snapshotPath is a snapshot recorded on an H200 by PyTorch 2.11 (8
// training steps of a small GPT with a side stream).
var snapshotPath = filepath.Join("..", "..", "trace", "torchsnapshot", "testdata", "train.pickle.gz")

// Figures of train.pickle.gz computed in Python: allocs and frees are
// Counter(e['action'] for e in s['device_traces'][0]) ['alloc'] and
// ['free_requested']; the peak as in trace/torchsnapshot's tests.
const (
	trainAllocs = 3084
	trainFrees  = 2922
	trainPeak   = 958094408
)

func TestConvertToFile(t *testing.T) {
	for _, name := range []string{"train.trace.gz", "train.trace"} {
		out := filepath.Join(t.TempDir(), name)
		code, o, e := runCmd(t, "convert", snapshotPath, "-o", out)
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, e)
		}
		if o != "" {
			t.Errorf("stdout not empty with -o: %q", o)
		}
		for _, want := range []string{"3084 allocations", "2 streams", "peak requested 913.71 MiB", "free_completed 2920"} {
			if !strings.Contains(e, want) {
				t.Errorf("report %q lacks %q", e, want)
			}
		}
		raw, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if gz := len(raw) > 2 && raw[0] == 0x1f && raw[1] == 0x8b; gz != strings.HasSuffix(name, ".gz") {
			t.Errorf("%s: gzip %v", name, gz)
		}
		tr, err := trace.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		st := tr.Stats()
		if st.Pairs != trainAllocs || st.Frees != trainFrees || st.PeakRequested != trainPeak || len(st.Streams) != 2 {
			t.Errorf("%s: %+v", name, st)
		}
	}
}

func TestConvertToStdout(t *testing.T) {
	code, o, e := runCmd(t, "convert", "--device", "0", snapshotPath)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, e)
	}
	tr, err := trace.Read(strings.NewReader(o))
	if err != nil {
		t.Fatal(err)
	}
	if st := tr.Stats(); st.Pairs != trainAllocs || st.Frees != trainFrees {
		t.Errorf("%+v", st)
	}
}

func TestConvertErrors(t *testing.T) {
	text := writeTrace(t, "a.trace", tinyTrace)
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"convert"}, exitUsage, "one snapshot file"},
		{[]string{"convert", snapshotPath, snapshotPath}, exitUsage, "one snapshot file"},
		{[]string{"convert", "--device", "-2", snapshotPath}, exitUsage, "--device"},
		{[]string{"convert", "--device", "3", snapshotPath}, exitFail, "device 3"},
		{[]string{"convert", text}, exitFail, "not a PyTorch memory snapshot"},
		{[]string{"convert", filepath.Join(t.TempDir(), "missing.pickle")}, exitFail, "missing.pickle"},
		{[]string{"convert", snapshotPath, "-o", filepath.Join(t.TempDir(), "no", "such", "dir.trace")}, exitFail, "dir.trace"},
	} {
		code, _, e := runCmd(t, c.args...)
		if code != c.code || !strings.Contains(e, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, e, c.code, c.msg)
		}
	}
}

func TestReplaySnapshot(t *testing.T) {
	g := newFakeGPU(1, 1<<40)
	withFake(t, g)
	// The same snapshot under a name that does not say what it is: told
	// apart by its content.
	raw, err := os.ReadFile(snapshotPath)
	if err != nil {
		t.Fatal(err)
	}
	anon := filepath.Join(t.TempDir(), "run.bin")
	if err := os.WriteFile(anon, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	code, o, e := runCmd(t, "replay", "--backend", "sim", "--allocator", "test-pass", "--json", snapshotPath, anon)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, e)
	}
	lines := decodeLines(t, o)
	if len(lines) != 2 {
		t.Fatalf("%d lines: %s", len(lines), o)
	}
	for i, name := range []string{"train", "run.bin"} {
		if lines[i]["trace"] != name || lines[i]["pairs"] != float64(trainAllocs) || lines[i]["peak_requested"] != float64(trainPeak) {
			t.Errorf("line %d: %v", i, lines[i])
		}
	}
	if strings.Count(e, "PyTorch snapshot") != 2 {
		t.Errorf("stderr lacks a conversion report per snapshot: %q", e)
	}
}

func TestIsSnapshotFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var gzTrace bytes.Buffer
	zw := gzip.NewWriter(&gzTrace)
	zw.Write([]byte(tinyTrace))
	zw.Close()
	for _, c := range []struct {
		path string
		want bool
	}{
		{write("x.trace", []byte(tinyTrace)), false},
		{write("x.trace.gz", gzTrace.Bytes()), false},
		{write("x.gz", gzTrace.Bytes()), false},
		{write("y.pickle", []byte(tinyTrace)), true}, // the suffix says so (and reading it fails clearly)
		{write("pickled", []byte{0x80, 4, 'N', '.'}), true},
		{snapshotPath, true},
	} {
		if got := isSnapshotFile(c.path); got != c.want {
			t.Errorf("isSnapshotFile(%s) = %v", filepath.Base(c.path), got)
		}
	}
}
