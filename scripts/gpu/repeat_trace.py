#!/usr/bin/env python3
"""Writes a trace repeated N times back to back, what each pass leaves live
freed at its end on its allocation's stream: the work that `gpumem replay
--passes N` replays, as one trace file that the anchors (ptreplay) can
replay too.

    scripts/gpu/repeat_trace.py N IN.trace[.gz] OUT.trace.gz
"""
import gzip
import sys


def opener(path, mode):
    return gzip.open(path, mode) if path.endswith(".gz") else open(path, mode)


def main():
    if len(sys.argv) != 4 or not sys.argv[1].isdigit() or int(sys.argv[1]) < 1:
        sys.exit(__doc__)
    n = int(sys.argv[1])
    with opener(sys.argv[2], "rt") as f:
        events = [line.split() for line in f if line.strip() and not line.startswith("#")]
    ids = [int(e[1]) for e in events]
    span = max(ids) + 1 if ids else 1
    with opener(sys.argv[3], "wt") as out:
        for p in range(n):
            live = {}  # id -> stream, in allocation order
            for e in events:
                i = int(e[1]) + p * span
                if e[0] == "a":
                    live[i] = e[3]
                    out.write(f"a {i} {e[2]} {e[3]}\n")
                else:
                    live.pop(i, None)
                    out.write(f"f {i} {e[2]}\n")
            if p < n - 1:
                for i, s in live.items():
                    out.write(f"f {i} {s}\n")


if __name__ == "__main__":
    main()
