#!/bin/sh
# Renders memory snapshots written by `gpumem replay --snapshot` with
# PyTorch's own viewer code (torch.cuda._memory_viz), on the GPU machine.
# Expects the CLI built beforehand (no cgo) and PyTorch in /opt/torch/.venv:
#   CGO_ENABLED=0 go build -o .gpu/final/gpumem ./cmd/gpumem
# Usage: scripts/gpu/memviz.sh [TRACE...]   (default: the bundled trace)
# Snapshots: the simulator through the caching and asyncpool allocators, and
# the GPU (--backend cuda) through the caching allocator; a replay that
# fails (no GPU) is reported and its checks skipped.
# For each snapshot it prints OK/FAIL lines (with sizes): the pickle loads
# and uses only the opcodes MemoryViz.js's unpickler reads (for
# pytorch.org/memory_viz), the keys the viewer reads are present, blocks tile
# their segments, trace_plot (allocations and segments) and segment_plot
# return HTML embedding the snapshot, segsum (stats) and trace (text) run,
# the Allocator State History replay finds a segment for every live block
# at every event (the viewer throws otherwise), and the module's command
# line writes trace_plot and segment_plot files. Outputs under $OUT (or
# /tmp/memviz when OUT is unset). Exit status 1 if any check failed.
set -u
G=${G:-.gpu/final}
PY=${PY:-/opt/torch/.venv/bin/python}
out=${OUT:-/tmp/memviz}
mkdir -p "$out"
fail=0

date -u
"$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1

# snap NAME BACKEND ALLOCATOR [TRACE...]: writes $out/NAME.pickle with
# gpumem replay.
snap() {
	name=$1 backend=$2 allocator=$3
	shift 3
	rm -f "$out/$name.pickle"
	"$G/gpumem" replay --backend "$backend" --allocator "$allocator" \
		--snapshot "$out/$name.pickle" "$@" >"$out/$name.replay.txt" 2>&1
	rc=$?
	if [ $rc -eq 0 ] && [ -s "$out/$name.pickle" ]; then
		echo "OK   $name: replay wrote $(wc -c <"$out/$name.pickle") bytes"
	else
		echo "FAIL $name: replay exit $rc: $(tail -n 2 "$out/$name.replay.txt" | tr '\n' ' ')"
		fail=1
	fi
}

snap sim-caching sim caching "$@"
snap sim-asyncpool sim asyncpool "$@"
snap cuda-caching cuda caching "$@"

for p in "$out"/*.pickle; do
	[ -s "$p" ] || continue
	name=$(basename "$p" .pickle)
	echo "== $name"
	"$PY" - "$p" "$out/$name" <<'EOF' || fail=1
import base64, pickle, pickletools, re, sys, traceback
from torch.cuda import _memory_viz

path, stem = sys.argv[1], sys.argv[2]
failed = False

def ok(what, detail=""):
    print(f"OK   {what}{': ' + detail if detail else ''}")

def fail(what, detail=""):
    global failed
    failed = True
    print(f"FAIL {what}{': ' + detail if detail else ''}")

def check(what, fn):
    try:
        detail = fn()
        ok(what, detail or "")
        return True
    except Exception as e:
        fail(what, f"{type(e).__name__}: {e}")
        traceback.print_exc(limit=3, file=sys.stdout)
        return False

raw = open(path, "rb").read()

# MemoryViz.js's unpickler (pytorch.org/memory_viz opens the file itself):
# protocol 2..4 and these opcodes only.
JS_OPS = {"PROTO", "FRAME", "MEMOIZE", "STOP", "MARK", "APPEND", "APPENDS",
          "LIST", "TUPLE", "EMPTY_TUPLE", "TUPLE1", "TUPLE2", "TUPLE3",
          "EMPTY_LIST", "EMPTY_DICT", "DICT", "SETITEM", "SETITEMS",
          "NEWTRUE", "NEWFALSE", "NONE", "BININT", "BININT1", "BININT2",
          "LONG1", "BINFLOAT", "SHORT_BINUNICODE", "BINUNICODE",
          "BINGET", "LONG_BINGET", "BINPUT", "LONG_BINPUT"}
def opcodes():
    used, proto = set(), None
    for op, arg, _ in pickletools.genops(raw):
        used.add(op.name)
        if op.name == "PROTO":
            proto = arg
    bad = sorted(used - JS_OPS)
    if proto is None or not 2 <= proto <= 4:
        raise ValueError(f"protocol {proto}; the viewer reads 2..4")
    if bad:
        raise ValueError(f"opcodes the viewer cannot read: {bad}")
    return f"protocol {proto}, {len(used)} opcodes, {len(raw)} bytes"
check("opcodes", opcodes)

snap = None
def load():
    global snap
    snap = pickle.loads(raw)
    n = sum(len(t) for t in snap["device_traces"])
    return f"{len(snap['segments'])} segments, {n} history entries on {len(snap['device_traces'])} devices"
if not check("load", load):
    sys.exit(1)

# The keys torch's writer (torch/csrc/cuda/memory_snapshot.cpp) puts in a
# snapshot; the viewer and _memory_viz read a subset of them.
TOP = ["segments", "device_traces", "allocator_settings"]
SEG = ["device", "address", "total_size", "allocated_size", "active_size",
       "requested_size", "stream", "segment_type", "segment_pool_id",
       "is_expandable", "frames", "blocks"]
BLOCK = ["address", "size", "requested_size", "state", "frames"]
TRACE = ["action", "size", "stream", "time_us", "frames"]
SETTINGS = ["PYTORCH_CUDA_ALLOC_CONF", "max_split_size", "garbage_collection_threshold",
            "expandable_segments", "pinned_num_register_threads",
            "release_lock_on_cudamalloc", "pinned_use_cuda_host_register",
            "roundup_power2_divisions"]
def keys():
    missing = set()
    for k in TOP:
        if k not in snap:
            missing.add(k)
    for s in snap["segments"]:
        missing |= {"segment." + k for k in SEG if k not in s}
        for b in s.get("blocks", []):
            missing |= {"block." + k for k in BLOCK if k not in b}
    for t in snap["device_traces"]:
        for e in t:
            missing |= {"trace." + k for k in TRACE if k not in e}
            want = "device_free" if e.get("action") == "oom" else "addr"
            if want not in e:
                missing.add("trace." + want)
    if missing:
        raise KeyError(", ".join(sorted(missing)))
    # MemoryViz.js turns integers into JavaScript numbers (doubles): an
    # address that a double does not hold exactly is drawn elsewhere.
    addrs = [s["address"] for s in snap["segments"]]
    addrs += [b["address"] for s in snap["segments"] for b in s["blocks"]]
    addrs += [e["addr"] for t in snap["device_traces"] for e in t if "addr" in e]
    inexact = [a for a in addrs if int(float(a)) != a]
    if inexact:
        raise ValueError(f"{len(inexact)} addresses a JavaScript number cannot hold, e.g. {inexact[0]:#x}")
    actions = sorted({e["action"] for t in snap["device_traces"] for e in t})
    return "actions " + ",".join(actions)
check("keys", keys)

def settings():
    absent = [k for k in SETTINGS if k not in snap.get("allocator_settings", {})]
    if absent:
        # Nothing in _memory_viz or MemoryViz.js reads them: reported only.
        return f"allocator_settings lacks {', '.join(absent)} (unread by the viewer)"
    return "allocator_settings complete"
check("settings", settings)

def blocks():
    n = 0
    for s in snap["segments"]:
        if s["device"] >= len(snap["device_traces"]):
            raise ValueError(f"segment on device {s['device']}, {len(snap['device_traces'])} device_traces")
        addr = s["address"]
        for b in s["blocks"]:
            if b["address"] != addr:
                raise ValueError(f"segment {s['address']:#x}: block at {b['address']:#x}, expected {addr:#x}")
            if b["requested_size"] > b["size"]:
                raise ValueError(f"block {addr:#x}: requested {b['requested_size']} > size {b['size']}")
            addr += b["size"]
            n += 1
        if addr != s["address"] + s["total_size"]:
            raise ValueError(f"segment {s['address']:#x}: blocks cover {addr - s['address']} of {s['total_size']} bytes")
    return f"{n} blocks tile their segments"
check("blocks", blocks)

def html(kind, fn):
    def run():
        h = fn(snap)
        m = re.search(r'"base64": "([^"]*)"', h)
        if not m:
            raise ValueError("no embedded snapshot")
        emb = base64.b64decode(m.group(1))
        if emb[:1] != b"\x80" or not 2 <= emb[1] <= 4:
            raise ValueError(f"embedded pickle protocol {emb[1]}: MemoryViz.js reads 2..4")
        if pickle.loads(emb.rstrip(b"\x00")) != snap:
            raise ValueError("embedded snapshot differs")
        with open(f"{stem}.{kind}.html", "w") as f:
            f.write(h)
        return f"{len(h)} bytes of HTML, {stem}.{kind}.html"
    check(kind, run)
html("trace_plot", _memory_viz.trace_plot)
html("trace_plot_segments", lambda d: _memory_viz.trace_plot(d, plot_segments=True))
html("segment_plot", _memory_viz.segment_plot)

def text(kind, fn):
    def run():
        t = fn(snap)
        with open(f"{stem}.{kind}.txt", "w") as f:
            f.write(t)
        return f"{len(t)} bytes, {stem}.{kind}.txt"
    check(kind, run)
text("stats", _memory_viz.segsum)
text("trace", _memory_viz.trace)

# The Allocator State History view (segment_plot) replays each device's
# history backwards from the snapshot, as MemoryViz.js's simulate_memory,
# and looks up the segment of every live block: a block outside every
# segment makes the view throw at that event.
def state_history():
    report = []
    for dev, events in enumerate(snap["device_traces"]):
        segs = [[s["address"], s["total_size"]] for s in snap["segments"] if s["device"] == dev]
        blocks = {}
        for s in snap["segments"]:
            if s["device"] != dev:
                continue
            for b in s["blocks"]:
                if b["state"] in ("active_allocated", "active_pending_free"):
                    blocks[b["address"]] = b["size"]
        # free_requested then free_completed of one address is one "free".
        evs = []
        for e in events:
            if e["action"] == "free_completed" and evs and evs[-1]["action"] == "free_requested" and evs[-1]["addr"] == e["addr"]:
                evs[-1] = dict(evs[-1], action="free")
                continue
            evs.append(e)
        def inside(a):
            return any(s <= a < s + n for s, n in segs)
        homeless = [a for a in blocks if not inside(a)]
        bad, first = (1 if homeless else 0), (len(evs) if homeless else None)
        for i in range(len(evs) - 1, -1, -1):
            e = evs[i]
            act = e["action"]
            if act in ("free", "free_completed"):
                blocks[e["addr"]] = e["size"]
            elif act == "free_requested" and e["addr"] not in blocks:
                raise ValueError(f"device {dev}: free_requested of {e['addr']:#x} with no block (the view throws)")
            elif act == "alloc":
                blocks.pop(e["addr"], None)
            elif act in ("segment_free", "segment_unmap"):
                segs.append([e["addr"], e["size"]])
            elif act in ("segment_alloc", "segment_map"):
                for j, (s, n) in enumerate(segs):
                    if s <= e["addr"] < s + n:
                        if act == "segment_alloc":
                            segs.pop(j)
                        else:
                            end = e["addr"] + e["size"]
                            segs.pop(j)
                            if s < e["addr"]:
                                segs.append([s, e["addr"] - s])
                            if end < s + n:
                                segs.append([end, s + n - end])
                        break
            # The view draws the state before event i+1, i.e. after event i.
            if i > 0 and any(not inside(a) for a in blocks):
                bad += 1
                first = i - 1
        if evs or segs:
            report.append(f"device {dev}: {len(evs)} events" +
                          (f", {bad} with a block outside every segment (first at event {first})" if bad else ""))
        if bad:
            raise ValueError("; ".join(report) + " (the history has no segment_alloc/segment_free for segments released before the end)")
    return "; ".join(report) or "no history"
check("state_history", state_history)

sys.exit(1 if failed else 0)
EOF
	for cmd in trace_plot segment_plot; do
		if "$PY" -m torch.cuda._memory_viz $cmd "$p" -o "$out/$name.cli.$cmd.html" >"$out/$name.cli.$cmd.log" 2>&1 \
			&& [ -s "$out/$name.cli.$cmd.html" ]; then
			echo "OK   python -m torch.cuda._memory_viz $cmd: $(wc -c <"$out/$name.cli.$cmd.html") bytes"
		else
			echo "FAIL python -m torch.cuda._memory_viz $cmd: $(tail -n 1 "$out/$name.cli.$cmd.log")"
			fail=1
		fi
	done
done
ls -l "$out"
exit $fail
