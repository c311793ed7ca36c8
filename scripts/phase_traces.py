#!/usr/bin/env python3
"""Writes random phase workloads as traces (the format of testdata/README.md),
for checking an allocator policy on workloads it was not tuned on.

Each workload keeps a few long-lived blocks, then runs four to ten
iterations of one or two streams: a phase of activations of mixed sizes
(some of which live into the next iteration), then one large block (a
logits-like buffer whose size varies per iteration) with a few mid-sized
blocks around it, all freed before the next iteration. Sizes, counts and
streams come from a generator seeded by the workload's number, so the same
numbers give the same traces.

    python3 scripts/phase_traces.py FIRST LAST DIR   # writes DIR/rFIRST.trace .. DIR/r(LAST-1).trace
    for t in DIR/r*.trace; do
      go run ./cmd/gpumem replay --allocator caching --conf expandable_segments:True --passes 4 --json $t
    done
"""
import os
import random
import sys

MIB = 1 << 20


def workload(seed):
    r = random.Random(seed)
    events = []
    next_id = [1]
    live = {}

    def alloc(size, stream=0):
        i = next_id[0]
        next_id[0] += 1
        events.append(f"a {i} {size} {stream}")
        live[i] = stream
        return i

    def free(i):
        events.append(f"f {i} {live.pop(i)}")

    for _ in range(r.randint(3, 12)):
        alloc(r.randint(2, 200) * MIB)
    big_lo, big_hi = r.randint(100, 400), r.randint(400, 1600)
    activations = r.randint(5, 40)
    streams = [0] if r.random() < 0.6 else [0, 1]
    carried = []
    for _ in range(r.randint(4, 10)):
        acts = [alloc(r.choice([r.randint(1, 8), r.randint(8, 64), r.randint(64, 300)]) * MIB + r.randint(0, MIB - 1),
                      r.choice(streams)) for _ in range(activations)]
        r.shuffle(acts)
        kept = acts[:r.randint(0, len(acts) // 4)]
        for a in acts[len(kept):]:
            free(a)
        big = alloc(r.randint(big_lo, big_hi) * MIB)
        mids = [alloc(r.randint(1, 100) * MIB) for _ in range(r.randint(0, 10))]
        free(big)
        for a in mids:
            free(a)
        for a in carried:
            free(a)
        carried = kept
    for a in carried:
        free(a)
    return events


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: phase_traces.py FIRST LAST DIR")
    first, last, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    os.makedirs(out, exist_ok=True)
    for seed in range(first, last):
        with open(os.path.join(out, f"r{seed}.trace"), "w") as f:
            f.write("\n".join(workload(seed)) + "\n")


if __name__ == "__main__":
    main()
