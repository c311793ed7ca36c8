#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after scripts/gpu/prepare.sh
# built .gpu/ elsewhere. Builds the anchors there (nvcc, g++ and PyTorch are
# installed on it), runs the GPU tier and the replays of gpumem and of the
# anchors in one go, writes full logs to $OUT (default /tmp/gpumem-gpu) and
# prints a short table last.
#
#   scripts/gpu/run.sh [all|anchors|tests|replay|bench]
set -uo pipefail
G=${G:-.gpu/final}
OUT=${OUT:-/tmp/gpumem-gpu}
mkdir -p "$OUT"
what=${1:-all}
W=/tmp/gpumem-work
mkdir -p $W
summary="$OUT/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

note "date: $(date -u +%Y-%m-%dT%H:%MZ)"
nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used --format=csv,noheader | while read -r l; do note "gpu: $l"; done

for t in $G/traces/*.trace.gz; do zcat "$t" >"$W/$(basename "$t" .gz)"; done
traces=$(ls $W/*.trace)

if [ "$what" = all ] || [ "$what" = anchors ]; then
	nvcc -O2 -o $W/drvbench $G/anchors/drvbench.c -lcuda 2>&1 | tail -5
	$W/drvbench >"$OUT/drvbench.txt" 2>&1
	grep -E 'driver_version|loop_ns|bw_GBps pinned|lat_us cuMemAllocAsync' "$OUT/drvbench.txt" | sed 's/^/anchor: /' | tee -a "$summary"
	TP=$(python3 -c "import torch,os;print(os.path.dirname(torch.__file__))" 2>/dev/null)
	g++ -O2 -std=c++17 -D_GLIBCXX_USE_CXX11_ABI=1 -I"$TP/include" -I/usr/local/cuda/include $G/anchors/ptreplay.cpp \
		-o $W/ptreplay -L"$TP/lib" -lc10_cuda -lc10 -L/usr/local/cuda/lib64 -lcudart \
		-Wl,-rpath,"$TP/lib" -Wl,-rpath,/usr/local/cuda/lib64 2>&1 | tail -5
	for t in $traces $traces; do
		PYTORCH_CUDA_ALLOC_CONF= $W/ptreplay "$t" torch
		PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True $W/ptreplay "$t" torch
		$W/ptreplay "$t" driverpool
	done >"$OUT/ptreplay.jsonl" 2>&1
	sed 's/^/anchor: /' "$OUT/ptreplay.jsonl" | tee -a "$summary"
fi

if [ "$what" = all ] || [ "$what" = tests ]; then
	$G/gpumem info --backend cuda --json >"$OUT/info.json" 2>&1; note "gpumem info exit $?"
	$G/gpumem info --backend cuda >>"$OUT/info.txt" 2>&1
	cat "$OUT/info.txt" | tee -a "$summary"
	export GPUMEM_GPU_SHARED=$G
	$G/tests.test -test.v -test.run 'GPU' -test.timeout 8m >"$OUT/tests-gpu.txt" 2>&1; note "tests.test -test.run GPU exit $?"
	grep -E '^(--- |ok|FAIL|PASS)' "$OUT/tests-gpu.txt" | grep -v -- '--- PASS: .*/' | head -60 | tee -a "$summary"
	for p in asyncpool managed deferrable; do
		[ -x "$G/$p.test" ] || continue
		(cd "$p" && ../$G/$p.test -test.v -test.run 'GPU' -test.timeout 8m) >"$OUT/$p-gpu.txt" 2>&1
		note "$p.test -test.run GPU exit $?"
		grep -E '^(--- |ok|FAIL|PASS)|GBps|bandwidth' "$OUT/$p-gpu.txt" | head -30 | tee -a "$summary"
	done
fi

if [ "$what" = all ] || [ "$what" = bench ]; then
	$G/tests.test -test.run '^$' -test.bench 'GPU' -test.benchtime 2000000x >"$OUT/bench-gpu.txt" 2>&1
	grep -E '^Benchmark' "$OUT/bench-gpu.txt" | sed 's/^/bench: /' | tee -a "$summary"
	grep loop_ns "$OUT/drvbench.txt" 2>/dev/null | sed 's/^/anchor: /' | tee -a "$summary"
fi

if [ "$what" = all ] || [ "$what" = replay ]; then
	for round in 1 2; do
		$G/gpumem replay --backend cuda --allocator caching --json $traces
		$G/gpumem replay --backend cuda --allocator caching --conf expandable_segments:True --json $traces
		$G/gpumem replay --backend cuda --allocator asyncpool --json $traces
	done >"$OUT/replay.jsonl" 2>"$OUT/replay.err"
	note "gpumem replay exit $?"
	sed 's/^/gpumem: /' "$OUT/replay.jsonl" | tee -a "$summary"
fi
echo
echo "==== summary ===="
cat "$summary"
