#!/usr/bin/env bash
# Check the HIP backend against four ROCm versions without an AMD GPU: the
# headers and runtimes Debian ships in bookworm (5.2.3, already provisioned
# by .ci/vendor-libs.sh), trixie (5.7.1), sid (6.4.3) and experimental
# (7.2.4).
#
#   .ci/rocm-versions.sh DIR GPUMEM
#
# DIR caches the downloads (a second run reuses them); GPUMEM is a built
# cmd/gpumem. For each suite (.ci/rocm-fetch.sh fetches it):
# - the ABI test (hip's TestABIAgainstHeaders) compiles with gcc, against
#   that version's hip_runtime_api.h, a C program generated from the layouts
#   and constants the backend uses for that version, and compares; it also
#   compares the argument words of every row of the driver table (HIP
#   column) and of the RTC table with the prototypes hip_runtime_api.h and
#   hip/hiprtc.h declare;
# - `gpumem symbols --backend hip --json` loads the suite's runtime through
#   the suite's own ld.so and C library, and must resolve every required
#   symbol, report that version and the layouts and constants ABI gives.
# For bookworm the same runs against GPUMEM_TEST_HIP_INCLUDE and
# GPUMEM_TEST_HIP_LIBRARY with the machine's C library.
set -euo pipefail
if [ $# -ne 2 ]; then
	echo "usage: $0 DIR GPUMEM" >&2
	exit 2
fi
cd "$(dirname "$0")/.."
mkdir -p "$1"
DIR=$(cd "$1" && pwd)
GPUMEM=$2
log() { echo "rocm-versions: $*" >&2; }

check() { # name include library ld.so libpath
	local name=$1 inc=$2 lib=$3 ld=$4 libpath=$5 out
	log "$name: headers $inc"
	GPUMEM_TEST_HIP_INCLUDE=$inc CGO_ENABLED=0 go test -count=1 -run '^TestABIAgainstHeaders$' -v ./hip | grep -E 'HIP headers|hip_runtime_api\.h|hiprtc\.h|^(ok|FAIL|---)' >&2
	log "$name: runtime $lib"
	if [ -n "$ld" ]; then
		out=$("$ld" --library-path "$libpath" "$GPUMEM" symbols --backend hip --library "$lib" --json)
	else
		out=$("$GPUMEM" symbols --backend hip --library "$lib" --json)
	fi
	echo "$out" >"$DIR/$name.symbols.json"
	GPUMEM_TEST_SYMBOLS_JSON=$DIR/$name.symbols.json CGO_ENABLED=0 go test -count=1 -run '^TestSymbolsReportABI$' ./hip >&2
	echo "$out" | python3 -c 'import json,sys; r=json.load(sys.stdin); print("rocm-versions: %s: version %s, %d of %d symbols resolved, %d required missing, %d layouts, %d constants" % (sys.argv[1], r["version"], sum(x["resolved"] for x in r["rows"]), len(r["rows"]), r["missing_required"], len(r["layouts"]), len(r["constants"])))' "$name" >&2
}

if [ -n "${GPUMEM_TEST_HIP_INCLUDE:-}" ] && [ -n "${GPUMEM_TEST_HIP_LIBRARY:-}" ]; then
	check bookworm "$GPUMEM_TEST_HIP_INCLUDE" "$GPUMEM_TEST_HIP_LIBRARY" "" ""
fi
# Fetch the three newer suites in parallel.
pids=()
for suite in trixie sid experimental; do
	bash .ci/rocm-fetch.sh "$suite" "$DIR/$suite" >"$DIR/$suite.env" 2>"$DIR/$suite.log" &
	pids+=($!)
done
for i in "${!pids[@]}"; do
	if ! wait "${pids[$i]}"; then
		cat "$DIR"/*.log >&2
		log "fetching a suite failed"
		exit 1
	fi
done
for suite in trixie sid experimental; do
	include= library= libpath=
	eval "$(cat "$DIR/$suite.env")"
	ld=$(find "$DIR/$suite/root" -name 'ld-linux-*.so.*' -type f | head -n1)
	check "$suite" "$include" "$library" "$ld" "$libpath"
done
