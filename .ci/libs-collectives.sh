#!/usr/bin/env bash
# The collective libraries from Debian's packages, checked with no GPU:
#
#   .ci/libs-collectives.sh DIR
#
# - RCCL: librccl1 (ROCm's RCCL 5.4.3) is in trixie and sid main;
# - NCCL: libnccl2 is in trixie contrib (2.22.3) and sid contrib (2.29.7);
#   neither is in bookworm (not in main, contrib or non-free).
# Both need a newer C library than bookworm's, so, as .ci/rocm-fetch.sh
# does for the HIP runtime, the packages of one suite (trixie) and the
# closure of their run-time dependencies are downloaded with a private apt
# configuration (a copy of this machine's own Debian entry with the suite
# and components changed; the machine's apt state is never touched) and
# extracted into DIR/root, never installed. The collective package's test
# binary then runs through that suite's own ld.so and libraries:
# TestVendorLibraries checks that every required symbol resolves, that
# ncclGetVersion and ncclGetErrorString answer with no device, and that a
# communicator cannot be made without one (a clear error, no crash). A
# second run reuses what DIR holds.
#
# Then the 128-byte ncclUniqueId that ncclCommInitRank takes by value is
# checked against C stand-ins with nccl.h's parameter lists
# (collective/testdata/idbyval.c, TestUniqueIDByValueC): built with gcc
# for this machine, and, where qemu-aarch64 and aarch64-linux-gnu-gcc are
# installed (.ci/arm64.sh installs them under CI), for arm64 under qemu.
set -euo pipefail
if [ $# -ne 1 ]; then
	echo "usage: $0 DIR" >&2
	exit 2
fi
cd "$(dirname "$0")/.."
mkdir -p "$1"
DIR=$(cd "$1" && pwd)
suite=trixie
log() { echo "libs-collectives: $*" >&2; }
arch=$(dpkg --print-architecture)

conf=$DIR/apt
mkdir -p "$conf/lists/partial" "$conf/cache/archives/partial" "$conf/etc/preferences.d" "$DIR/debs" "$DIR/root"
touch "$conf/status"
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
	awk 'BEGIN{RS=""; ORS="\n\n"} NR==1' /etc/apt/sources.list.d/debian.sources |
		sed -E -e "s/^Suites:.*/Suites: $suite/" -e 's/^Components:.*/Components: main contrib/' >"$conf/gpumem.sources"
	srcopt=(-o "Dir::Etc::SourceParts=$conf" -o "Dir::Etc::SourceList=/dev/null")
elif [ -f /etc/apt/sources.list ] && grep -qE '^deb ' /etc/apt/sources.list; then
	grep -E '^deb ' /etc/apt/sources.list | head -n1 |
		sed -E "s/^(deb( \[[^]]*\])? [^ ]+) [^ ]+.*/\1 $suite main contrib/" >"$conf/gpumem.list"
	srcopt=(-o "Dir::Etc::SourceList=$conf/gpumem.list" -o "Dir::Etc::SourceParts=/dev/null")
else
	log "no Debian source entry found to copy"
	exit 1
fi
apt=(-o "Dir::State=$conf" -o "Dir::State::Lists=$conf/lists" -o "Dir::State::status=$conf/status"
	-o "Dir::Cache=$conf/cache" -o "Dir::Etc::Preferences=/dev/null" -o "Dir::Etc::PreferencesParts=$conf/etc/preferences.d"
	-o "APT::Architecture=$arch" -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root" "${srcopt[@]}")

if [ ! -s "$DIR/debs/.done" ]; then
	log "apt-get update ($suite main contrib, private lists in $conf)"
	apt-get "${apt[@]}" update -qq >&2
	deps=$(apt-cache "${apt[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
		--no-replaces --no-enhances --no-pre-depends librccl1 libnccl2 2>/dev/null | grep -E '^[a-z0-9]' | grep -v '^<' | sort -u)
	pkgs=$(echo "$deps" | grep -v -E '^(debconf|perl-base|dpkg|tar|coreutils|base-files|debianutils|bash|libcrypt1|gcc-[0-9]+-base)$' || true)
	log "downloading: $(echo $pkgs)"
	(cd "$DIR/debs" && apt-get "${apt[@]}" download $pkgs >&2)
	echo "$suite" >"$DIR/debs/.done"
fi
for deb in "$DIR"/debs/*.deb; do
	dpkg -x "$deb" "$DIR/root"
done
rccl=$(find "$DIR/root" -name 'librccl.so.1*' \( -type f -o -type l \) | sort | head -n1)
nccl=$(find "$DIR/root" -name 'libnccl.so.2*' \( -type f -o -type l \) | sort | head -n1)
ld=$(find "$DIR/root" -name 'ld-linux-*.so.*' -type f | head -n1)
if [ -z "$rccl" ] || [ -z "$nccl" ] || [ -z "$ld" ]; then
	log "librccl.so.1, libnccl.so.2 or ld.so missing after extraction"
	exit 1
fi
libpath=$(find "$DIR/root" -name "*.so*" -printf "%h\n" | grep -v -e /gconv -e /gdb/ -e /etc | sort -u | paste -sd:)
log "RCCL $rccl"
log "NCCL $nccl"
CGO_ENABLED=0 go test -c -o "$DIR/collective.test" ./collective
# No device here: the CUDA driver must not be found either (a machine's
# own libcuda would make the runtime inside NCCL look for a GPU). One
# process per library, as a program uses one vendor's: with NCCL loaded,
# initialised (its failed ncclCommInitAll starts its runtime) and unloaded,
# a process that then loaded RCCL, whose symbols have the same names,
# crashed about once in three; each alone passed eight runs of eight.
for var in GPUMEM_TEST_NCCL_LIBRARY="$nccl" GPUMEM_TEST_RCCL_LIBRARY="$rccl"; do
	env -u LD_LIBRARY_PATH "$var" \
		"$ld" --library-path "$libpath" "$DIR/collective.test" -test.count=1 -test.v -test.run '^TestVendorLibraries$' >&2
done

log "by-value ncclUniqueId through C, $(go env GOARCH)"
gcc -shared -fPIC -O2 -Wall -Werror -o "$DIR/idbyval-host.so" collective/testdata/idbyval.c
GPUMEM_IDBYVAL_LIB="$DIR/idbyval-host.so" CGO_ENABLED=0 go test -count=1 -v -run '^TestUniqueIDByValueC$' ./collective >"$DIR/idbyval-host.log" 2>&1 &&
	grep -q -- '--- PASS: TestUniqueIDByValueC' "$DIR/idbyval-host.log" ||
	{ cat "$DIR/idbyval-host.log"; log "FAIL: TestUniqueIDByValueC"; exit 1; }
qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64 || true)
if [ -n "$qemu" ] && command -v aarch64-linux-gnu-gcc >/dev/null && [ -e /lib/ld-linux-aarch64.so.1 ]; then
	log "by-value ncclUniqueId through C, arm64 under $(basename "$qemu")"
	aarch64-linux-gnu-gcc -shared -fPIC -O2 -Wall -Werror -o "$DIR/idbyval-arm64.so" collective/testdata/idbyval.c
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go test -c -o "$DIR/collective-arm64.test" ./collective
	(cd collective && GPUMEM_IDBYVAL_LIB="$DIR/idbyval-arm64.so" timeout -s KILL 300 "$qemu" -L / "$DIR/collective-arm64.test" \
		-test.v -test.count=1 -test.run '^(TestUniqueIDByValueC|TestUniqueIDWords)$' >"$DIR/idbyval-arm64.log" 2>&1) &&
		grep -q -- '--- PASS: TestUniqueIDByValueC' "$DIR/idbyval-arm64.log" ||
		{ cat "$DIR/idbyval-arm64.log"; log "FAIL: TestUniqueIDByValueC on arm64"; exit 1; }
else
	log "note: no qemu-aarch64 or aarch64-linux-gnu-gcc here: the arm64 by-value check did not run"
fi
log "ok"
