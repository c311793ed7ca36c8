#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after scripts/gpu/prepare.sh
# built .gpu/ elsewhere. Builds the anchors there (nvcc, g++ and PyTorch are
# installed on it), runs the GPU tier and the replays of gpumem and of the
# anchors in one go, writes full logs to $OUT (default /tmp/gpumem-gpu) and
# prints a short table last.
#
#   scripts/gpu/run.sh [all|anchors|tests|replay|asyncpool|placement|footprints|snapshot|record|bench|kernels|transition|telemetry|sleep|collectives|blas]
set -uo pipefail
G=${G:-.gpu/final}
OUT=${OUT:-/tmp/gpumem-gpu}
mkdir -p "$OUT"
what=${1:-all}
# NCCL (the collective tests) with NVLink multicast (NVLS) off.
export NCCL_NVLS_ENABLE=0
W=/tmp/gpumem-work
mkdir -p $W
summary="$OUT/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
# rotate3 ROUND A B C runs the three commands in the order ROUND gives
# (A B C, B C A, C A B in turn), so that none always goes first.
rotate3() {
	case $(($1 % 3)) in
	0) $2; $3; $4 ;;
	1) $3; $4; $2 ;;
	2) $4; $2; $3 ;;
	esac
}

note "date: $(date -u +%Y-%m-%dT%H:%MZ)"
nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used --format=csv,noheader | while read -r l; do note "gpu: $l"; done

# The traces replayed: TRACES (a folder of *.trace.gz), default $G/traces.
rm -f "$W"/*.trace
for t in "${TRACES:-$G/traces}"/*.trace.gz; do zcat "$t" >"$W/$(basename "$t" .gz)"; done
traces=$(ls $W/*.trace)

if [ "$what" = all ] || [ "$what" = anchors ] || [ "$what" = replay ] || [ "$what" = asyncpool ] || [ "$what" = placement ] || [ "$what" = footprints ]; then
	nvcc -O2 -o $W/drvbench $G/anchors/drvbench.c -lcuda 2>&1 | tail -5
	$W/drvbench >"$OUT/drvbench.txt" 2>&1
	grep -E 'driver_version|loop_ns|bw_GBps pinned|bw_GBps managed|lat_us cuMemAllocAsync' "$OUT/drvbench.txt" | sed 's/^/anchor: /' | tee -a "$summary"
	TP=$(python3 -c "import torch,os;print(os.path.dirname(torch.__file__))" 2>/dev/null)
	g++ -O2 -std=c++17 -D_GLIBCXX_USE_CXX11_ABI=1 -I"$TP/include" -I/usr/local/cuda/include $G/anchors/ptreplay.cpp \
		-o $W/ptreplay -L"$TP/lib" -lc10_cuda -lc10 -L/usr/local/cuda/lib64 -lcudart \
		-Wl,-rpath,"$TP/lib" -Wl,-rpath,/usr/local/cuda/lib64 2>&1 | tail -5
fi

if [ "$what" = all ] || [ "$what" = replay ]; then
	# Rounds (ROUNDS, default 7) interleave the anchors and gpumem on each
	# trace, so that the machine's drift (up to 40 % between minutes) hits
	# both alike; compare medians.
	for round in $(seq 1 "${ROUNDS:-7}"); do
		for t in $traces; do
			PYTORCH_CUDA_ALLOC_CONF= $W/ptreplay "$t" torch >>"$OUT/ptreplay.jsonl" 2>&1
			$G/gpumem replay --backend cuda --allocator caching --json "$t" >>"$OUT/replay.jsonl" 2>>"$OUT/replay.err"
			$W/ptreplay "$t" driverpool >>"$OUT/ptreplay.jsonl" 2>&1
			$G/gpumem replay --backend cuda --allocator asyncpool --json "$t" >>"$OUT/replay.jsonl" 2>>"$OUT/replay.err"
			PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True $W/ptreplay "$t" torch >>"$OUT/ptreplay.jsonl" 2>&1
			$G/gpumem replay --backend cuda --allocator caching --conf expandable_segments:True --json "$t" >>"$OUT/replay.jsonl" 2>>"$OUT/replay.err"
		done
	done
	note "replay rounds done (errors: $(wc -l <"$OUT/replay.err"))"
	# Where the caching allocator's time goes: every backend call of the loop.
	for t in $traces; do
		for conf in "" expandable_segments:True; do
			$G/gpumem replay --backend cuda --allocator caching --conf "$conf" --profile --json "$t" >>"$OUT/profile.jsonl" 2>>"$OUT/profile.txt"
		done
	done
	sed 's/^/anchor: /' "$OUT/ptreplay.jsonl" | tee -a "$summary"
	sed 's/^/gpumem: /' "$OUT/replay.jsonl" | tee -a "$summary"
fi

if [ "$what" = placement ]; then
	# Expandable segments' two placements (expandable_placement) against
	# PyTorch's expandable segments, in interleaved rounds (ROUNDS, default
	# 5), the order rotated from round to round. MF_CONF and BF_CONF replace
	# the two configurations (e.g. with an expandable_slack).
	for round in $(seq 1 "${ROUNDS:-5}"); do
		for t in $traces; do
			run_pt() { PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True $W/ptreplay "$t" torch >>"$OUT/ptreplay.jsonl" 2>&1; }
			run_mf() { $G/gpumem replay --backend cuda --allocator caching --conf "${MF_CONF:-expandable_segments:True,expandable_placement:mapped_first}" --json "$t" >>"$OUT/replay.jsonl" 2>>"$OUT/replay.err"; }
			run_bf() { $G/gpumem replay --backend cuda --allocator caching --conf "${BF_CONF:-expandable_segments:True,expandable_placement:best_fit}" --json "$t" >>"$OUT/replay.jsonl" 2>>"$OUT/replay.err"; }
			rotate3 "$round" run_pt run_mf run_bf
		done
	done
	note "placement rounds done (errors: $(wc -l <"$OUT/replay.err"))"
	python3 scripts/gpu/compare.py --placement "$OUT" | tee -a "$summary"
fi

if [ "$what" = footprints ]; then
	# The anchors' footprints alone, one round (a footprint is the same in
	# every round): PyTorch native, PyTorch expandable and the driver pool
	# on each trace, for testdata/phase/anchors.jsonl.
	for t in $traces; do
		PYTORCH_CUDA_ALLOC_CONF= $W/ptreplay "$t" torch >>"$OUT/ptreplay.jsonl" 2>&1
		PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True $W/ptreplay "$t" torch >>"$OUT/ptreplay.jsonl" 2>&1
		$W/ptreplay "$t" driverpool >>"$OUT/ptreplay.jsonl" 2>&1
	done
	sed 's/^/anchor: /' "$OUT/ptreplay.jsonl" | tee -a "$summary"
fi

if [ "$what" = asyncpool ]; then
	# asyncpool against the raw driver pool alone, in more rounds (ROUNDS,
	# default 15): each run is a fresh process whose first pool growth
	# varies by up to 60 % from process to process, on both sides alike.
	# With OLD (a previous gpumem binary) set, it runs too, into
	# replay-old.jsonl, and the three take turns going first.
	for round in $(seq 1 "${ROUNDS:-15}"); do
		for t in $traces; do
			run_dp() { $W/ptreplay "$t" driverpool >>"$OUT/ptreplay.jsonl" 2>&1; }
			run_new() { $G/gpumem replay --backend cuda --allocator asyncpool --json "$t" >>"$OUT/replay.jsonl" 2>>"$OUT/replay.err"; }
			run_old() { [ -z "${OLD:-}" ] || "$OLD" replay --backend cuda --allocator asyncpool --json "$t" >>"$OUT/replay-old.jsonl" 2>>"$OUT/replay.err"; }
			rotate3 "$round" run_dp run_new run_old
		done
	done
	note "asyncpool rounds done (errors: $(wc -l <"$OUT/replay.err"))"
	# The same trace five times in one C process: the first pass grows
	# the pool, the others show the steady state.
	nvcc -O2 -o $W/poolreplay $G/anchors/poolreplay.c -lcuda 2>&1 | tail -5
	for t in $traces; do
		$W/poolreplay "$t" pool 5 >>"$OUT/poolreplay.jsonl" 2>&1
	done
	python3 -c "
import json, sys
for l in open(sys.argv[1]):
    if l.startswith('{'):
        j = json.loads(l); print('poolreplay', j['trace'].split('/')[-1], 'pass', j['pass'], round(j['ns_per_pair']))
" "$OUT/poolreplay.jsonl" | tee -a "$summary"
fi

if [ "$what" = replay ] || [ "$what" = asyncpool ]; then
	python3 scripts/gpu/compare.py "$OUT" | tee -a "$summary"
fi

if [ "$what" = all ] || [ "$what" = snapshot ]; then
	# A real PyTorch program's snapshot, converted and replayed through
	# every allocator on the real driver.
	python3 scripts/gpu/record_snapshot.py "$OUT/train.pickle" --steps 8 2>&1 | tail -2 | tee -a "$summary"
	$G/gpumem convert -o "$W/train.trace" "$OUT/train.pickle" 2>&1 | tee -a "$summary"
	for a in caching asyncpool; do
		$G/gpumem replay --backend cuda --allocator $a --json "$OUT/train.pickle" 2>&1 | sed 's/^/snapshot: /' | tee -a "$summary"
	done
	GPUMEM_ENABLE_UNIFIED_MEMORY=1 $G/gpumem replay --backend cuda --allocator managed --json "$OUT/train.pickle" 2>&1 | sed 's/^/snapshot: /' | tee -a "$summary"
	[ -x $W/ptreplay ] && $W/ptreplay "$W/train.trace" torch 2>&1 | sed 's/^/snapshot anchor: /' | tee -a "$summary"
	gzip -9 -k "$OUT/train.pickle"
	rm -f "$OUT/train.pickle"
fi

if [ "$what" = record ]; then
	# Real programs' snapshots (scripts/gpu/record_workloads.py; WORKLOADS
	# names some, default all), converted to traces under $OUT/traces, each
	# program's output in $OUT/record-NAME.log.
	PY=python3
	[ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3
	mkdir -p "$OUT/traces"
	for w in ${WORKLOADS:-unet kvserve cnn vit moe beam prefetch}; do
		$PY scripts/gpu/record_workloads.py $w "$W/$w.pickle" >"$OUT/record-$w.log" 2>&1
		note "record $w: exit $?"
		tail -3 "$OUT/record-$w.log" | tee -a "$summary"
		$G/gpumem convert -o "$OUT/traces/$w.trace.gz" "$W/$w.pickle" 2>&1 | tee -a "$summary"
		rm -f "$W/$w.pickle"
	done
	ls -l "$OUT/traces" | tee -a "$summary"
fi

if [ "$what" = telemetry ]; then
	# NVML's reading of this process's memory against the caching
	# allocator's reserve, of a child process holding 1 GiB, and an
	# out-of-memory error naming the other processes' memory; then what
	# gpumem info shows.
	$G/tests.test -test.v -test.run '^TestGPUTelemetry$' -test.timeout 5m >"$OUT/telemetry.txt" 2>&1; note "tests.test -test.run TestGPUTelemetry exit $?"
	grep -E '^telemetry:|^--- |out-of-memory error' "$OUT/telemetry.txt" | tee -a "$summary"
	$G/gpumem info --backend cuda >"$OUT/telemetry-info.txt" 2>&1
	$G/gpumem info --backend cuda --json >"$OUT/telemetry-info.json" 2>&1
	sed -n '/^telemetry/,$p' "$OUT/telemetry-info.txt" | sed 's/^/info: /' | tee -a "$summary"
	nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader 2>&1 | sed 's/^/nvidia-smi: /' | tee -a "$summary"
fi

if [ "$what" = sleep ]; then
	# Sleep and wake (tests/gpu_sleep_test.go): GPUMEM_SLEEP_GIB GiB (default
	# 40, at most half the free memory) of a replayed trace through the
	# caching allocator with expandable segments, slept and woken; a second
	# process (the test binary again) holds the freed memory meanwhile.
	export GPUMEM_GPU_SHARED=$G
	$G/tests.test -test.v -test.run 'TestGPUSleepWake$' -test.timeout 9m >"$OUT/sleep-gpu.txt" 2>&1
	note "tests.test -test.run TestGPUSleepWake exit $?"
	grep -E '^(--- |ok|FAIL|PASS)|^SLEEP |workload:|asleep:|second process|child:|Wake while' "$OUT/sleep-gpu.txt" | head -40 | tee -a "$summary"
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
		grep -E '^(--- |ok|FAIL|PASS|managed moves:)|GBps|bandwidth' "$OUT/$p-gpu.txt" | head -30 | tee -a "$summary"
	done
	# The same move with the Go runtime on one thread: whether unmapping the
	# host pages (TLB shootdowns across the process's threads) costs bandwidth.
	(cd managed && GOMAXPROCS=1 ../$G/managed.test -test.v -test.run 'GPUManagedMoveBandwidth') >"$OUT/managed-gpu-1proc.txt" 2>&1
	note "managed.test GOMAXPROCS=1 exit $?"
	grep -E '^managed moves:' "$OUT/managed-gpu-1proc.txt" | sed 's/^/1proc: /' | tee -a "$summary"
	grep -E 'GBps|GB/s' "$OUT/managed-gpu-1proc.txt" | head -20 | sed 's/^/1proc: /' | tee -a "$summary"
fi

if [ "$what" = all ] || [ "$what" = bench ]; then
	$G/tests.test -test.run '^$' -test.bench 'GPU' -test.benchtime 2000000x >"$OUT/bench-gpu.txt" 2>&1
	grep -E '^Benchmark' "$OUT/bench-gpu.txt" | sed 's/^/bench: /' | tee -a "$summary"
	grep loop_ns "$OUT/drvbench.txt" 2>/dev/null | sed 's/^/anchor: /' | tee -a "$summary"
fi

if [ "$what" = all ] || [ "$what" = kernels ]; then
	# Kernels: the GPU kernel tests (hand-written PTX, then the project's
	# kernels compiled by NVRTC and by nvcc: TestGPUCompiled*), then launch
	# overhead of an empty kernel from Go (BenchmarkGPULaunchEmpty) and from C (launchbench.c, the same
	# PTX text through cuLaunchKernel), interleaved in rounds (ROUNDS,
	# default 5), synchronizing every 1000 launches on both sides.
	$G/tests.test -test.v -test.run 'GPUKernel' -test.timeout 5m >"$OUT/kernels-gpu.txt" 2>&1; note "tests.test -test.run GPUKernel exit $?"
	grep -E '^(--- |ok|FAIL|PASS)' "$OUT/kernels-gpu.txt" | tee -a "$summary"
	# The compiled path: NVRTC from the test binary (CUDA 13's libnvrtc,
	# its builtins found through LD_LIBRARY_PATH), and a fatbin nvcc builds
	# from kernels/*.cu with the dialect header gpumem renders.
	nvrtc=${GPUMEM_NVRTC_LIBRARY:-$(ls /usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so.13 /usr/local/cuda-13*/targets/x86_64-linux/lib/libnvrtc.so.13 /usr/local/cuda/lib64/libnvrtc.so.1[0-9] 2>/dev/null | head -1)}
	if [ -n "$nvrtc" ]; then
		export GPUMEM_NVRTC_LIBRARY=$nvrtc
		export LD_LIBRARY_PATH=$(dirname "$nvrtc")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	fi
	note "nvrtc: ${nvrtc:-none found}"
	$G/gpumem compile --print-header --backend cuda >$W/gpumem_dialect.h
	cat $G/kernels/saxpy.cu $G/kernels/reduce.cu >$W/saxpy_reduce.cu
	rm -f $W/saxpy_reduce.fatbin
	nvcc -fatbin -include $W/gpumem_dialect.h -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
		-o $W/saxpy_reduce.fatbin $W/saxpy_reduce.cu >"$OUT/nvcc-fatbin.txt" 2>&1
	note "nvcc -fatbin exit $? ($(stat -c %s $W/saxpy_reduce.fatbin 2>/dev/null || echo 0) bytes)"
	[ -s $W/saxpy_reduce.fatbin ] && export GPUMEM_TEST_FATBIN=$W/saxpy_reduce.fatbin
	$G/tests.test -test.v -test.run 'GPUCompiled' -test.timeout 15m >"$OUT/compiled-gpu.txt" 2>&1; note "tests.test -test.run GPUCompiled exit $?"
	grep -E '^\s*(--- |ok|FAIL|PASS)|gpu_rtc_test.go:[0-9]+: (nvrtc|no |GPUMEM_TEST_FATBIN)' "$OUT/compiled-gpu.txt" | tee -a "$summary"
	GPUMEM_KERNEL_PTX=$W/kernels.ptx $G/tests.test -test.run 'GPUKernelWritePTX' >/dev/null 2>&1
	cc -O2 -o $W/launchbench $G/anchors/launchbench.c -ldl 2>&1 | tail -5
	: >"$OUT/launch.txt"
	for round in $(seq 1 "${ROUNDS:-5}"); do
		$W/launchbench $W/kernels.ptx 200000 1000 1 >>"$OUT/launch.txt" 2>&1
		$G/tests.test -test.run '^$' -test.bench 'GPULaunchEmpty' -test.benchtime 200000x >>"$OUT/launch.txt" 2>&1
	done
	python3 - "$OUT/launch.txt" <<'PY' | tee -a "$summary"
import re, statistics, sys
c, g = [], []
for l in open(sys.argv[1]):
    m = re.match(r'launch_ns ([0-9.]+)', l)
    if m: c.append(float(m.group(1)))
    m = re.match(r'BenchmarkGPULaunchEmpty\S*\s+\d+\s+([0-9.]+) ns/op', l)
    if m: g.append(float(m.group(1)))
if c and g:
    mc, mg = statistics.median(c), statistics.median(g)
    print("| launch of an empty kernel | C cuLaunchKernel | gpumem kernel.Launcher | ratio |")
    print("| --- | --- | --- | --- |")
    print(f"| ns per launch, median of {len(c)}/{len(g)} | {mc:.0f} | {mg:.0f} | {mg/mc:.2f}x |")
else:
    print("launch: no figures (see launch.txt)", len(c), len(g))
PY
fi

if [ "$what" = transition ]; then
	# One foreign transition per backend call: cuCtxSetCurrent+cuCtxGetCurrent
	# through gpumem's path, through cgo (one wrapper call, and one cgo call per
	# function) and from C, interleaved in one binary (scripts/gpu/cgoanchor).
	if [ -x $G/cgoanchor.test ]; then
		$G/cgoanchor.test -test.run '^$' -test.bench Transition -test.count "${ROUNDS:-7}" -test.benchtime 1000000x >"$OUT/transition.txt" 2>&1
		note "cgoanchor.test exit $?"
		python3 scripts/gpu/compare.py --transition "$OUT/transition.txt" | tee -a "$summary"
		# asyncpool's pair at its floor (cuMemAllocFromPoolAsync and
		# cuMemFreeAsync, 1 MiB): from C, one cgo call, two transitions of
		# ccall, the backend, in rotation in one process.
		$G/cgoanchor.test -test.run '^$' -test.bench PoolPair -test.count "${ROUNDS:-7}" -test.benchtime 100000x >"$OUT/poolpair.txt" 2>&1
		note "cgoanchor.test PoolPair exit $?"
		python3 scripts/gpu/compare.py --poolpair "$OUT/poolpair.txt" | tee -a "$summary"
	else
		note "transition: no cgoanchor.test (prepare.sh builds it where a C compiler is present)"
	fi
fi

if [ "$what" = all ] || [ "$what" = collectives ]; then
	# Collectives: NCCL from the system (libnccl.so.2, or GPUMEM_NCCL_LIBRARY),
	# one rank on the machine's first GPU, every result checked by the test.
	NCCL_DEBUG=${NCCL_DEBUG:-WARN} $G/tests.test -test.v -test.run 'GPUCollective' -test.timeout 3m >"$OUT/collectives-gpu.txt" 2>&1
	note "tests.test -test.run GPUCollective exit $?"
	grep -E '^\s*(--- |ok|FAIL|PASS)|gpu_collective_test.go:[0-9]+' "$OUT/collectives-gpu.txt" | head -40 | tee -a "$summary"
fi

if [ "$what" = all ] || [ "$what" = blas ]; then
	# BLAS: cuBLAS through the binding (GPUMEM_CUBLAS_LIBRARY, CUDA 13's
	# libcublas.so.13 unless set; its libcublasLt beside it) on the caching
	# allocator's memory, checked against a float64 host reference
	# (TestGPUBLASCorrectnessCUDA), then sgemm and dgemm 4096^3 from Go
	# (TestGPUBLASThroughputCUDA) and from torch.mm (torchmm.py, TF32 off),
	# interleaved in rounds (ROUNDS, default 3); the medians and their ratio.
	cublas=${GPUMEM_CUBLAS_LIBRARY:-$(ls /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13 /usr/local/cuda-13*/targets/x86_64-linux/lib/libcublas.so.13 /usr/local/cuda/lib64/libcublas.so.1[0-9] 2>/dev/null | head -1)}
	if [ -n "$cublas" ]; then
		export GPUMEM_CUBLAS_LIBRARY=$cublas
		export LD_LIBRARY_PATH=$(dirname "$cublas")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	fi
	note "cublas: ${cublas:-none found}"
	py=${PYTHON:-$( [ -x /opt/torch/.venv/bin/python ] && echo /opt/torch/.venv/bin/python || echo python3)}
	$G/tests.test -test.v -test.run 'GPUBLASCorrectness' -test.timeout 5m >"$OUT/blas-gpu.txt" 2>&1; note "tests.test -test.run GPUBLASCorrectness exit $?"
	grep -E '^\s*(--- |ok|FAIL|PASS)|BLAS library|worst error' "$OUT/blas-gpu.txt" | tee -a "$summary"
	: >"$OUT/blas-bench.txt"
	for round in $(seq 1 "${ROUNDS:-3}"); do
		$G/tests.test -test.run 'GPUBLASThroughputCUDA' -test.v -test.timeout 5m >>"$OUT/blas-bench.txt" 2>&1
		"$py" scripts/gpu/torchmm.py 4096 >>"$OUT/blas-bench.txt" 2>&1
	done
	grep -E '^(BLAS|TORCH) ' "$OUT/blas-bench.txt" | tee -a "$summary"
	python3 - "$OUT/blas-bench.txt" <<'PY' | tee -a "$summary"
import re, statistics, sys
runs = {}
for l in open(sys.argv[1]):
    m = re.match(r'(BLAS|TORCH) (\w+) (\d+) TFLOPS=([0-9.]+)', l)
    if m:
        runs.setdefault((m.group(2), m.group(1)), []).append(float(m.group(4)))
print("| 4096^3 | gpumem blas TFLOP/s | torch.mm TFLOP/s | ratio |")
print("| --- | --- | --- | --- |")
for op in ("sgemm", "dgemm"):
    g, t = runs.get((op, "BLAS"), []), runs.get((op, "TORCH"), [])
    if g and t:
        mg, mt = statistics.median(g), statistics.median(t)
        print(f"| {op}, median of {len(g)}/{len(t)} | {mg:.2f} | {mt:.2f} | {mg/mt:.3f} |")
    else:
        print(f"| {op} | no figures ({len(g)}/{len(t)}; see blas-bench.txt) | | |")
PY
fi

echo
echo "==== summary ===="
cat "$summary"
if [ "$what" = all ] || [ "$what" = replay ]; then
	# Last: the replays' table (footprints, host-time ratios, goals).
	echo
	echo "==== replay table ===="
	python3 scripts/gpu/compare.py --table "$OUT" | tee "$OUT/table.md"
fi
