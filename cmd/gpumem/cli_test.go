package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/fakegpu"
	"github.com/gpumem/gpumem/replay"
)

// firstLine is s up to its first newline.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// Hostile command lines and environments: each exits with the documented
// status and says what is wrong in the first (and, for usage errors, only)
// line of stderr, never with the flag package's help dump.
func TestHostileCLI(t *testing.T) {
	withFake(t, newFakeGPU(1, 1<<40))
	tr := writeTrace(t, "x.trace", tinyTrace)
	dir := t.TempDir()
	for _, tc := range []struct {
		name  string
		args  []string
		env   map[string]string
		code  int
		first string // a substring of stderr's first line
	}{
		{"unknown command", []string{"frobnicate"}, nil, exitUsage, `unknown command "frobnicate"`},
		{"unknown flag", []string{"replay", "--bogus"}, nil, exitUsage, "gpumem replay: flag provided but not defined: --bogus"},
		{"single-dash unknown", []string{"info", "-nope"}, nil, exitUsage, "not defined: --nope"},
		{"missing value", []string{"replay", "--conf"}, nil, exitUsage, "flag needs an argument: --conf"},
		{"bad bool", []string{"replay", "--json=maybe"}, nil, exitUsage, "--json"},
		{"bad capacity flag", []string{"replay", "--sim-capacity", "lots"}, nil, exitUsage, `"lots" is not a byte count`},
		{"zero capacity", []string{"replay", "--sim-capacity", "0"}, nil, exitUsage, "--sim-capacity must be above 0"},
		{"capacity over the simulator's", []string{"replay", "--backend", "sim", "--sim-capacity", "5TiB", tr}, nil, exitUsage, "--sim-capacity is 5.00 TiB, over the simulator's limit of 4.00 TiB"},
		{"capacity env over the simulator's", []string{"info", "--backend", "sim"}, map[string]string{"GPUMEM_SIM_CAPACITY": "8TiB"}, exitUsage, "GPUMEM_SIM_CAPACITY is 8.00 TiB, over"},
		{"bad capacity env", []string{"replay", tr}, map[string]string{"GPUMEM_SIM_CAPACITY": "plenty"}, exitUsage, "GPUMEM_SIM_CAPACITY"},
		{"zero capacity env", []string{"replay", tr}, map[string]string{"GPUMEM_SIM_CAPACITY": "0GiB"}, exitUsage, "GPUMEM_SIM_CAPACITY must be above 0"},
		{"bad devices flag", []string{"replay", "--sim-devices", "-1"}, nil, exitUsage, "--sim-devices must be 1..64"},
		{"bad devices env", []string{"info", "--backend", "sim"}, map[string]string{"GPUMEM_SIM_DEVICES": "many"}, exitUsage, "GPUMEM_SIM_DEVICES"},
		{"too many devices env", []string{"replay", tr}, map[string]string{"GPUMEM_SIM_DEVICES": "65"}, exitUsage, "GPUMEM_SIM_DEVICES must be 1..64"},
		{"bad backend flag", []string{"replay", "--backend", "tpu", tr}, nil, exitUsage, `unknown backend "tpu"`},
		{"bad backend env", []string{"replay", tr}, map[string]string{"GPUMEM_BACKEND": "bogus"}, exitUsage, "GPUMEM_BACKEND"},
		{"bad backend env info", []string{"info"}, map[string]string{"GPUMEM_BACKEND": "bogus"}, exitUsage, "GPUMEM_BACKEND"},
		{"bad conf flag", []string{"replay", "--conf", "garbage:::", tr}, nil, exitUsage, "--conf"},
		{"bad conf env", []string{"replay", tr}, map[string]string{"GPUMEM_ALLOC_CONF": "nonsense:1"}, exitUsage, "GPUMEM_ALLOC_CONF"},
		{"unknown allocator", []string{"replay", "--allocator", "nope", tr}, nil, exitUsage, `unknown allocator "nope"`},
		{"html into a missing dir", []string{"replay", "--html", filepath.Join(dir, "no", "such", "x.html"), tr}, nil, exitUsage, "--html"},
		{"html is a directory", []string{"replay", "--html", dir, tr}, nil, exitUsage, "is a directory"},
		{"stdin twice", []string{"replay", "-", "-"}, nil, exitUsage, "standard input (-) can be named once"},
		{"missing trace", []string{"replay", "--backend", "sim", "--allocator", "test-pass", filepath.Join(dir, "absent.trace")}, nil, exitFail, "no such file"},
		{"convert nothing", []string{"convert"}, nil, exitUsage, "convert takes one snapshot file"},
		{"version argument", []string{"version", "extra"}, nil, exitUsage, "version takes no arguments"},
		{"info argument", []string{"info", "extra"}, nil, exitUsage, "info takes no arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"GPUMEM_BACKEND", "GPUMEM_SIM_CAPACITY", "GPUMEM_SIM_DEVICES", "GPUMEM_ALLOC_CONF"} {
				t.Setenv(k, tc.env[k])
			}
			code, _, e := runCmd(t, tc.args...)
			if code != tc.code || !strings.Contains(firstLine(e), tc.first) {
				t.Fatalf("exit %d (want %d); stderr's first line %q, want it to contain %q\nstderr:\n%s", code, tc.code, firstLine(e), tc.first, e)
			}
			if tc.code == exitUsage && (strings.Contains(e, "\n  -") || strings.Contains(e, "Usage of")) {
				t.Errorf("usage error dumps the flags:\n%s", e)
			}
		})
	}
}

// --help and -h print every flag, spelled --flag, on stdout, with exit 0.
func TestHelpEveryCommand(t *testing.T) {
	for _, cmd := range []string{"info", "symbols", "replay", "convert", "compile", "version"} {
		for _, h := range []string{"--help", "-h"} {
			code, o, e := runCmd(t, cmd, h)
			if code != exitOK || e != "" || !strings.HasPrefix(o, "usage: gpumem "+cmd) {
				t.Fatalf("%s %s: exit %d, stdout %q, stderr %q", cmd, h, code, o, e)
			}
			for _, line := range strings.Split(o, "\n") {
				if strings.HasPrefix(line, "  -") && !strings.HasPrefix(line, "  --") && !strings.HasPrefix(line, "  -o") {
					t.Errorf("%s %s: flag written Go's way: %q", cmd, h, line)
				}
			}
		}
	}
	_, o, _ := runCmd(t, "replay", "--help")
	for _, f := range []string{"--sim-capacity", "--sim-devices", "--html FILE", "--profile", "--verbose", "GPUMEM_SIM_CAPACITY"} {
		if !strings.Contains(o, f) {
			t.Errorf("replay --help lacks %s:\n%s", f, o)
		}
	}
}

func TestVersionCommand(t *testing.T) {
	code, o, _ := runCmd(t, "version")
	if code != exitOK || !strings.HasPrefix(o, "gpumem ") || !strings.Contains(o, "go1") {
		t.Fatalf("exit %d: %q", code, o)
	}
	old := readBuildInfo
	defer func() { readBuildInfo = old }()
	readBuildInfo = func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Path: "github.com/gpumem/gpumem", Version: "v1.2.3"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2025-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}}, true
	}
	if _, o, _ := runCmd(t, "version"); !strings.HasPrefix(o, "gpumem v1.2.3 (rev 0123456789ab, 2025-01-02T03:04:05Z, modified) go1.99") {
		t.Errorf("%q", o)
	}
	if _, o, _ := runCmd(t, "version", "--json"); !strings.Contains(o, `"revision": "0123456789abcdef0123"`) || !strings.Contains(o, `"modified": true`) {
		t.Errorf("%q", o)
	}
	readBuildInfo = func() (*debug.BuildInfo, bool) { return nil, false }
	if _, o, _ := runCmd(t, "version"); !strings.HasPrefix(o, "gpumem (devel) (no VCS information)") {
		t.Errorf("without build information: %q", o)
	}
}

// The embedded copy of the bundled trace is testdata's file.
func TestBundledTraceIsTestdata(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("..", "..", bundledTraceName))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bundledTrace, want) {
		t.Fatalf("cmd/gpumem/bundled/pytorch-gpt.trace.gz differs from %s: copy it again", bundledTraceName)
	}
}

func TestReplayStdin(t *testing.T) {
	withFake(t, newFakeGPU(1, 1<<40))
	old := stdin
	defer func() { stdin = old }()
	stdin = strings.NewReader(tinyTrace)
	code, o, e := runCmd(t, "replay", "--backend", "sim", "--allocator", "test-pass", "--json", "-")
	if l := decodeLines(t, o); code != exitOK || len(l) != 1 || l[0]["trace"] != "stdin" || l[0]["pairs"] != float64(3) {
		t.Fatalf("exit %d, %s, %s", code, o, e)
	}
	stdin = strings.NewReader("")
	if code, _, e := runCmd(t, "replay", "--backend", "sim", "--allocator", "test-pass", "-"); code != exitFail || !strings.Contains(e, "standard input is empty") {
		t.Fatalf("empty stdin: exit %d, %s", code, e)
	}
	snap, err := os.ReadFile(snapshotPath)
	if err != nil {
		t.Fatal(err)
	}
	stdin = bytes.NewReader(snap)
	code, o, e = runCmd(t, "convert", "-")
	if code != exitOK || !strings.HasPrefix(o, "a ") && !strings.Contains(o, "\na ") || !strings.Contains(e, "stdin: PyTorch snapshot") {
		t.Fatalf("convert -: exit %d, stderr %s", code, e)
	}
}

// zeros is a standard input of 256 MiB of zero bytes, counting what is
// read of it.
type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n >= 256<<20 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), 256<<20-z.n)]
	clear(p)
	z.n += int64(len(p))
	return len(p), nil
}

// TestStdinStreamed checks that "-" is read as a file is, streamed: a long
// input with no line break fails at the trace reader's line limit,
// having read a bounded amount, not all of it first.
func TestStdinStreamed(t *testing.T) {
	withFake(t, newFakeGPU(1, 1<<40))
	old := stdin
	defer func() { stdin = old }()
	z := &zeros{}
	stdin = z
	code, _, e := runCmd(t, "replay", "--backend", "sim", "--allocator", "test-pass", "-")
	if code != exitFail || !strings.Contains(e, "stdin") {
		t.Fatalf("256 MiB of zeros on stdin: exit %d, %s", code, e)
	}
	if z.n > 64<<20 {
		t.Errorf("read %d bytes of stdin before failing, want a bounded amount", z.n)
	}
}

// The simulator's settings come from the flags, else the environment, in
// the same syntax.
func TestSimSettingsFromEnv(t *testing.T) {
	g := newFakeGPU(2, 1<<40)
	withFake(t, g)
	p := writeTrace(t, "x.trace", tinyTrace)
	t.Setenv("GPUMEM_SIM_CAPACITY", "12GiB")
	t.Setenv("GPUMEM_SIM_DEVICES", "2")
	if code, _, e := runCmd(t, "replay", "--backend", "sim", "--allocator", "test-pass", p); code != exitOK || !asked(g, 2, 12<<30) {
		n, c := g.Asked()
		t.Fatalf("exit %d, asked %d x %d: %s", code, n, c, e)
	} else if !strings.Contains(e, "2 devices of 12.00 GiB") {
		t.Errorf("stderr %q", e)
	}
	if code, _, e := runCmd(t, "replay", "--backend", "sim", "--allocator", "test-pass", "--sim-capacity", "1.5 GiB", "--sim-devices", "1", p); code != exitOK || !asked(g, 1, 3<<29) {
		n, c := g.Asked()
		t.Fatalf("flags over env: exit %d, asked %d x %d: %s", code, n, c, e)
	} else if !strings.Contains(e, "1 device of 1.50 GiB") {
		t.Errorf("stderr %q", e)
	}
}

// Falling back to the simulator takes one line; --verbose adds the detail.
func TestReplayFallbackOneLine(t *testing.T) {
	if b, err := gpumem.Open(gpumem.Options{Backend: "auto"}); err == nil {
		b.Close()
		t.Skip("a GPU is present: auto does not fall back")
	}
	t.Setenv("GPUMEM_BACKEND", "")
	withFake(t, newFakeGPU(1, 1<<40))
	p := writeTrace(t, "x.trace", tinyTrace)
	_, _, e := runCmd(t, "replay", "--allocator", "test-pass", p)
	if strings.Count(e, "\n") != 1 || !strings.HasPrefix(e, "gpumem: no GPU opened (") || !strings.Contains(e, "replaying on the SIMULATED device") {
		t.Errorf("fallback notice:\n%s", e)
	}
	_, _, e = runCmd(t, "replay", "--allocator", "test-pass", "--verbose", p)
	if strings.Count(e, "\n") != 2 {
		t.Errorf("--verbose fallback notice:\n%s", e)
	}
}

func TestCheckWritable(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "old.html")
	os.WriteFile(existing, []byte("keep"), 0o644)
	for path, ok := range map[string]bool{
		filepath.Join(dir, "new.html"): true, existing: true, dir: false,
		filepath.Join(dir, "none", "x.html"): false, filepath.Join(existing, "x.html"): false, "": false,
	} {
		if err := checkWritable(path); (err == nil) != ok {
			t.Errorf("checkWritable(%q) = %v", path, err)
		}
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep" {
		t.Errorf("existing file changed: %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("probe files left: %v", ents)
	}
}

// The allocated and requested curves coincide in most replays: they are
// drawn with distinct styles (requested dashed) so that both show.
func TestChartCurvesDistinct(t *testing.T) {
	pts := []replay.Point{{Event: 0, Reserved: 4 << 20, Allocated: 2 << 20, Requested: 2 << 20}, {Event: 10, Reserved: 4 << 20, Allocated: 3 << 20, Requested: 3 << 20}}
	svg := chartSVG(replay.Result{Trace: "t", Allocator: "a", PeakReserved: 4 << 20, PeakRequested: 3 << 20, Timeline: pts})
	style := map[string]string{}
	re := regexp.MustCompile(`<path class="curve (\w+)" d="[^"]*" ([^>]*)>`)
	for _, m := range re.FindAllStringSubmatch(svg, -1) {
		style[m[1]] = m[2]
	}
	a, r := style["allocated"], style["requested"]
	if a == "" || r == "" {
		t.Fatalf("curves drawn: %v\n%s", style, svg)
	}
	if a == r || !strings.Contains(r, "stroke-dasharray") || strings.Contains(a, "stroke-dasharray") {
		t.Errorf("allocated %q and requested %q are not told apart", a, r)
	}
}

// asked reports whether the simulator was asked for n devices of c bytes.
func asked(g *fakegpu.GPU, n int, c uint64) bool {
	gn, gc := g.Asked()
	return gn == n && gc == c
}
