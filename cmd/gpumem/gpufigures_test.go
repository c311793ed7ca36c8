package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gpuReplayKeys are the figures a replay on the simulator must share with
// the same replay on a GPU: what the allocator asked the device for and
// what it held, not how long it took.
var gpuReplayKeys = []string{"pairs", "peak_requested", "peak_reserved", "device_allocs", "device_frees", "device_syncs", "ooms"}

// TestSimMatchesGPUReplays replays each trace of testdata/gpu-replays.jsonl
// (the caching allocator's replays on a GPU, one line per trace and
// configuration, as `gpumem replay --backend cuda --json` printed them; see
// docs/gpu-results.md for the run) on the simulator with the same
// configuration, and requires the same footprint and the same device
// allocations, frees and synchronizations: the simulator is where policies are tuned, so its
// figures must be the GPU's. The stream-ordered pool's replays are not
// among them: its footprint is the driver pool's own placement, which the
// simulator models but does not reproduce.
func TestSimMatchesGPUReplays(t *testing.T) {
	if testing.Short() {
		t.Skip("replays every recorded trace")
	}
	data, err := os.ReadFile(filepath.Join("testdata", "gpu-replays.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var gpu map[string]any
		if err := json.Unmarshal([]byte(line), &gpu); err != nil {
			t.Fatalf("gpu-replays.jsonl: %q: %v", line, err)
		}
		name, _ := gpu["trace"].(string)
		alloc, _ := gpu["allocator"].(string)
		conf, _ := gpu["conf"].(string)
		path := filepath.Join("..", "..", "testdata", name+".trace.gz")
		if _, err := os.Stat(path); err != nil {
			path = filepath.Join("..", "..", "..", "shared", "traces", name+".trace.gz")
			if _, err := os.Stat(path); err != nil {
				if os.Getenv("CI") == "true" {
					t.Errorf("%s: trace not found", name)
				}
				continue
			}
		}
		code, out, errOut := runCmd(t, "replay", "--backend", "sim", "--json", "--allocator", alloc, "--conf", conf, path)
		if code != exitOK {
			t.Fatalf("replay %s %s %q: exit %d: %s", name, alloc, conf, code, errOut)
		}
		var sim map[string]any
		if err := json.Unmarshal([]byte(out), &sim); err != nil {
			t.Fatalf("replay %s: %q: %v", name, out, err)
		}
		for _, k := range gpuReplayKeys {
			if fmt.Sprint(sim[k]) != fmt.Sprint(gpu[k]) {
				t.Errorf("%s %s %q: %s on the simulator %v, on the GPU (%v) %v", name, alloc, conf, k, sim[k], gpu["device"], gpu[k])
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no replay compared")
	}
}
