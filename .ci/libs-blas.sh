#!/usr/bin/env bash
# The BLAS binding against the real libraries Debian ships, on a machine with
# no GPU (Debian 12, as root):
#
#   .ci/libs-blas.sh DIR
#
# - cuBLAS 11.11 (CUDA 11.8): libcublas11 and libcublaslt11 from bookworm's
#   non-free component;
# - hipBLAS 5.5 / rocBLAS 5.5 (ROCm 5.5): libhipblas0 and librocblas0 from
#   trixie's main;
# - hipBLAS 6.4 / rocBLAS 6.4 (ROCm 6.4): libhipblas2 and librocblas4 from
#   sid's main;
# - hipBLAS 3.x / rocBLAS 5.x (ROCm 7): libhipblas3 and librocblas5 from
#   experimental (with sid beneath it).
#
# Nothing is installed: each suite's package lists live in a private apt
# configuration under DIR whose one source entry is a copy of this machine's
# own Debian entry with the suite and components changed (no host name is
# written here), the packages (for the newer suites with the closure of their
# run-time dependencies, the C library included) are downloaded into
# DIR/SUITE/debs and extracted into DIR/SUITE/root. A second run reuses them.
#
# Then tests/blas_vendor_test.go (TestBLASVendor) runs once per library: every
# required symbol of the binding's table resolves, the version query answers,
# and creating a handle with no GPU fails with a clear error, never a crash;
# for hipBLAS and rocBLAS, the suite's own headers (libhipblas-dev,
# librocblas-dev) declare every symbol with the argument count of the table,
# GemmEx with the types of the dialect the binding picks for that version,
# and the enum values of the dialects.
# The newer suites' libraries need their own C library, so their test runs
# through the suite's ld.so, as .ci/rocm-versions.sh runs gpumem.
set -euo pipefail
if [ $# -ne 1 ]; then
	echo "usage: $0 DIR" >&2
	exit 2
fi
cd "$(dirname "$0")/.."
mkdir -p "$1"
DIR=$(cd "$1" && pwd)
log() { echo "libs-blas: $*" >&2; }
arch=$(dpkg --print-architecture)
export DEBIAN_FRONTEND=noninteractive

# fetch SUITE COMPONENTS CLOSURE "HEADERS" PKG...: download PKG... (with the
# closure of their run-time dependencies when CLOSURE is 1) and the header
# packages HEADERS (alone), and extract them into DIR/SUITE/root.
fetch() {
	local suite=$1 comps=$2 closure=$3 headers=$4
	shift 4
	local d=$DIR/$suite conf=$DIR/$suite/apt suites=$suite release=()
	# experimental holds only what was uploaded there: its packages are
	# preferred, sid's fill in the rest (the C library, for one).
	if [ "$suite" = experimental ]; then
		suites="sid experimental"
		release=(-o "APT::Default-Release=experimental")
	fi
	mkdir -p "$conf/lists/partial" "$conf/cache/archives/partial" "$conf/prefs" "$d/debs" "$d/root"
	touch "$conf/status"
	if [ -f /etc/apt/sources.list.d/debian.sources ]; then
		awk 'BEGIN{RS=""; ORS="\n\n"} NR==1' /etc/apt/sources.list.d/debian.sources |
			sed -E -e "s/^Suites:.*/Suites: $suites/" -e "s/^Components:.*/Components: $comps/" >"$conf/gpumem.sources"
		local srcopt=(-o "Dir::Etc::SourceParts=$conf" -o "Dir::Etc::SourceList=/dev/null")
	elif [ -f /etc/apt/sources.list ] && grep -qE '^deb ' /etc/apt/sources.list; then
		grep -E '^deb ' /etc/apt/sources.list | head -n1 |
			sed -E "s/^(deb( \[[^]]*\])? [^ ]+) [^ ]+.*/\1 SUITE $comps/" >"$conf/one.list"
		for x in $suites; do sed "s/ SUITE / $x /" "$conf/one.list"; done >"$conf/gpumem.list"
		local srcopt=(-o "Dir::Etc::SourceList=$conf/gpumem.list" -o "Dir::Etc::SourceParts=/dev/null")
	else
		log "no Debian source entry found to copy"
		return 1
	fi
	local apt=(-o "Dir::State=$conf" -o "Dir::State::Lists=$conf/lists" -o "Dir::State::status=$conf/status"
		-o "Dir::Cache=$conf/cache" -o "Dir::Etc::Preferences=/dev/null" -o "Dir::Etc::PreferencesParts=$conf/prefs"
		-o "APT::Architecture=$arch" -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root" "${srcopt[@]}" "${release[@]}")
	if [ ! -e "$d/debs/.done" ]; then
		log "$suite: apt-get update (private lists)"
		apt-get "${apt[@]}" update -qq >&2
		local pkgs="$*"
		if [ "$closure" = 1 ]; then
			pkgs=$(apt-cache "${apt[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
				--no-replaces --no-enhances --no-pre-depends "$@" 2>/dev/null | grep -E '^[a-z0-9]' | grep -v '^<' | sort -u |
				grep -v -E '^(debconf|perl-base|dpkg|tar|coreutils|base-files|debianutils|bash|libcrypt1|gcc-[0-9]+-base|.*-tests.*|.*-bench.*)$' || true)
		fi
		pkgs="$pkgs $headers"
		log "$suite: downloading $(echo $pkgs)"
		(cd "$d/debs" && apt-get "${apt[@]}" download $pkgs >&2)
		touch "$d/debs/.done"
	fi
	if [ ! -e "$d/root/.done" ]; then
		for deb in "$d"/debs/*.deb; do
			dpkg -x "$deb" "$d/root"
		done
		# rocBLAS's kernel libraries (Tensile code objects, GBs) are loaded
		# when a handle meets a device; with none they are never read.
		find "$d/root" -type d -path '*/lib/*/rocblas' -prune -exec rm -rf {} +
		touch "$d/root/.done"
	fi
}

one() { # the first file matching a name under a root
	find "$1" -name "$2" \( -type f -o -type l \) | sort | head -n1
}

pids=()
fetch bookworm non-free 0 "" libcublas11 libcublaslt11 >"$DIR/bookworm.log" 2>&1 &
pids+=($!)
fetch trixie main 1 "libhipblas-dev librocblas-dev" libhipblas0 librocblas0 >"$DIR/trixie.log" 2>&1 &
pids+=($!)
fetch sid main 1 "libhipblas-dev libhipblas-common-dev librocblas-dev libamdhip64-dev" libhipblas2 librocblas4 >"$DIR/sid.log" 2>&1 &
pids+=($!)
fetch experimental main 1 "libhipblas-dev libhipblas-common-dev librocblas-dev libamdhip64-dev" libhipblas3 librocblas5 >"$DIR/experimental.log" 2>&1 &
pids+=($!)
for i in "${!pids[@]}"; do
	if ! wait "${pids[$i]}"; then
		cat "$DIR"/*.log >&2
		log "a fetch failed"
		exit 1
	fi
done

log "building the tests"
CGO_ENABLED=0 go test -c -o "$DIR/tests.test" ./tests
CGO_ENABLED=0 go test -c -o "$DIR/blas.test" ./blas

run() { # name ld.so libpath env...
	local name=$1 ld=$2 libpath=$3
	shift 3
	log "$name: $*"
	if [ -n "$ld" ]; then
		env "$@" "$ld" --library-path "$libpath" "$DIR/tests.test" -test.run '^TestBLASVendor' -test.v -test.count 1 >"$DIR/$name.txt" 2>&1
	else
		env "$@" "$DIR/tests.test" -test.run '^TestBLASVendor' -test.v -test.count 1 >"$DIR/$name.txt" 2>&1
	fi
	local rc=$?
	grep -E '^\s*(--- |ok|FAIL|PASS)|blas_vendor_test' "$DIR/$name.txt" >&2 || true
	if [ $rc -ne 0 ] || ! grep -q -- '--- PASS: TestBLASVendor' "$DIR/$name.txt"; then
		log "$name failed (exit $rc); the log is $DIR/$name.txt"
		cat "$DIR/$name.txt" >&2
		exit 1
	fi
}

cublas=$(one "$DIR/bookworm/root" 'libcublas.so.11')
lt=$(dirname "$(one "$DIR/bookworm/root" 'libcublasLt.so.11')")
[ -n "$cublas" ] || { log "libcublas.so.11 not found in libcublas11"; exit 1; }
set +e
run cublas11 "" "" GPUMEM_TEST_CUBLAS_LIBRARY="$cublas" LD_LIBRARY_PATH="$lt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
	${GPUMEM_TEST_CUDA_LIBRARY:+GPUMEM_TEST_CUDA_LIBRARY=$GPUMEM_TEST_CUDA_LIBRARY}
for suite in trixie sid experimental; do
	root=$DIR/$suite/root
	hipblas=$(one "$root" 'libhipblas.so.[0-9]*')
	rocblas=$(one "$root" 'librocblas.so.[0-9]*')
	ld=$(one "$root" 'ld-linux-x86-64.so.2')
	if [ -z "$hipblas" ] || [ -z "$rocblas" ] || [ -z "$ld" ]; then
		log "$suite: libhipblas.so.N, librocblas.so.N or ld.so missing after extraction"
		exit 1
	fi
	libpath=$(find "$root" -name "*.so*" -printf "%h\n" | grep -v -e /gconv -e /gdb/ -e /etc | sort -u | paste -sd:)
	log "$suite: headers"
	if ! GPUMEM_TEST_BLAS_INCLUDE="$root/usr/include" GPUMEM_TEST_HIPBLAS_LIBRARY="$hipblas" \
		"$DIR/blas.test" -test.run '^TestBLASHeaders$' -test.v -test.count 1 >"$DIR/headers-$suite.txt" 2>&1 ||
		! grep -q -- '--- PASS: TestBLASHeaders' "$DIR/headers-$suite.txt"; then
		cat "$DIR/headers-$suite.txt" >&2
		log "$suite: the headers disagree with the binding"
		exit 1
	fi
	grep -E 'headers_test' "$DIR/headers-$suite.txt" >&2 || true
	run "hip-$suite" "$ld" "$libpath" GPUMEM_TEST_HIPBLAS_LIBRARY="$hipblas" GPUMEM_TEST_ROCBLAS_LIBRARY="$rocblas" \
		GPUMEM_TEST_BLAS_INCLUDE="$root/usr/include" \
		GPUMEM_TEST_HIP_LIBRARY="$(one "$root" 'libamdhip64.so.[0-9]*')"
done
log "every library passed"
