package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
)

func writeTrace(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const tinyTrace = "a 1 1000 0\na 2 3000 1\nf 1 0\na 3 500 0\nf 2 0\n"

func decodeLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var res []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		res = append(res, m)
	}
	return res
}

// replayOneJSON runs replay --json with args, requires exit 0 and one JSON
// line, and returns it with stderr.
func replayOneJSON(t *testing.T, args ...string) (map[string]any, string) {
	t.Helper()
	code, o, e := runCmd(t, append([]string{"replay", "--json"}, args...)...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, e)
	}
	lines := decodeLines(t, o)
	if len(lines) != 1 {
		t.Fatalf("%d lines: %s", len(lines), o)
	}
	return lines[0], e
}

func TestReplayJSON(t *testing.T) {
	g := newFakeGPU(1, 1<<40)
	withFake(t, g)
	a := writeTrace(t, "a.trace", tinyTrace)
	b := writeTrace(t, "b.trace", "a 7 100 0\n")
	code, o, e := runCmd(t, "replay", "--backend", "sim", "--allocator", "test-pass", a, "--json", b, "--sim-capacity", "80GiB")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, e)
	}
	if devices, capacity := g.Asked(); capacity != 80<<30 || devices != 1 {
		t.Errorf("simulator asked for %d devices of %d bytes", devices, capacity)
	}
	if !strings.Contains(e, "SIMULATED") {
		t.Errorf("no simulator notice on stderr: %q", e)
	}
	lines := decodeLines(t, o)
	if len(lines) != 2 {
		t.Fatalf("%d lines: %s", len(lines), o)
	}
	for _, k := range []string{"trace", "allocator", "backend", "conf", "pairs", "peak_requested", "peak_reserved",
		"device_allocs", "device_frees", "ooms", "alloc_retries", "ns_per_pair", "overhead", "cross_stream_reuses"} {
		if _, ok := lines[0][k]; !ok {
			t.Errorf("no %q in %v", k, lines[0])
		}
	}
	l := lines[0]
	if l["trace"] != "a" || l["allocator"] != "test-pass" || l["backend"] != "sim" || l["pairs"] != float64(3) ||
		l["peak_requested"] != float64(4000) || l["peak_reserved"] != float64(4000) || l["device_allocs"] != float64(3) {
		t.Errorf("result %v", l)
	}
	if lines[1]["trace"] != "b" || lines[1]["pairs"] != float64(1) {
		t.Errorf("second result %v", lines[1])
	}
	if !g.Closed() {
		t.Error("backend not closed")
	}
}

func TestReplayTable(t *testing.T) {
	withFake(t, newFakeGPU(1, 1<<40))
	p := writeTrace(t, "x.trace", tinyTrace)
	code, o, e := runCmd(t, "replay", "--backend", "sim", "--allocator", "test-pass", p)
	if code != exitOK || !strings.Contains(o, "peak reserved") || !strings.Contains(o, "test-pass") || !strings.Contains(o, "1.000") {
		t.Fatalf("exit %d, out %q, err %q", code, o, e)
	}
}

func TestReplayAutoFallsBackToSim(t *testing.T) {
	if b, err := gpumem.Open(gpumem.Options{Backend: "auto"}); err == nil {
		b.Close()
		t.Skip("a GPU is present: auto does not fall back")
	}
	t.Setenv("GPUMEM_BACKEND", "")
	withFake(t, newFakeGPU(1, 1<<40))
	p := writeTrace(t, "x.trace", tinyTrace)
	code, o, e := runCmd(t, "replay", "--allocator", "test-pass", "--json", p)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, e)
	}
	if !strings.Contains(e, "no GPU opened") || !strings.Contains(e, "SIMULATED") {
		t.Errorf("fallback not announced: %q", e)
	}
	if l := decodeLines(t, o); len(l) != 1 || l[0]["backend"] != "sim" {
		t.Errorf("output %s", o)
	}
}

func TestReplayConf(t *testing.T) {
	withFake(t, newFakeGPU(1, 1<<40))
	p := writeTrace(t, "x.trace", tinyTrace)
	code, o, _ := runCmd(t, "replay", "--backend", "sim", "--allocator", "test-pass", "--conf", " max_split_size_mb : 64 ", "--json", p)
	if l := decodeLines(t, o); code != exitOK || len(l) != 1 || l[0]["conf"] != "max_split_size_mb:64" {
		t.Fatalf("exit %d, output %s", code, o)
	}
	// --conf overrides the environment.
	t.Setenv("GPUMEM_ALLOC_CONF", "bogus:1")
	if code, _, e := runCmd(t, "replay", "--backend", "sim", "--allocator", "test-pass", "--conf", "", p); code != exitOK {
		t.Fatalf("--conf did not override a bad environment: %d %s", code, e)
	}
	code, _, e := runCmd(t, "replay", "--backend", "sim", "--allocator", "test-pass", p)
	if code != exitUsage || !strings.Contains(e, "GPUMEM_ALLOC_CONF") || !strings.Contains(e, "bogus") {
		t.Fatalf("bad environment: exit %d %q", code, e)
	}
	t.Setenv("GPUMEM_ALLOC_CONF", "")
	code, _, e = runCmd(t, "replay", "--backend", "sim", "--conf", "max_split_size_mb:5", p)
	if code != exitUsage || !strings.Contains(e, "--conf: max_split_size_mb:5") || strings.Contains(e, "GPUMEM_ALLOC_CONF:") {
		t.Fatalf("bad --conf: exit %d %q (want it to name --conf, not the environment)", code, e)
	}
	// A configuration an allocator refuses names --conf too.
	code, _, e = runCmd(t, "replay", "--backend", "sim", "--allocator", "asyncpool", "--conf", "expandable_segments:True", p)
	if code == exitOK || !strings.Contains(e, "--conf: expandable_segments:True") {
		t.Fatalf("refused --conf: exit %d %q", code, e)
	}
	// The conf's backend key picks the allocator; an unknown one is refused.
	code, _, e = runCmd(t, "replay", "--backend", "sim", "--conf", "backend:managed", "--allocator", "nope", p)
	if code != exitUsage || !strings.Contains(e, `unknown allocator "nope"`) {
		t.Fatalf("unknown allocator: exit %d %q", code, e)
	}
}

func TestReplayBadTraces(t *testing.T) {
	withFake(t, newFakeGPU(1, 1<<40))
	missing := filepath.Join(t.TempDir(), "missing.trace")
	code, _, e := runCmd(t, "replay", "--backend", "sim", "--allocator", "test-pass", missing)
	if code != exitFail || !strings.Contains(e, "missing.trace") {
		t.Errorf("missing trace: exit %d %q", code, e)
	}
	bad := writeTrace(t, "bad.trace", "a 1 10 0\nf 2 0\n")
	code, _, e = runCmd(t, "replay", "--backend", "sim", "--allocator", "test-pass", bad)
	if code != exitFail || !strings.Contains(e, "line 2") || !strings.Contains(e, "unknown ID 2") {
		t.Errorf("malformed trace: exit %d %q", code, e)
	}
}

func TestReplayOOMIsCounted(t *testing.T) {
	p := writeTrace(t, "big.trace", "a 1 3000 0\na 2 3000 0\nf 1 0\n")
	withFake(t, newFakeGPU(1, 4000))
	code, o, e := runCmd(t, "replay", "--backend", "sim", "--allocator", "test-pass", "--json", p)
	if l := decodeLines(t, o); code != exitOK || len(l) != 1 || l[0]["ooms"] != float64(1) {
		t.Fatalf("exit %d, %s, %s", code, o, e)
	}
}

func TestReplayBundledTrace(t *testing.T) {
	withFake(t, newFakeGPU(1, 140<<30))
	// The bundled trace is embedded: it replays from any directory.
	t.Chdir(t.TempDir())
	code, o, e := runCmd(t, "replay", "--backend", "sim", "--allocator", "test-pass", "--json")
	if code != exitOK || !strings.Contains(e, "pytorch-gpt.trace.gz") || !strings.Contains(e, "real PyTorch") {
		t.Fatalf("exit %d: %s", code, e)
	}
	// The bundled trace is the converted snapshot of the same run, which
	// trace/torchsnapshot's tests check against figures computed in Python.
	l := decodeLines(t, o)
	if len(l) != 1 || l[0]["pairs"] != float64(3084) || l[0]["peak_requested"] != float64(958094408) || l[0]["trace"] != "pytorch-gpt" {
		t.Fatalf("%v", l)
	}
}

// replayToFile replays tinyTrace (as trace) through test-pass on a fake
// GPU, with flag naming the file (name) that the replay writes and args
// before it, and returns the path and what was written; a failed run or a
// missing file fails the test.
func replayToFile(t *testing.T, trace, flag, name string, args ...string) (string, []byte) {
	t.Helper()
	withFake(t, newFakeGPU(1, 1<<40))
	p := writeTrace(t, trace, tinyTrace)
	out := filepath.Join(t.TempDir(), name)
	argv := append([]string{"replay", "--backend", "sim", "--allocator", "test-pass"}, args...)
	code, _, e := runCmd(t, append(argv, flag, out, p)...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, e)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return out, data
}

func TestReplayHTML(t *testing.T) {
	_, data := replayToFile(t, "page.trace", "--html", "timeline.html", "--conf", "expandable_segments:True")
	page := string(data)
	for _, want := range []string{"<svg", "page through test-pass on sim", "expandable_segments:True", "GiB", "event index",
		"reserved from the device", "allocated", "requested by the trace", "peak reserved", "<table"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, banned := range []string{"<script src", "<link", "https://", "http://cdn"} {
		if strings.Contains(page, banned) {
			t.Errorf("page is not self-contained: has %q", banned)
		}
	}
}

// With no --allocator, every linked-in allocator runs, on the real simulator.
func TestReplayEveryAllocatorOnSim(t *testing.T) {
	p := writeTrace(t, "x.trace", tinyTrace)
	code, o, e := runCmd(t, "replay", "--backend", "sim", "--json", p)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, e)
	}
	seen := map[string]bool{}
	for _, l := range decodeLines(t, o) {
		seen[l["allocator"].(string)] = true
		if l["backend"] != "sim" || l["peak_requested"] != float64(4000) || l["peak_reserved"].(float64) < 4000 {
			t.Errorf("result %v", l)
		}
	}
	for _, want := range []string{"caching", "asyncpool", "test-pass"} {
		if !seen[want] {
			t.Errorf("allocator %s did not run (ran %v)", want, seen)
		}
	}
	// The conf's backend key picks one.
	code, o, e = runCmd(t, "replay", "--backend", "sim", "--json", "--conf", "backend:caching,expandable_segments:True", p)
	if l := decodeLines(t, o); code != exitOK || len(l) != 1 || l[0]["allocator"] != "caching" || l[0]["conf"] != "backend:caching,expandable_segments:True" {
		t.Fatalf("exit %d, %s, %s", code, o, e)
	}
	// A key that only one allocator takes: the others are skipped, saying so.
	code, o, e = runCmd(t, "replay", "--backend", "sim", "--json", "--conf", "throttle_ratio:0.5", p)
	if code != exitOK || !strings.Contains(e, "skipping caching") || !strings.Contains(o, `"allocator":"asyncpool"`) {
		t.Fatalf("exit %d, %s, %s", code, o, e)
	}
	// --allocator with a key it refuses is an error.
	code, _, e = runCmd(t, "replay", "--backend", "sim", "--allocator", "caching", "--conf", "throttle_ratio:0.5", p)
	if code != exitFail || !strings.Contains(e, "throttle_ratio") {
		t.Fatalf("exit %d, %s", code, e)
	}
}

func TestReplaySimCapacityOOM(t *testing.T) {
	p := writeTrace(t, "big.trace", "a 1 805306368 0\na 2 805306368 0\nf 1 0\nf 2 0\n")
	code, o, e := runCmd(t, "replay", "--backend", "sim", "--allocator", "caching", "--sim-capacity", "1GiB", "--json", p)
	l := decodeLines(t, o)
	if code != exitOK || len(l) != 1 || l[0]["ooms"] != float64(1) || l[0]["peak_requested"] != float64(805306368) {
		t.Fatalf("exit %d, %s, %s", code, o, e)
	}
	if !strings.Contains(e, "1.00 GiB") {
		t.Errorf("the simulator notice does not give the capacity: %q", e)
	}
}

// Naming the managed allocator is the opt-in; in the every-allocator run it
// takes GPUMEM_ENABLE_UNIFIED_MEMORY.
func TestReplayManagedOptIn(t *testing.T) {
	p := writeTrace(t, "x.trace", tinyTrace)
	t.Setenv("GPUMEM_ENABLE_UNIFIED_MEMORY", "")
	code, o, e := runCmd(t, "replay", "--backend", "sim", "--allocator", "managed", "--json", p)
	if l := decodeLines(t, o); code != exitOK || len(l) != 1 || l[0]["allocator"] != "managed" || l[0]["peak_requested"] != float64(4000) {
		t.Fatalf("exit %d, %s, %s", code, o, e)
	}
	code, o, e = runCmd(t, "replay", "--backend", "sim", "--json", p)
	if code != exitOK || strings.Contains(o, `"allocator":"managed"`) || !strings.Contains(e, "skipping managed") {
		t.Fatalf("without the switch: exit %d, %s, %s", code, o, e)
	}
	t.Setenv("GPUMEM_ENABLE_UNIFIED_MEMORY", "1")
	code, o, e = runCmd(t, "replay", "--backend", "sim", "--json", p)
	if code != exitOK || !strings.Contains(o, `"allocator":"managed"`) {
		t.Fatalf("with the switch: exit %d, %s, %s", code, o, e)
	}
}

// Each replay starts clean: memory the stream-ordered pool kept from one
// trace does not show up in the next trace's peak.
func TestReplayRunsAreIsolated(t *testing.T) {
	big := writeTrace(t, "big.trace", "a 1 1073741824 0\nf 1 0\n")
	small := writeTrace(t, "small.trace", "a 1 1048576 0\nf 1 0\n")
	code, o, e := runCmd(t, "replay", "--backend", "sim", "--allocator", "asyncpool", "--json", big, small)
	l := decodeLines(t, o)
	if code != exitOK || len(l) != 2 {
		t.Fatalf("exit %d: %s %s", code, o, e)
	}
	if l[0]["peak_reserved"].(float64) < 1<<30 || l[1]["peak_reserved"].(float64) >= 1<<30 {
		t.Fatalf("the second replay inherited the first's memory: %v then %v", l[0]["peak_reserved"], l[1]["peak_reserved"])
	}
}

func TestReplayProfile(t *testing.T) {
	g := newFakeGPU(1, 1<<40)
	withFake(t, g)
	a := writeTrace(t, "a.trace", tinyTrace)
	line, e := replayOneJSON(t, "--backend", "sim", "--allocator", "test-pass", "--profile", a)
	prof, ok := line["profile"].([]any)
	if !ok || len(prof) == 0 {
		t.Fatalf("no profile in %v", line)
	}
	if !strings.Contains(e, "profile of") || !strings.Contains(e, "backend total") {
		t.Errorf("no profile table on stderr: %q", e)
	}
	// Without --profile there is no profile.
	_, o, e := runCmd(t, "replay", "--backend", "sim", "--allocator", "test-pass", "--json", a)
	if strings.Contains(o, "profile") || strings.Contains(e, "profile of") {
		t.Errorf("profile without --profile: %s %s", o, e)
	}
}

// The timeline is sampled only for --html; without it the timed loop runs
// bare, and the figures that do not depend on time come out the same.
func TestReplayTimelineOnlyForHTML(t *testing.T) {
	p := filepath.Join("..", "..", "testdata", "pytorch-gpt.trace.gz")
	page := filepath.Join(t.TempDir(), "t.html")
	for _, alloc := range []string{"caching", "asyncpool"} {
		code, bare, e := runCmd(t, "replay", "--backend", "sim", "--allocator", alloc, "--json", p)
		if code != exitOK {
			t.Fatalf("%s: exit %d: %s", alloc, code, e)
		}
		code, sampled, e := runCmd(t, "replay", "--backend", "sim", "--allocator", alloc, "--json", "--html", page, p)
		if code != exitOK {
			t.Fatalf("%s --html: exit %d: %s", alloc, code, e)
		}
		b, s := decodeLines(t, bare), decodeLines(t, sampled)
		if len(b) != 1 || len(s) != 1 {
			t.Fatalf("%s: %d and %d results", alloc, len(b), len(s))
		}
		for _, k := range []string{"peak_requested", "peak_reserved", "peak_allocated", "device_allocs", "device_frees"} {
			if b[0][k] != s[0][k] || b[0][k] == nil {
				t.Errorf("%s: %s %v without the timeline, %v with it", alloc, k, b[0][k], s[0][k])
			}
		}
	}
}

// --passes: each trace replayed several times over one allocator, a line
// per pass in the table and "passes" in JSON; the caching allocator serves
// the later passes from its cache. Out-of-range counts are usage errors.
func TestReplayPasses(t *testing.T) {
	p := writeTrace(t, "a.trace", tinyTrace+"a 4 2097152 0\n")
	line, _ := replayOneJSON(t, "--backend", "sim", "--allocator", "caching", "--passes", "3", p)
	passes, _ := line["passes"].([]any)
	if len(passes) != 3 {
		t.Fatalf("passes: %v", line["passes"])
	}
	if pairs, _ := line["pairs"].(float64); pairs != 12 {
		t.Errorf("pairs %v, want 3 passes of 4", pairs)
	}
	for i, x := range passes {
		pass, _ := x.(map[string]any)
		allocs, _ := pass["device_allocs"].(float64)
		if (i == 0) != (allocs > 0) {
			t.Errorf("pass %d: %v device allocations", i+1, allocs)
		}
		if syncs, ok := pass["device_syncs"].(float64); !ok || syncs != 0 {
			t.Errorf("pass %d: device_syncs %v, want 0", i+1, pass["device_syncs"])
		}
	}
	code, o, e := runCmd(t, "replay", "--backend", "sim", "--allocator", "caching", "--passes", "2", p)
	if code != exitOK || !strings.Contains(o, "pass 2: ") || !strings.Contains(o, "by pass") || !strings.Contains(o, "0 device syncs") {
		t.Errorf("table: exit %d: %s %s", code, o, e)
	}
	for _, bad := range []string{"0", "-3", "1001", "x"} {
		if code, _, e := runCmd(t, "replay", "--backend", "sim", "--passes", bad, p); code != exitUsage || !strings.Contains(e, "passes") {
			t.Errorf("--passes %s: exit %d: %s", bad, code, e)
		}
	}
}

// TestReplayHTMLPassesOnTheChart: with --passes the chart's x axis spans
// every pass's events, so the curves stay inside the chart's box.
func TestReplayHTMLPassesOnTheChart(t *testing.T) {
	_, data := replayToFile(t, "passes.trace", "--html", "timeline.html", "--passes", "3")
	page := string(data)
	vb := regexp.MustCompile(`viewBox="0 0 ([0-9.]+) ([0-9.]+)"`).FindStringSubmatch(page)
	if vb == nil {
		t.Fatal("no chart in the page")
	}
	width, _ := strconv.ParseFloat(vb[1], 64)
	curves := regexp.MustCompile(`class="curve [a-z]+" d="([^"]*)"`).FindAllStringSubmatch(page, -1)
	if len(curves) == 0 {
		t.Fatal("no curve in the chart")
	}
	for _, c := range curves {
		for _, xy := range regexp.MustCompile(`[ML]([0-9.]+) `).FindAllStringSubmatch(c[1], -1) {
			if x, _ := strconv.ParseFloat(xy[1], 64); x > width {
				t.Fatalf("a curve reaches x = %v in a chart %v wide", x, width)
			}
		}
	}
}

// A trace named by a path that is a pipe (bash's <(zcat x.gz), /dev/stdin)
// is read once: telling a snapshot from a trace must not consume its start.
func TestReplayPipePath(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux's /dev/fd")
	}
	withFake(t, newFakeGPU(1, 1<<40))
	var body strings.Builder
	const n = 1000 // about 13 KB: more than the 4 KiB sniffed
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&body, "a %d %d 0\n", i, 1000+i)
	}
	for _, in := range []string{body.String(), "a 1 10 0\n", ""} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		w.WriteString(in) // fits the pipe's buffer
		w.Close()
		path := fmt.Sprintf("/dev/fd/%d", r.Fd())
		code, o, e := runCmd(t, "replay", "--backend", "sim", "--allocator", "test-pass", "--json", path)
		r.Close()
		want := float64(strings.Count(in, "\n"))
		if l := decodeLines(t, o); code != exitOK || len(l) != 1 || l[0]["pairs"] != want {
			t.Errorf("%d bytes through %s: exit %d, %s, %s; want %v pairs", len(in), path, code, o, e, want)
		}
	}
}

// TestReplayCPUProfile: --cpuprofile writes a Go CPU profile (gzip, the
// replay loop's frames in it); a folder or a missing directory is a usage
// error and nothing is replayed.
func TestReplayCPUProfile(t *testing.T) {
	out, data := replayToFile(t, "prof.trace", "--cpuprofile", "cpu.prof", "--passes", "200")
	if len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
		t.Fatalf("%s is not a gzip-compressed profile (%d bytes)", out, len(data))
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(zr); err != nil {
		t.Fatalf("the profile does not decompress: %v", err)
	}
	p := writeTrace(t, "bad.trace", tinyTrace)
	for _, bad := range []string{t.TempDir(), filepath.Join(t.TempDir(), "no", "such", "dir", "cpu.prof")} {
		code, o, e := runCmd(t, "replay", "--backend", "sim", "--allocator", "test-pass", "--cpuprofile", bad, p)
		if code != exitUsage || !strings.Contains(e, "--cpuprofile") || o != "" {
			t.Errorf("--cpuprofile %s: exit %d, stdout %q, stderr %q; want a usage error naming the flag", bad, code, o, e)
		}
	}
}
