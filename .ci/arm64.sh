#!/usr/bin/env bash
# Executes the linux/arm64 build, not just compiles it: the foreign-call path
# (internal/ccall's arm64 trampolines), the loader (internal/dl: dlopen
# through purego's fake cgo runtime with CGO_ENABLED=0), C-callable callbacks
# (internal/callback), the backends (internal/native, driver, hip, kernel) and
# a simulator smoke test run as linux/arm64 test binaries under qemu-user,
# against Debian's arm64 C library (multiarch libc6:arm64). Then the
# by-value CUmemLocation that CUDA 12.2+'s cuMemAdvise_v2 and
# cuMemPrefetchAsync_v2 take is checked against C functions compiled for
# each architecture (internal/native/testdata/locbyval.c): natively on amd64
# with gcc, and on arm64 under qemu with aarch64-linux-gnu-gcc.
#
# Usage (from anywhere): bash .ci/arm64.sh
#
# The tools: qemu-aarch64 (qemu-user-static, or qemu-user), the arm64 C
# library at /lib/ld-linux-aarch64.so.1 and /lib/aarch64-linux-gnu
# (libc6:arm64), gcc and aarch64-linux-gnu-gcc. Under CI=true (or with
# GPUMEM_ARM64_INSTALL=1) the missing ones are installed with apt-get, as
# root; otherwise a machine without them skips this check with a message.
#
# GPUMEM_ARM64_ALL=1 also runs every package of the module under qemu.
set -euo pipefail

cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"
start=$(date +%s)
say() { printf 'arm64: %s\n' "$*"; }
elapsed() { echo $(( $(date +%s) - start ))s; }

find_qemu() { command -v qemu-aarch64-static || command -v qemu-aarch64 || true; }
arm64_libc() { [ -e /lib/ld-linux-aarch64.so.1 ] && [ -e /lib/aarch64-linux-gnu/libc.so.6 ]; }
missing_tools() {
	local m=()
	[ -n "$(find_qemu)" ] || m+=("qemu-aarch64")
	arm64_libc || m+=("arm64 libc (libc6:arm64)")
	command -v aarch64-linux-gnu-gcc >/dev/null || m+=("aarch64-linux-gnu-gcc")
	# The cross compiler's C headers and start files: a recommendation of
	# gcc-aarch64-linux-gnu, which --no-install-recommends leaves out.
	[ -e /usr/aarch64-linux-gnu/include/stdint.h ] || m+=("arm64 C headers (libc6-dev-arm64-cross)")
	command -v gcc >/dev/null || m+=("gcc")
	echo "${m[*]:-}"
}

missing=$(missing_tools)
if [ -n "$missing" ]; then
	if [ "${CI:-}" != true ] && [ "${GPUMEM_ARM64_INSTALL:-}" != 1 ]; then
		say "SKIPPED: missing $missing (CI=true or GPUMEM_ARM64_INSTALL=1 installs them with apt-get as root)"
		exit 0
	fi
	if ! command -v apt-get >/dev/null || [ "$(id -u)" != 0 ]; then
		say "FAIL: missing $missing, and no apt-get as root to install them" >&2
		exit 1
	fi
	say "installing what is missing: $missing"
	if ! dpkg --print-foreign-architectures | grep -qx arm64; then
		dpkg --add-architecture arm64
	fi
	apt-get update -qq
	pkgs=(libc6:arm64 gcc gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
	if apt-cache show qemu-user-static >/dev/null 2>&1; then
		pkgs+=(qemu-user-static)
	else
		pkgs+=(qemu-user)
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
	missing=$(missing_tools)
	if [ -n "$missing" ]; then
		say "FAIL: still missing after apt-get install ${pkgs[*]}: $missing" >&2
		exit 1
	fi
	say "tools installed ($(elapsed))"
fi
qemu=$(find_qemu)
say "$("$qemu" --version | head -1); $(aarch64-linux-gnu-gcc --version | head -1)"

# The sysroot is the host's root: the binaries' interpreter
# /lib/ld-linux-aarch64.so.1 and the libraries under /lib/aarch64-linux-gnu
# come from libc6:arm64. (Not -L /usr/aarch64-linux-gnu: that cross
# package's ld.so is another build of glibc than the multiarch libc it falls
# back to, and a Go binary hangs at start-up with the mixture.)
run_qemu() { "$qemu" -L / "$@"; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Test binaries: package, then its -test.* flags. Everything but the
# simulator runs in full; the simulator is a smoke test (-test.short). hip's
# check of the ABI against the HIP headers compiles them with the host's gcc
# and is architecture-independent: it runs in the native go test.
tests=(
	"./internal/ccall"
	"./bind"
	"./internal/dl"
	"./internal/callback"
	"./internal/native"
	"./driver"
	"./hip -test.skip ^TestABIAgainstHeaders$"
	"./kernel"
	"./sim -test.short"
)

say "cross-compiling test binaries (CGO_ENABLED=0 GOOS=linux GOARCH=arm64)"
for t in "${tests[@]}"; do
	read -r pkg _ <<<"$t"
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go test -c -o "$tmp/$(echo "${pkg#./}" | tr / _).test" "$pkg"
done
say "compiled ($(elapsed))"

say "building internal/native/testdata/locbyval.c for amd64 (gcc) and arm64 (aarch64-linux-gnu-gcc)"
gcc -shared -fPIC -O2 -Wall -Werror -o "$tmp/locbyval-amd64.so" internal/native/testdata/locbyval.c
aarch64-linux-gnu-gcc -shared -fPIC -O2 -Wall -Werror -o "$tmp/locbyval-arm64.so" internal/native/testdata/locbyval.c

# run_test LABEL LOG CMD...: runs a test binary with -test.v into LOG,
# prints a one-line summary and the tests it skipped, and on failure the log.
run_test() {
	local label=$1 log=$2 t0 rc=0
	shift 2
	t0=$(date +%s.%N)
	"$@" >"$log" 2>&1 || rc=$?
	local secs pass skip
	secs=$(printf '%.1f' "$(echo "$(date +%s.%N) - $t0" | bc)")
	pass=$(grep -c -E '^ *--- PASS' "$log" || true)
	skip=$(grep -c -E '^ *--- SKIP' "$log" || true)
	if [ "$rc" != 0 ] || ! tail -n 5 "$log" | grep -qx PASS; then
		cat "$log"
		say "FAIL: $label (exit $rc after ${secs}s)" >&2
		exit 1
	fi
	say "ok   $label: $pass passed, $skip skipped, ${secs}s"
	# go test -v prints a skipped test's reason (its t.Skip line) before
	# its --- SKIP line.
	grep -B1 -E '^ *--- SKIP' "$log" | grep -v -E '^(--|=== RUN.*)$' | sed 's/^/arm64:        /' || true
}

# The vendor runtimes .ci/vendor-libs.sh provisions are the host's (amd64):
# an arm64 process cannot load them, so their variables are not passed on.
unset GPUMEM_TEST_CUDA_LIBRARY GPUMEM_TEST_HIP_LIBRARY GPUMEM_TEST_NVRTC_LIBRARY GPUMEM_TEST_HIPRTC_LIBRARY LD_LIBRARY_PATH

say "running under qemu"
for t in "${tests[@]}"; do
	read -r pkg flags <<<"$t"
	bin="$tmp/$(echo "${pkg#./}" | tr / _).test"
	# -test.timeout dumps the goroutines of a hung binary; the outer timeout
	# kills qemu if even that does not end it (qemu passes SIGTERM to the
	# guest, which may not be listening).
	# shellcheck disable=SC2086 # flags are words
	(cd "$pkg" && GPUMEM_LOCBYVAL_LIB="$tmp/locbyval-arm64.so" run_test "$pkg${flags:+ $flags}" "$tmp/log" \
		timeout -s KILL 300 "$qemu" -L / "$bin" -test.v -test.count=1 -test.timeout=240s $flags)
done

# The by-value check must have run, not skipped, on both architectures.
say "by-value CUmemLocation (cuMemAdvise_v2, cuMemPrefetchAsync_v2) through C"
check_locbyval() {
	local arch=$1 log=$2
	if ! grep -q -- '--- PASS: TestLocationByValueC' "$log"; then
		cat "$log"
		say "FAIL: TestLocationByValueC did not pass on $arch" >&2
		exit 1
	fi
	say "ok   $arch: TestLocationByValueC passed"
}
(cd internal/native && GPUMEM_LOCBYVAL_LIB="$tmp/locbyval-arm64.so" \
	timeout -s KILL 120 "$qemu" -L / "$tmp/internal_native.test" -test.v -test.count=1 -test.run '^TestLocationByValueC$' >"$tmp/locbyval-arm64.log" 2>&1) ||
	{ cat "$tmp/locbyval-arm64.log"; say "FAIL: TestLocationByValueC on arm64" >&2; exit 1; }
check_locbyval "linux/arm64 (qemu, aarch64-linux-gnu-gcc)" "$tmp/locbyval-arm64.log"
GPUMEM_LOCBYVAL_LIB="$tmp/locbyval-amd64.so" CGO_ENABLED=0 go test -count=1 -v -run '^TestLocationByValueC$' ./internal/native >"$tmp/locbyval-amd64.log" 2>&1 ||
	{ cat "$tmp/locbyval-amd64.log"; say "FAIL: TestLocationByValueC on $(go env GOARCH)" >&2; exit 1; }
check_locbyval "linux/$(go env GOARCH) (native, gcc)" "$tmp/locbyval-amd64.log"

if [ "${GPUMEM_ARM64_ALL:-}" = 1 ]; then
	say "GPUMEM_ARM64_ALL=1: every package under qemu"
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go test -count=1 -exec "$qemu -L /" ./...
fi

say "OK in $(elapsed): ${#tests[@]} test binaries ran as linux/arm64 under $(basename "$qemu"); the by-value location reached C intact on arm64 and amd64"
