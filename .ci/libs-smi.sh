#!/usr/bin/env bash
# The telemetry libraries from Debian's packages, on a machine with no GPU:
#
#   .ci/libs-smi.sh [DIR]     (default DIR: $TMPDIR/gpumem-smi)
#
# - NVML: libnvidia-ml1 (bookworm non-free; the component is added as
#   .ci/vendor-libs.sh adds it, by copying this machine's Debian entry).
# - ROCm SMI: librocm-smi64-1 (bookworm main, ROCm 5.2.3).
#
# Both packages are downloaded and unpacked into DIR, not installed
# (libnvidia-ml1 depends on the whole driver stack by nvidia-alternative).
# Then the telemetry package's vendor test runs against each file: every
# required symbol of the "smi" binding resolves, and opening the library
# with no GPU fails with gpumem.ErrNoDevice (nvmlInit_v2: Driver Not Loaded;
# rsmi_init: initialization error), never a crash; the symbols command
# checks the same table. Idempotent: a second run reuses DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-${TMPDIR:-/tmp}/gpumem-smi}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
log() { echo "libs-smi: $*" >&2; }
export DEBIAN_FRONTEND=noninteractive

. .ci/nonfree.sh
if ! apt-cache show libnvidia-ml1 >/dev/null 2>&1; then
	enable_nonfree || exit 1
	log "apt-get update"
	apt-get update -qq >&2
fi

root=$DIR/root
if [ ! -e "$DIR/.done" ]; then
	mkdir -p "$DIR/debs" "$root"
	(cd "$DIR/debs" && apt-get download libnvidia-ml1 librocm-smi64-1 >&2)
	for d in "$DIR"/debs/*.deb; do dpkg-deb -x "$d" "$root"; done
	touch "$DIR/.done"
fi
nvml=$(find "$root" -name 'libnvidia-ml.so.1' | head -n1)
rsmi=$(find "$root" -name 'librocm_smi64.so.1' | head -n1)
if [ -z "$nvml" ] || [ -z "$rsmi" ]; then
	log "the packages hold no libnvidia-ml.so.1 or librocm_smi64.so.1 under $root"
	exit 1
fi
log "NVML: $nvml"
log "ROCm SMI: $rsmi"

export CGO_ENABLED=0
GPUMEM_NVML_LIBRARY=$nvml GPUMEM_ROCM_SMI_LIBRARY=$rsmi \
	go test -count=1 -run 'TestVendorLibraries' -v ./telemetry/ 2>&1 | tee "$DIR/test.log" >&2
if grep -q -- '--- SKIP' "$DIR/test.log"; then
	log "a vendor test skipped"
	exit 1
fi
