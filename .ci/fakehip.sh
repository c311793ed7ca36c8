#!/usr/bin/env bash
# Run the HIP backend's conformance suite and allocator rounds over a fake
# HIP runtime (tests/fakehip/testdata/fakehip.c) built with gcc against each
# ROCm version's own hip_runtime_api.h: 5.2 (bookworm), 5.7 (trixie), 6.4
# (sid) and 7.2 (experimental).
#
#   .ci/fakehip.sh DIR
#
# DIR is .ci/rocm-versions.sh's directory: the headers of trixie, sid and
# experimental are read from DIR/SUITE.env (fetched with .ci/rocm-fetch.sh
# when absent); bookworm's are GPUMEM_TEST_HIP_INCLUDE (.ci/vendor-libs.sh),
# skipped with a message when unset. The fake reports the headers' version,
# so the backend uses that version's layouts and constants, and the fake
# reads what the backend writes through the headers' own types: a layout or
# value the backend gets wrong for a version fails that version's run.
set -euo pipefail
if [ $# -ne 1 ]; then
	echo "usage: $0 DIR" >&2
	exit 2
fi
cd "$(dirname "$0")/.."
mkdir -p "$1"
DIR=$(cd "$1" && pwd)
log() { echo "fakehip: $*" >&2; }
start=$(date +%s)

suites=()
incs=()
if [ -n "${GPUMEM_TEST_HIP_INCLUDE:-}" ]; then
	suites+=(bookworm)
	incs+=("$GPUMEM_TEST_HIP_INCLUDE")
else
	log "GPUMEM_TEST_HIP_INCLUDE is not set: ROCm 5.2 (bookworm) skipped"
fi
for suite in trixie sid experimental; do
	if [ ! -s "$DIR/$suite.env" ]; then
		bash .ci/rocm-fetch.sh "$suite" "$DIR/$suite" >"$DIR/$suite.env" 2>"$DIR/$suite.log" || {
			cat "$DIR/$suite.log" >&2
			log "fetching $suite failed"
			exit 1
		}
	fi
	include=
	eval "$(grep '^include=' "$DIR/$suite.env")"
	suites+=("$suite")
	incs+=("$include")
done

# One test binary for every version.
CGO_ENABLED=0 go test -c -o "$DIR/fakehip.test" ./tests/fakehip

failed=0
for i in "${!suites[@]}"; do
	suite=${suites[$i]} inc=${incs[$i]}
	h=$inc/hip/hip_version.h
	version=$(awk '/#define HIP_VERSION_(MAJOR|MINOR|PATCH) /{v[$2]=$3} END{print v["HIP_VERSION_MAJOR"]"."v["HIP_VERSION_MINOR"]"."v["HIP_VERSION_PATCH"]}' "$h")
	lib=$DIR/libfakehip-$suite.so
	# C, with the header's own prototypes: a signature the fake gets wrong
	# does not compile.
	gcc -std=gnu11 -shared -fPIC -O1 -Wall -Wextra -Werror -Wno-deprecated-declarations -Wno-unused-parameter \
		-fvisibility=hidden -D__HIP_PLATFORM_AMD__ -I"$inc" -o "$lib" tests/fakehip/testdata/fakehip.c -lpthread
	out=$DIR/fakehip-$suite.out
	if GPUMEM_TEST_FAKEHIP=$lib GPUMEM_TEST_FAKEHIP_VERSION=$version "$DIR/fakehip.test" -test.count=1 -test.v >"$out" 2>&1; then
		status=ok
	else
		status=FAILED
		failed=1
		grep -E -- '--- FAIL|fakehip: LOUD|_test.go:|\.go:[0-9]+:' "$out" | head -n 40 >&2 || true
	fi
	pass=$(grep -c -E '^ *--- PASS' "$out" || true)
	skip=$(grep -E '^ *--- SKIP' "$out" | sed -E 's/.*--- SKIP: ([^ ]+).*/\1/' | paste -sd' ' || true)
	fail=$(grep -c -E '^ *--- FAIL' "$out" || true)
	log "$suite (HIP $version headers): $status: $pass tests and subtests pass, $fail fail; skipped: ${skip:-none}"
done
log "done in $(( $(date +%s) - start ))s"
exit $failed
