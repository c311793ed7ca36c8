#!/usr/bin/env bash
# Fetch one Debian suite's HIP runtime, its headers and the C library it
# needs, without installing anything:
#
#   .ci/rocm-fetch.sh SUITE DIR
#
# The suite's package lists come from a private apt configuration under DIR
# whose one source entry is a copy of this machine's own Debian entry
# (/etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list) with the
# suite and component changed: no host name is written here, and the
# machine's own apt state is never touched. The packages (libamdhip64-dev,
# hip-dev, the runtime libamdhip64-N and the closure of its run-time
# dependencies, libc6 included) are downloaded into DIR/debs and extracted
# into DIR/root. A second run reuses what DIR holds.
#
# On success it prints three lines on stdout:
#   include=DIR/root/usr/include
#   library=PATH of libamdhip64.so.N
#   libpath=the suite's library directories, colon-separated (for ld.so)
set -euo pipefail
if [ $# -ne 2 ]; then
	echo "usage: $0 SUITE DIR" >&2
	exit 2
fi
suite=$1
mkdir -p "$2"
DIR=$(cd "$2" && pwd)
log() { echo "rocm-fetch($suite): $*" >&2; }
arch=$(dpkg --print-architecture)

# experimental holds only what was uploaded there: its packages are
# preferred, sid's fill in the rest (the C library, for one).
suites=$suite
release=()
if [ "$suite" = experimental ]; then
	suites="sid experimental"
	release=(-o "APT::Default-Release=experimental")
fi

conf=$DIR/apt
mkdir -p "$conf/lists/partial" "$conf/cache/archives/partial" "$conf/etc/preferences.d" "$DIR/debs" "$DIR/root"
touch "$conf/status"
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
	# The first stanza only (the main archive, not security), suite and
	# components replaced.
	awk 'BEGIN{RS=""; ORS="\n\n"} NR==1' /etc/apt/sources.list.d/debian.sources |
		sed -E -e "s/^Suites:.*/Suites: $suites/" -e 's/^Components:.*/Components: main/' >"$conf/sources.sources"
	srcopt=(-o "Dir::Etc::SourceParts=$conf" -o "Dir::Etc::SourceList=/dev/null")
	mv "$conf/sources.sources" "$conf/gpumem.sources"
elif [ -f /etc/apt/sources.list ] && grep -qE '^deb ' /etc/apt/sources.list; then
	grep -E '^deb ' /etc/apt/sources.list | head -n1 |
		sed -E "s/^(deb( \[[^]]*\])? [^ ]+) [^ ]+.*/\1 SUITE main/" >"$conf/one.list"
	for s in $suites; do sed "s/ SUITE / $s /" "$conf/one.list"; done >"$conf/gpumem.list"
	srcopt=(-o "Dir::Etc::SourceList=$conf/gpumem.list" -o "Dir::Etc::SourceParts=/dev/null")
else
	log "no Debian source entry found to copy"
	exit 1
fi
apt=(-o "Dir::State=$conf" -o "Dir::State::Lists=$conf/lists" -o "Dir::State::status=$conf/status"
	-o "Dir::Cache=$conf/cache" -o "Dir::Etc::Preferences=/dev/null" -o "Dir::Etc::PreferencesParts=$conf/etc/preferences.d"
	-o "APT::Architecture=$arch" -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root" "${srcopt[@]}" "${release[@]}")

if [ ! -s "$DIR/debs/.done" ]; then
	log "apt-get update (private lists in $conf)"
	apt-get "${apt[@]}" update -qq >&2
	# The runtime package's name carries the soname's major version.
	rt=$(apt-cache "${apt[@]}" depends libamdhip64-dev 2>/dev/null | awk '/Depends: libamdhip64-[0-9]+$/{print $2; exit}')
	if [ -z "$rt" ]; then
		log "libamdhip64-dev in $suite names no libamdhip64-N runtime"
		exit 1
	fi
	deps=$(apt-cache "${apt[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
		--no-replaces --no-enhances --no-pre-depends "$rt" 2>/dev/null | grep -E '^[a-z0-9]' | grep -v '^<' | sort -u)
	# Runtime closure minus what is never loaded by the library itself.
	pkgs=$(echo "$deps" | grep -v -E '^(debconf|perl-base|dpkg|tar|coreutils|base-files|debianutils|bash|libcrypt1|gcc-[0-9]+-base)$' || true)
	log "downloading: libamdhip64-dev $(echo $pkgs)"
	(cd "$DIR/debs" && apt-get "${apt[@]}" download libamdhip64-dev $pkgs >&2)
	# Older suites keep part of the headers in hip-dev.
	if apt-cache "${apt[@]}" show hip-dev >/dev/null 2>&1; then
		(cd "$DIR/debs" && apt-get "${apt[@]}" download hip-dev >&2)
	fi
	echo "$rt" >"$DIR/debs/.done"
fi
for deb in "$DIR"/debs/*.deb; do
	dpkg -x "$deb" "$DIR/root"
done
lib=$(find "$DIR/root" -name 'libamdhip64.so.[0-9]*' \( -type f -o -type l \) | sort | head -n1)
if [ -z "$lib" ] || [ ! -f "$DIR/root/usr/include/hip/hip_runtime_api.h" ]; then
	log "libamdhip64.so.N or hip/hip_runtime_api.h missing after extraction"
	exit 1
fi
libpath=$(find "$DIR/root" -name "*.so*" -printf "%h\n" | grep -v -e /gconv -e /gdb/ -e /etc | sort -u | paste -sd:)
echo "include=$DIR/root/usr/include"
echo "library=$lib"
echo "libpath=$libpath"
