#!/usr/bin/env bash
# The fresh-install path: a fresh clone of this checkout, `go install` of the
# CLI into an empty GOBIN, then the installed binary, run from another
# directory, replays the trace embedded in it on the simulator and writes a
# PyTorch memory snapshot that Python's pickle opens.
#
# `go install github.com/gpumem/gpumem/cmd/gpumem@HEAD` names a version of a
# module fetched through the module proxy; a local checkout is no module
# query. Installing ./cmd/gpumem from inside a fresh clone is the same
# build: module mode, the clone's go.mod and go.sum (the -mod=mod below lets
# the go command fetch what the clone needs, as @version does), nothing from
# the working tree that is not committed, and a binary that must not need
# the source tree when it runs.
#
# Usage: .ci/install-check.sh [CHECKOUT]   (default: the repository root)
set -euo pipefail

src=$(cd "${1:-$(dirname "$0")/..}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "install-check: $*" >&2; exit 1; }

echo "install-check: clone $src (HEAD $(git -C "$src" rev-parse --short HEAD))"
git clone -q "$src" "$tmp/clone" || fail "git clone of $src failed"

echo "install-check: go install ./cmd/gpumem into $tmp/bin"
(cd "$tmp/clone" && GOBIN="$tmp/bin" GOFLAGS=-mod=mod CGO_ENABLED=0 go install ./cmd/gpumem) ||
	fail "go install ./cmd/gpumem from the fresh clone failed"
bin="$tmp/bin/gpumem"
[ -x "$bin" ] || fail "no binary at $bin after go install"

cd /
echo "install-check: $bin replay --json (from /)"
"$bin" replay --json > "$tmp/replay.jsonl" || fail "replay of the embedded trace failed"
[ -s "$tmp/replay.jsonl" ] || fail "the replay printed nothing"
head -n 3 "$tmp/replay.jsonl"

echo "install-check: $bin replay --snapshot (from /)"
# One snapshot per allocator replayed: with several, FILE gets the trace's and
# the allocator's names inserted (s.pytorch-gpt.caching.pickle, ...).
"$bin" replay --snapshot "$tmp/s.pickle" > /dev/null || fail "replay --snapshot failed"
command -v python3 > /dev/null || fail "python3 is needed to open the snapshots"
n=0
for f in "$tmp"/s.pickle "$tmp"/s.*.pickle; do
	[ -e "$f" ] || continue
	python3 -c 'import pickle,sys; d=pickle.load(open(sys.argv[1],"rb")); assert d["segments"] and d["device_traces"]' "$f" ||
		fail "$f does not open in Python's pickle with segments and device_traces"
	echo "install-check: $(basename "$f") opens in Python with segments and device traces"
	n=$((n + 1))
done
[ "$n" -gt 0 ] || fail "replay --snapshot wrote no snapshot"
echo "install-check: OK"
