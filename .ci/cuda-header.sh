#!/usr/bin/env bash
# Check the CUDA backend's ABI data against a real cuda.h without an NVIDIA
# GPU or toolkit: the header Debian bookworm ships in non-free's
# nvidia-cuda-dev (CUDA 11.8), and the libcuda .ci/vendor-libs.sh provisions
# (driver 535, CUDA 12.2).
#
#   .ci/cuda-header.sh DIR [GPUMEM]
#
# - nvidia-cuda-dev (about 774 MB) is downloaded into DIR and only
#   usr/include/cuda.h and usr/include/nvrtc.h are streamed out of it (both
#   lie in the archive's first few MB; cuda.h includes nothing else from
#   the package, only <stdlib.h> and <stdint.h>, and nvrtc.h in C only
#   <stdlib.h>); the .deb is then deleted. DIR keeps the headers and the
#   package version they came from: a second run with the same candidate
#   version downloads nothing.
# - driver's TestABIAgainstCUDAHeader compiles with gcc, against that cuda.h,
#   a C program generated from driver.ABI(v) for the header's CUDA_VERSION v,
#   and compares every struct layout and constant; it also compares the
#   argument words of every row of the driver table (CUDA column) with the
#   prototype cuda.h declares for its symbol, and of the RTC table with
#   nvrtc.h's.
# - With GPUMEM_TEST_CUDA_LIBRARY set (vendor-libs.sh exports it) and GPUMEM
#   a built cmd/gpumem, `gpumem symbols --backend cuda --json` must resolve
#   every required symbol and report driver.ABI's layouts and constants for
#   the library's version (driver's TestSymbolsReportABI).
#
# Non-free must already be enabled (.ci/vendor-libs.sh does it; .ci/run runs
# it first). Runs as root for apt-get.
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: $0 DIR [GPUMEM]" >&2
	exit 2
fi
cd "$(dirname "$0")/.."
mkdir -p "$1"
DIR=$(cd "$1" && pwd)
GPUMEM=${2:-}
start=$(date +%s)
log() { echo "cuda-header: $* ($(( $(date +%s) - start ))s)" >&2; }
pkg=nvidia-cuda-dev
inc=$DIR/root/usr/include

version=$(apt-cache show --no-all-versions "$pkg" 2>/dev/null | awk '$1 == "Version:" { print $2; exit }' || true)
if [ -z "$version" ]; then
	log "apt knows no $pkg: enable Debian's non-free component first (.ci/vendor-libs.sh DIR does)"
	exit 1
fi
if [ -f "$inc/cuda.h" ] && [ -f "$inc/nvrtc.h" ] && [ "$(cat "$DIR/version" 2>/dev/null)" = "$version" ]; then
	log "cuda.h and nvrtc.h of $pkg $version already in $inc"
else
	rm -rf "$DIR/root" "$DIR/version"
	if ! ls "$DIR/${pkg}_"*.deb >/dev/null 2>&1; then
		log "downloading $pkg $version"
		(cd "$DIR" && apt-get download -q "$pkg" 2>&1 | { grep -v '^W: Download is performed unsandboxed' || true; } >&2)
	fi
	deb=$(ls "$DIR/${pkg}_"*.deb | head -n1)
	log "extracting usr/include/cuda.h and nvrtc.h from $(basename "$deb")"
	mkdir -p "$DIR/root"
	# tar stops once it has the first (only) cuda.h and nvrtc.h, near the
	# start of the archive; dpkg-deb then dies of SIGPIPE, so only tar's
	# status and the files count.
	set +o pipefail
	dpkg-deb --fsys-tarfile "$deb" 2>/dev/null | tar -x --occurrence=1 -C "$DIR/root" ./usr/include/cuda.h ./usr/include/nvrtc.h
	rc=${PIPESTATUS[1]}
	set -o pipefail
	if [ "$rc" -ne 0 ] || [ ! -s "$inc/cuda.h" ] || [ ! -s "$inc/nvrtc.h" ]; then
		log "usr/include/cuda.h or nvrtc.h not found in $deb (tar exit $rc)"
		exit 1
	fi
	# Anything else cuda.h includes must come from the C library, not the package.
	missing=$(grep -oE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"][^>"]+' "$inc/cuda.h" |
		sed -E 's/.*[<"]//' | grep -vE '^(stdlib|stdint)\.h$' || true)
	if [ -n "$missing" ]; then
		log "cuda.h includes headers this script does not extract: $missing"
		exit 1
	fi
	echo "$version" >"$DIR/version"
	rm -f "$deb"
fi
log "cuda.h: $(grep -m1 -E '^#define CUDA_VERSION ' "$inc/cuda.h")"

log "TestABIAgainstCUDAHeader against $inc"
GPUMEM_TEST_CUDA_INCLUDE=$inc CGO_ENABLED=0 go test -count=1 -run '^TestABIAgainstCUDAHeader$' -v ./driver |
	grep -E 'cuda\.h|^(ok|FAIL|---)|:[0-9]+: ' >&2

if [ -n "${GPUMEM_TEST_CUDA_LIBRARY:-}" ] && [ -n "$GPUMEM" ]; then
	log "gpumem symbols --backend cuda --json against $GPUMEM_TEST_CUDA_LIBRARY"
	"$GPUMEM" symbols --backend cuda --library "$GPUMEM_TEST_CUDA_LIBRARY" --json >"$DIR/symbols.json"
	GPUMEM_TEST_CUDA_SYMBOLS_JSON=$DIR/symbols.json CGO_ENABLED=0 go test -count=1 -run '^TestSymbolsReportABI$' -v ./driver |
		grep -E '^(ok|FAIL|---)|:[0-9]+: ' >&2
else
	log "no GPUMEM_TEST_CUDA_LIBRARY or no GPUMEM: the symbols report check is skipped"
fi
log "done"
