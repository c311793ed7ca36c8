#!/bin/sh
# Many-device run on a machine with two or more NVIDIA GPUs. Expects the test
# binary and the CLI built beforehand (no cgo):
#   CGO_ENABLED=0 go test -c -o .gpu/multi/tests.test ./tests
#   CGO_ENABLED=0 go build -o .gpu/multi/gpumem ./cmd/gpumem
# Usage: scripts/gpu/multi.sh [DURATION]   (per-allocator soak, default 60s)
# Writes its logs to $OUT (or /tmp/multi when OUT is unset).
set -u
dur=${1:-60s}
dir=$(dirname "$0")
bin=${BIN:-.gpu/multi}
out=${OUT:-/tmp/multi}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
date -u
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv 2>&1
nvidia-smi topo -m 2>&1 | head -8
echo "== peercopy (C, driver API)"
nvcc -O2 -o /tmp/peercopy "$dir/peercopy.c" -lcuda && /tmp/peercopy | tee "$out/peercopy.log"
echo "== Go tests"
"$bin/tests.test" -test.v -test.run 'GPUMulti|ConformanceCUDAGPU' -test.timeout 9m \
	-gpumem.multi-duration "$dur" >"$out/tests.log" 2>&1
rc=$?
grep -E '^(=== RUN|--- |    --- |PASS|FAIL|ok)|peer_GBps|^multi |multi_gpu_test' "$out/tests.log" | grep -v '^=== RUN' | tail -120
echo "tests exit $rc"
echo "== gpumem info"
"$bin/gpumem" info 2>&1 | tee "$out/info.txt"
"$bin/gpumem" info --json >"$out/info.json" 2>&1
cat "$out/info.json"
echo "== summary"
c01=$(awk '/^peer_GBps 0to1/{print $3}' "$out/peercopy.log")
c10=$(awk '/^peer_GBps 1to0/{print $3}' "$out/peercopy.log")
g01=$(awk '/^peer_GBps 0to1/{print $3; exit}' "$out/tests.log")
g10=$(awk '/^peer_GBps 1to0/{print $3; exit}' "$out/tests.log")
printf '%-10s %10s %10s %8s\n' direction C_GBps Go_GBps ratio
for d in 0to1 1to0; do
	if [ $d = 0to1 ]; then c=$c01 g=$g01; else c=$c10 g=$g10; fi
	r=$(awk -v c="${c:-0}" -v g="${g:-0}" 'BEGIN{ if (c > 0) printf "%.3f", g / c; else print "-" }')
	printf '%-10s %10s %10s %8s\n' $d "${c:--}" "${g:--}" "$r"
done
grep '^multi ' "$out/tests.log"
grep -E '^--- (PASS|FAIL|SKIP)' "$out/tests.log"
exit $rc
