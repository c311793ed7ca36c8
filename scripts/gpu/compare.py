#!/usr/bin/env python3
"""Compares gpumem's replays with the anchors' of the same rounds.

    scripts/gpu/compare.py OUT

reads OUT/ptreplay.jsonl (the anchors) and OUT/replay.jsonl (gpumem), as
scripts/gpu/run.sh writes them, and prints for each trace and pairing the ns
per pair of every round, the ratio of each round (gpumem / anchor, the two
runs of one round follow each other), their median, the ratio of the
medians and of the means, and the footprints.
"""
import json
import os
import statistics
import sys

PAIRS = [("caching", "torch", 0.5), ("asyncpool", "driverpool", 1.25), ("caching-exp", "torch-exp", None)]


def rows(path):
    if not os.path.exists(path):
        return []
    out = []
    for line in open(path):
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


def trace_name(p):
    return os.path.basename(p).replace(".trace", "").replace(".gz", "")


def main(d):
    runs = {}
    for a in rows(os.path.join(d, "ptreplay.jsonl")):
        key = (trace_name(a["trace"]), a["mode"] + ("-exp" if "expandable" in a.get("conf", "") else ""))
        runs.setdefault(key, []).append(a)
    for g in rows(os.path.join(d, "replay.jsonl")):
        key = (g["trace"], g["allocator"] + ("-exp" if "expandable" in g.get("conf", "") else ""))
        runs.setdefault(key, []).append(g)
    for tr in sorted({k[0] for k in runs}):
        for ours, anc, goal in PAIRS:
            o, a = runs.get((tr, ours), []), runs.get((tr, anc), [])
            n = min(len(o), len(a))
            if n == 0:
                continue
            on = [x["ns_per_pair"] for x in o[:n]]
            an = [x["ns_per_pair"] for x in a[:n]]
            r = [x / y for x, y in zip(on, an)]
            print(f"{tr} {ours} / {anc}, {n} rounds")
            print("  gpumem  " + " ".join("%.0f" % x for x in on))
            print("  anchor  " + " ".join("%.0f" % x for x in an))
            print("  ratios  " + " ".join("%.2f" % x for x in r))
            line = (f"  median ratio {statistics.median(r):.3f}, ratio of medians "
                    f"{statistics.median(on) / statistics.median(an):.3f} ({statistics.median(on):.0f} / {statistics.median(an):.0f}), "
                    f"ratio of means {statistics.mean(on) / statistics.mean(an):.3f}")
            if goal:
                line += f", rounds at most {goal}: {sum(1 for x in r if x <= goal)} of {n}"
            print(line)
            fl = o[0].get("peak_requested") or 0
            ob, ab = o[0].get("peak_reserved"), a[0].get("peak_reserved")
            if fl and ob and ab:
                line = f"  peak reserved gpumem {ob} ({ob / fl:.4f}), anchor {ab} ({ab / fl:.4f})"
                if a[0].get("device_allocs"):
                    line += f"; device allocations gpumem {o[0].get('device_allocs')}, anchor {a[0].get('device_allocs')}"
                print(line)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: compare.py OUT")
    main(sys.argv[1])
