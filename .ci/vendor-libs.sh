#!/usr/bin/env bash
# Provision the real vendor runtimes for the vendor-runtime test tier on a
# Debian 12 (bookworm) machine with no GPU. Runs as root.
#
#   .ci/vendor-libs.sh DIR
#
# - HIP: libamdhip64-5 (Debian main) is installed with its dependencies; its
#   development headers (libamdhip64-dev, hip-dev and what they include) are
#   extracted into DIR/include so tests can check enum values and struct
#   layouts against them.
# - CUDA: libcuda1 comes from Debian's non-free component, which is enabled by
#   copying this machine's own Debian source entries with the component
#   changed; the package is downloaded and extracted into DIR, never installed.
#
# - NVRTC: libnvrtc11.2 and libnvrtc-builtins11.8 (non-free; CUDA 11.8's
#   run-time compiler) are downloaded and extracted into DIR/nvrtc, never
#   installed. libnvrtc dlopens its builtins by soname, so their directory is
#   exported in LD_LIBRARY_PATH.
# - hipRTC is inside the installed libamdhip64-5 and compiles through
#   libamd-comgr2, a dependency the install brings (checked below).
#
# On success the last lines on stdout are shell export lines:
#   export GPUMEM_TEST_CUDA_LIBRARY=...
#   export GPUMEM_TEST_HIP_LIBRARY=...
#   export GPUMEM_TEST_HIP_INCLUDE=...
#   export GPUMEM_TEST_NVRTC_LIBRARY=...
#   export GPUMEM_TEST_HIPRTC_LIBRARY=...
#   export LD_LIBRARY_PATH=...
# Everything else goes to stderr, so `eval "$(.ci/vendor-libs.sh DIR)"` works.
set -euo pipefail

if [ $# -ne 1 ]; then
	echo "usage: $0 DIR" >&2
	exit 2
fi
mkdir -p "$1"
DIR=$(cd "$1" && pwd)
log() { echo "vendor-libs: $*" >&2; }
export DEBIAN_FRONTEND=noninteractive

# Enable non-free (.ci/nonfree.sh).
. "$(dirname "$0")/nonfree.sh"
enable_nonfree || exit 1

log "apt-get update"
apt-get update -qq >&2

log "installing libamdhip64-5 (main) with its dependencies"
apt-get install -y -qq --no-install-recommends libamdhip64-5 >&2

# Headers: extract the -dev packages (not installed) into DIR/include.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(
	cd "$work"
	for p in libamdhip64-dev hip-dev libhsa-runtime-dev libhsakmt-dev; do
		if apt-get download "$p" >&2 2>&1; then :; else log "note: $p not downloadable"; fi
	done
	for deb in ./*.deb; do
		[ -e "$deb" ] || continue
		dpkg -x "$deb" "$work/root"
	done
)
mkdir -p "$DIR/include"
if [ -d "$work/root/usr/include" ]; then
	cp -a "$work/root/usr/include/." "$DIR/include/"
fi
if [ ! -f "$DIR/include/hip/hip_runtime_api.h" ]; then
	log "hip/hip_runtime_api.h missing after extracting the -dev packages"
	exit 1
fi

log "downloading libcuda1 (non-free) and extracting it into $DIR/cuda"
rm -f "$work"/*.deb
(cd "$work" && apt-get download libcuda1 >&2)
dpkg -x "$work"/libcuda1_*.deb "$DIR/cuda"

cuda=$(find "$DIR/cuda" -name 'libcuda.so.1' \( -type f -o -type l \) | head -n1)
if [ -z "$cuda" ]; then
	log "libcuda.so.1 not found in the libcuda1 package"
	exit 1
fi
hip=$(dpkg -L libamdhip64-5 | grep -E '/libamdhip64\.so\.[0-9]+$' | head -n1)
if [ -z "$hip" ]; then
	log "libamdhip64.so.N not found in the installed libamdhip64-5"
	exit 1
fi

log "downloading libnvrtc11.2 and libnvrtc-builtins11.8 (non-free) and extracting them into $DIR/nvrtc"
rm -f "$work"/*.deb
(cd "$work" && apt-get download libnvrtc11.2 libnvrtc-builtins11.8 >&2)
for deb in "$work"/libnvrtc*.deb; do
	dpkg -x "$deb" "$DIR/nvrtc"
done
nvrtc=$(find "$DIR/nvrtc" -name 'libnvrtc.so.*' \( -type f -o -type l \) | sort | head -n1)
builtins=$(find "$DIR/nvrtc" -name 'libnvrtc-builtins.so.*' \( -type f -o -type l \) | head -n1)
if [ -z "$nvrtc" ] || [ -z "$builtins" ]; then
	log "libnvrtc.so.N or libnvrtc-builtins.so.N not found in the libnvrtc packages"
	exit 1
fi
if ! dpkg -s libamd-comgr2 >/dev/null 2>&1; then
	log "libamd-comgr2 (hipRTC's compiler) was not installed with libamdhip64-5"
	exit 1
fi

echo "export GPUMEM_TEST_CUDA_LIBRARY=$cuda"
echo "export GPUMEM_TEST_HIP_LIBRARY=$hip"
echo "export GPUMEM_TEST_HIP_INCLUDE=$DIR/include"
echo "export GPUMEM_TEST_NVRTC_LIBRARY=$nvrtc"
echo "export GPUMEM_TEST_HIPRTC_LIBRARY=$hip"
echo "export LD_LIBRARY_PATH=$(dirname "$builtins")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
