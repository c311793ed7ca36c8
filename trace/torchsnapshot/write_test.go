package torchsnapshot

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/sim"
)

// recordedSnapshot runs a few allocations through a caching allocator with
// its history on and returns its snapshot.
func recordedSnapshot(t *testing.T) gpumem.Snapshot {
	t.Helper()
	g, err := sim.New(sim.Config{Devices: []sim.DeviceConfig{{Capacity: 1 << 30}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	opts := caching.DefaultOptions()
	opts.HistorySize = 1000
	a, err := caching.New(g, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	s := gpumem.Stream{Device: 0}
	var live []gpumem.Ptr
	for _, size := range []uint64{512, 1 << 20, 3 << 20, 100, 25 << 20} {
		p, err := a.Allocate(size, s)
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, p)
	}
	for _, p := range live[1:3] {
		if err := a.Deallocate(p, s); err != nil {
			t.Fatal(err)
		}
	}
	snap, ok := gpumem.SnapshotOf(a)
	if !ok || len(snap.Segments) == 0 {
		t.Fatal("no snapshot")
	}
	if len(snap.History) == 0 {
		snap.History, _ = gpumem.HistoryOf(a)
	}
	return snap
}

func TestWriteReadBack(t *testing.T) {
	snap := recordedSnapshot(t)
	var buf bytes.Buffer
	if err := Write(&buf, snap); err != nil {
		t.Fatal(err)
	}
	got, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if got.Segments != len(snap.Segments) || len(got.Devices) != 1 {
		t.Fatalf("read back %d segments, %d devices; want %d, 1", got.Segments, len(got.Devices), len(snap.Segments))
	}
	if len(got.Devices[0]) != len(snap.History) {
		t.Fatalf("read back %d history entries, want %d", len(got.Devices[0]), len(snap.History))
	}
	for i, e := range got.Devices[0] {
		h := snap.History[i]
		if e.Action != string(h.Action) || e.Size != h.Size || (h.Action != gpumem.ActionOOM && e.Addr != uint64(h.Addr)) {
			t.Errorf("entry %d: %+v, want %+v", i, e, h)
		}
	}
	tr, rep, err := got.Trace(0, Options{Name: "written"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Allocations != 5 || rep.Frees != 2 || rep.LiveAtEnd != 3 || len(tr.Events) != 7 {
		t.Errorf("converted: %+v, %d events", rep, len(tr.Events))
	}
}

func TestWriteAllocatorAndDevices(t *testing.T) {
	snap := gpumem.Snapshot{
		Segments: []gpumem.SegmentInfo{{Device: 1, Addr: 4096, TotalSize: 2048, SegmentType: "large",
			Blocks: []gpumem.BlockInfo{{Addr: 4096, Size: 2048, State: "inactive"}}}},
		History: []gpumem.HistoryEntry{
			{Action: gpumem.ActionSpill, Device: 0, Size: 1},
			{Action: gpumem.ActionOOM, Device: 2, Addr: 77, Size: 9, Time: time.Unix(1, 0)},
		},
	}
	var buf bytes.Buffer
	if err := Write(&buf, snap); err != nil {
		t.Fatal(err)
	}
	got, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Devices) != 3 || len(got.Devices[0]) != 0 || len(got.Devices[2]) != 1 || got.Devices[2][0].Action != "oom" {
		t.Fatalf("devices %+v: want 3, the spill left out, one oom on device 2", got.Devices)
	}
	if err := WriteAllocator(&buf, nil); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("WriteAllocator(nil) = %v, want ErrNotSupported", err)
	}
	if err := WriteFile(filepath.Join(t.TempDir(), "no", "such", "dir"), snap); err == nil {
		t.Error("WriteFile into a missing directory succeeded")
	}
}

// pythonCheck loads a written snapshot with Python's own pickle module,
// checks each field's type and the blocks' tiling of their segments, and
// prints counts for the Go side to compare.
const pythonCheck = `
import json, pickle, sys
s = pickle.load(open(sys.argv[1], "rb"))
assert set(s) == {"segments", "device_traces", "allocator_settings"}, sorted(s)
segkeys = {"device", "address", "total_size", "allocated_size", "active_size", "requested_size",
           "stream", "segment_type", "segment_pool_id", "is_expandable", "frames", "blocks"}
states = {}
for seg in s["segments"]:
    assert set(seg) == segkeys, sorted(seg)
    for k in segkeys - {"segment_type", "segment_pool_id", "is_expandable", "frames", "blocks"}:
        assert type(seg[k]) is int and seg[k] >= 0, (k, seg[k])
    assert seg["segment_type"] in ("small", "large"), seg["segment_type"]
    assert type(seg["segment_pool_id"]) is tuple and len(seg["segment_pool_id"]) == 2
    assert type(seg["is_expandable"]) is bool and seg["frames"] == []
    addr = seg["address"]
    for b in seg["blocks"]:
        assert set(b) == {"address", "size", "requested_size", "state", "frames"}, sorted(b)
        assert b["address"] == addr, "blocks tile their segment"
        assert b["state"] in ("active_allocated", "active_pending_free", "inactive"), b["state"]
        assert b["requested_size"] <= b["size"]
        states[b["state"]] = states.get(b["state"], 0) + 1
        addr += b["size"]
    assert addr == seg["address"] + seg["total_size"], "blocks cover their segment"
    assert seg["allocated_size"] == sum(b["size"] for b in seg["blocks"] if b["state"] == "active_allocated")
actions = {}
for dev in s["device_traces"]:
    for e in dev:
        assert set(e) == {"action", "addr", "size", "stream", "time_us", "frames"}, sorted(e)
        assert e["action"] in ("alloc", "free_requested", "free_completed", "segment_alloc",
                               "segment_free", "segment_map", "segment_unmap", "snapshot"), e["action"]
        assert all(type(e[k]) is int for k in ("addr", "size", "stream", "time_us"))
        actions[e["action"]] = actions.get(e["action"], 0) + 1
print(json.dumps({"segments": len(s["segments"]), "devices": len(s["device_traces"]),
                  "states": states, "actions": actions}))
`

// TestPythonLoadsSnapshot: Python's pickle module loads what Write writes,
// with the layout of torch.cuda.memory._snapshot(). It skips where python3
// is absent, except under CI=true.
func TestPythonLoadsSnapshot(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is required under CI=true")
		}
		t.Skip("python3 not found")
	}
	snap := recordedSnapshot(t)
	path := filepath.Join(t.TempDir(), "snap.pickle")
	if err := WriteFile(path, snap); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, "-c", pythonCheck, path).CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	var got struct {
		Segments, Devices int
		States, Actions   map[string]int
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	states, actions := map[string]int{}, map[string]int{}
	for _, s := range snap.Segments {
		for _, b := range s.Blocks {
			states[b.State]++
		}
	}
	for _, h := range snap.History {
		actions[string(h.Action)]++
	}
	if got.Segments != len(snap.Segments) || got.Devices != 1 || !equalCounts(got.States, states) || !equalCounts(got.Actions, actions) {
		t.Fatalf("python3 read %+v; want %d segments, 1 device, states %v, actions %v", got, len(snap.Segments), states, actions)
	}
	if actions["alloc"] != 5 || actions["free_requested"] != 2 || states["active_allocated"] != 3 {
		t.Fatalf("the recorded run: actions %v, states %v", actions, states)
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
