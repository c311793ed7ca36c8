#!/usr/bin/env python3
"""Compares gpumem's replays with the anchors' of the same rounds.

    scripts/gpu/compare.py OUT
    scripts/gpu/compare.py --placement OUT   # run.sh placement's table
    scripts/gpu/compare.py --transition FILE # run.sh transition: BenchmarkTransition
    scripts/gpu/compare.py --poolpair FILE   # run.sh transition: BenchmarkPoolPair

reads OUT/ptreplay.jsonl (the anchors) and OUT/replay.jsonl (gpumem), as
scripts/gpu/run.sh writes them, and prints for each trace and pairing the ns
per pair of every round, the ratio of each round (gpumem / anchor, the two
runs of one round follow each other), their median, the ratio of the
medians and of the means, and the footprints; then, last, one table: per
trace, each allocator's peak reserved over the trace's floor, the best
anchor's footprint, and the three host-time ratios of the issue (medians of
per-round ratios, with their spread, min-max), with the goals marked.

    scripts/gpu/compare.py --table OUT

prints the table alone.
"""
import json
import re
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
    runs = load(d)
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


def ratio(runs, tr, ours, anc):
    o, a = runs.get((tr, ours), []), runs.get((tr, anc), [])
    n = min(len(o), len(a))
    if n == 0:
        return None
    r = [x["ns_per_pair"] / y["ns_per_pair"] for x, y in zip(o[:n], a[:n])]
    return statistics.median(r), min(r), max(r), n


def footprint(runs, tr, who):
    # The anchors do not print the floor: it is the trace's, which every
    # gpumem run reports as peak_requested.
    floor = next((x["peak_requested"] for (t, _), xs in runs.items() if t == tr
                  for x in xs if x.get("peak_requested")), None)
    xs = runs.get((tr, who), [])
    if not xs or not floor or not xs[0].get("peak_reserved"):
        return None
    return xs[0]["peak_reserved"] / floor


def table(d):
    runs = load(d)
    cols = [("torch", "PyTorch native"), ("torch-exp", "PyTorch expandable"), ("driverpool", "driver pool"),
            ("caching", "gpumem default"), ("caching-exp", "gpumem expandable"), ("asyncpool", "asyncpool")]
    times = [("caching", "torch", "default time / PyTorch native", 0.5),
             ("caching-exp", "torch-exp", "expandable time / PyTorch expandable", 1.0),
             ("caching-exp", "torch", "expandable time / PyTorch native", 0.5),
             ("asyncpool", "driverpool", "asyncpool time / driver pool", 1.10)]
    print("| trace | " + " | ".join(c[1] for c in cols) + " | best anchor | " + " | ".join(t[2] for t in times) + " |")
    print("|" + "---|" * (len(cols) + 2 + len(times)))
    for tr in sorted({k[0] for k in runs}):
        fp = {c: footprint(runs, tr, c) for c, _ in cols}
        anchors = [fp[c] for c in ("torch", "torch-exp", "driverpool") if fp[c]]
        best = min(anchors) if anchors else None
        cells = []
        for c, _ in cols:
            v = fp[c]
            if v is None:
                cells.append("-")
            elif c in ("caching", "caching-exp") and best:
                cells.append("%.3f %s" % (v, "ok" if v <= best else "ABOVE"))
            else:
                cells.append("%.3f" % v)
        cells.append("%.3f" % best if best else "-")
        for ours, anc, _, goal in times:
            r = ratio(runs, tr, ours, anc)
            if r is None:
                cells.append("-")
            else:
                med, lo, hi, n = r
                cells.append("%.2f (%.2f-%.2f, %d) %s" % (med, lo, hi, n, "ok" if med <= goal else "over %.2f" % goal))
        print(f"| {tr} | " + " | ".join(cells) + " |")
    print("footprint: peak reserved / the trace's floor, from the first round (each is the same every round);"
          " ok: at or under the best anchor. Times: median of per-round ratios (min-max, rounds); ok: at or under the goal.")


def placement(d):
    """The table of run.sh placement: PyTorch's expandable segments against
    gpumem's under both expandable_placement values, per trace."""
    runs = load(d)
    # The two gpumem configurations run (MF_CONF and BF_CONF), by key.
    keys = sorted({k[1] for k in runs if k[1].startswith("caching-exp")})
    if len(keys) < 2:
        print("placement: fewer than two expandable configurations in %s" % d)
        return
    ms, bs = keys[:2]
    if "caching-exp-mapped_first" in keys:
        ms, bs = "caching-exp-mapped_first", "caching-exp"
    mn, bn = ms.replace("caching-exp", "expandable"), bs.replace("caching-exp", "expandable")
    print("| trace | PyTorch expandable | %s | %s | %s time / PyTorch | %s time / PyTorch |"
          " device allocs: PyTorch, %s, %s |" % (mn, bn, mn, bn, mn, bn))
    print("|---|---|---|---|---|---|---|")
    for tr in sorted({k[0] for k in runs}):
        p, m, b = (runs.get((tr, w), []) for w in ("torch-exp", ms, bs))
        if not (p and m and b):
            continue
        fl = m[0]["peak_requested"]

        def spread(g):
            r = [x["ns_per_pair"] / y["ns_per_pair"] for x, y in zip(g, p)]
            return "%.2f (%.2f-%.2f)" % (statistics.median(r), min(r), max(r))
        print("| %s | %.3f | %.3f | %.3f | %s | %s | %d, %d, %d |" % (
            tr, p[0]["peak_reserved"] / fl, m[0]["peak_reserved"] / fl, b[0]["peak_reserved"] / fl,
            spread(m), spread(b), p[0]["device_allocs"], m[0]["device_allocs"], b[0]["device_allocs"]))


def bench_runs(path, bench):
    """The runs of Go benchmark bench in the file at path, per sub-benchmark:
    each run's C-ns/op metric where it reports one, else its ns/op."""
    v = {}
    for l in open(path):
        m = re.match(r'Benchmark' + bench + r'/(\S+?)(#\d+)?(-\d+)?\s+\d+\s+([0-9.]+) ns/op(.*)', l)
        if not m:
            continue
        c = re.search(r'([0-9.]+) C-ns/op', m.group(5))
        v.setdefault(m.group(1), []).append(float(c.group(1)) if c else float(m.group(4)))
    return v


def bench_table(path, bench, name, header):
    """bench_runs of bench in the file at path, with the header of a
    four-column table printed; None, saying so, where it has no figures."""
    v = bench_runs(path, bench)
    if not v:
        print("%s: no figures (see %s)" % (name, os.path.basename(path)))
        return None
    print(header)
    print("| --- | --- | --- | --- |")
    return v


def transition(path):
    """run.sh transition's table of BenchmarkTransition."""
    # The host's cores run the loop in two states (about 55 and about 90 ns
    # for the same pair): the fastest run is each variant's cost, the
    # median says how often the slow state came.
    v = bench_table(path, "Transition", "transition",
                    "| set current + cuCtxGetCurrent | ns per call, fastest | median | runs |")
    if v is None:
        return
    for k in ("C", "gpumem", "ccall-alone", "cgo-one-call", "cgo-two-calls", "ccall-get-only", "cgo-get-only"):
        if k in v:
            print(f"| {k} | {min(v[k]):.1f} | {statistics.median(v[k]):.1f} | {len(v[k])} |")


def poolpair(path):
    """run.sh transition's table of BenchmarkPoolPair."""
    # The driver's pair runs at two speeds from run to run (about 690 and
    # 1150 ns on the H200): each way's runs within 1.3x of its fastest are
    # its fast state.
    v = bench_table(path, "PoolPair", "pool pair",
                    "| pool pair, 1 MiB | ns per pair, fastest | median, fast state (runs) | median, all runs |")
    if v is None:
        return
    for k in ("C", "cgo-one-call", "ccall-two", "backend"):
        if k not in v:
            continue
        f = [x for x in v[k] if x < 1.3 * min(v[k])]
        print(f"| {k} | {min(v[k]):.0f} | {statistics.median(f):.0f} ({len(f)}) | {statistics.median(v[k]):.0f} ({len(v[k])}) |")


def conf_suffix(conf):
    """The key suffix of a configuration: -exp for expandable segments
    (best-fit placement, the default), -exp-mapped_first with
    expandable_placement:mapped_first, then -hcN with
    expandable_handle_chunks:N."""
    if "expandable" not in conf:
        return ""
    suffix = "-exp-mapped_first" if "mapped_first" in conf else "-exp"
    m = re.search(r"expandable_handle_chunks:(\d+)", conf)
    return suffix + ("-hc" + m.group(1) if m else "")


def load(d):
    runs = {}
    for a in rows(os.path.join(d, "ptreplay.jsonl")):
        key = (trace_name(a["trace"]), a["mode"] + conf_suffix(a.get("conf", "")))
        runs.setdefault(key, []).append(a)
    for g in rows(os.path.join(d, "replay.jsonl")):
        key = (g["trace"], g["allocator"] + conf_suffix(g.get("conf", "")))
        runs.setdefault(key, []).append(g)
    return runs


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--table":
        table(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "--placement":
        placement(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "--transition":
        transition(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "--poolpair":
        poolpair(sys.argv[2])
    elif len(sys.argv) == 2:
        main(sys.argv[1])
    else:
        sys.exit("usage: compare.py [--table|--placement] OUT | --transition FILE | --poolpair FILE")
