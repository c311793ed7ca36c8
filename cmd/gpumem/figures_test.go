package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var updateFigures = flag.Bool("update-figures", false, "rewrite testdata/figures.jsonl from the current allocators")

// figureRuns are the replays whose figures must not change when the
// allocators are reshaped: every allocator, every configuration key replay
// knows, and simulated devices small enough to make allocations fail, so that
// out-of-memory counts and retries are pinned too.
var figureRuns = []struct {
	allocator, conf, capacity string
	bundledOnly               bool // the simulator backs managed memory with host memory: small traces only
}{
	{"caching", "", "", false},
	{"asyncpool", "", "", false},
	{"managed", "", "", true},
	{"caching", "expandable_segments:True", "", false},
	{"caching", "max_split_size_mb:64", "", false},
	{"caching", "roundup_power2_divisions:4", "", false},
	{"caching", "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", "", false},
	{"caching", "garbage_collection_threshold:0.6,per_process_memory_fraction:0.5", "16GiB", false},
	{"caching", "per_process_memory_fraction:0.05", "", false},
	{"caching", "", "6GiB", false},
	{"caching", "expandable_segments:True", "6GiB", false},
	{"asyncpool", "release_threshold_mb:0", "", false},
	{"asyncpool", "throttle_ratio:0.5", "", false},
	{"asyncpool", "per_process_memory_fraction:0.05", "", false},
	{"asyncpool", "", "6GiB", false},
	{"managed", "max_split_size_mb:64", "", true},
	{"managed", "", "600MiB", true},
}

// figureKeys are the fields compared: what the allocator did, not how long
// it took.
var figureKeys = []string{"pairs", "peak_requested", "peak_reserved", "peak_allocated",
	"device_allocs", "device_frees", "ooms", "alloc_retries", "cross_stream_reuses", "live_at_end"}

// figureTraces are the bundled trace and the shared ones beside the
// repository (CI provides them; elsewhere they may be absent).
func figureTraces(t *testing.T) []string {
	t.Helper()
	traces := []string{filepath.Join("..", "..", "testdata", "pytorch-gpt.trace.gz")}
	shared, _ := filepath.Glob(filepath.Join("..", "..", "..", "shared", "traces", "*.trace.gz"))
	if len(shared) == 0 && os.Getenv("CI") == "true" {
		t.Fatal("CI: the shared traces are not beside the repository (../shared/traces)")
	}
	sort.Strings(shared)
	return append(traces, shared...)
}

func figureLines(t *testing.T, traces []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range figureRuns {
		args := []string{"replay", "--backend", "sim", "--json", "--allocator", r.allocator, "--conf", r.conf}
		if r.capacity != "" {
			args = append(args, "--sim-capacity", r.capacity)
		}
		files := traces
		if r.bundledOnly {
			files = traces[:1]
		}
		code, o, e := runCmd(t, append(args, files...)...)
		if code != exitOK && code != exitFail {
			t.Fatalf("gpumem %v: exit %d: %s", args, code, e)
		}
		sc := bufio.NewScanner(strings.NewReader(o))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			key := fmt.Sprintf("%s|%s|%s|%s", m["trace"], r.allocator, r.conf, r.capacity)
			var b strings.Builder
			for _, k := range figureKeys {
				// Expandable segments unmap pages as the simulator's
				// streams complete, which depends on timing: how many
				// map and unmap calls a replay makes varies from run to
				// run; what it holds does not.
				if strings.Contains(r.conf, "expandable_segments:True") && (k == "device_allocs" || k == "device_frees") {
					continue
				}
				fmt.Fprintf(&b, "%s=%v ", k, m[k])
			}
			out[key] = strings.TrimSpace(b.String())
		}
	}
	return out
}

// TestReplayFiguresUnchanged replays every trace through every allocator and
// configuration and compares peak reserved bytes, device allocations and
// frees, out-of-memory failures and retries with figures recorded before the
// allocators were reshaped (testdata/figures.jsonl). A change to an
// allocator's policy must update them on purpose (-update-figures) and say
// why in its commit.
func TestReplayFiguresUnchanged(t *testing.T) {
	if testing.Short() {
		t.Skip("replays every trace many times")
	}
	t.Setenv("GPUMEM_ENABLE_UNIFIED_MEMORY", "")
	traces := figureTraces(t)
	got := figureLines(t, traces)
	golden := filepath.Join("testdata", "figures.jsonl")
	if *updateFigures {
		keys := make([]string, 0, len(got))
		for k := range got {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		for _, k := range keys {
			line, _ := json.Marshal(map[string]string{"run": k, "figures": got[k]})
			b.Write(line)
			b.WriteByte('\n')
		}
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]string
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s: %q: %v", golden, line, err)
		}
		want[m["run"]] = m["figures"]
	}
	checked := 0
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			if strings.HasPrefix(k, "pytorch-gpt|") || len(traces) > 1 {
				t.Errorf("%s: no result (want %s)", k, w)
			}
			continue
		}
		checked++
		if g != w {
			t.Errorf("%s:\n got  %s\n want %s", k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: not in %s (rerun with -update-figures)", k, golden)
		}
	}
	if checked == 0 {
		t.Fatal("no figures compared")
	}
}
