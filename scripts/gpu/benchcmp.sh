#!/usr/bin/env bash
# Host-side benchmarks of two revisions, interleaved on one machine (the GPU
# machine's CPU or this one): the caching allocator's cache-hit pair and
# asyncpool's bookkeeping, over backends whose calls cost nothing.
#
#   scripts/gpu/benchcmp.sh build REV      # here: test binaries of REV and of the working tree into .gpu/bench
#   scripts/gpu/benchcmp.sh run [ROUNDS]   # there (or here): interleaved rounds, medians last
set -euo pipefail
cd "$(dirname "$0")/../.."
B=.gpu/bench
case "${1:-}" in
build)
	rev=${2:?usage: benchcmp.sh build REV}
	mkdir -p "$B"
	wt=$(mktemp -d)
	git worktree add -q --detach "$wt" "$rev"
	trap 'git worktree remove --force "$wt"' EXIT
	for p in caching asyncpool; do
		(cd "$wt" && CGO_ENABLED=0 go test -c -ldflags='-s -w' -o "$OLDPWD/$B/${p}_before.test" "./$p")
		CGO_ENABLED=0 go test -c -ldflags='-s -w' -o "$B/${p}_after.test" "./$p"
	done
	;;
run)
	d=$(cd "$B" && pwd)
	cd /tmp
	for r in $(seq 1 "${2:-8}"); do
		for v in before after; do
			"$d/caching_$v.test" -test.run '^$' -test.bench 'CacheHitPair$' -test.count 1 -test.cpu 1 | grep Benchmark | sed "s/^/$v /"
			"$d/asyncpool_$v.test" -test.run '^$' -test.bench 'Bookkeeping$' -test.count 1 -test.cpu 1 | grep Benchmark | sed "s/^/$v /"
		done
	done | awk '{print $1, $2, $4}' | sort -k1,2 -k3n |
		awk '{k=$1" "$2; v[k]=v[k]" "$3; n[k]++; a[k, n[k]]=$3} END {for (k in v) printf "%-36s median %7.1f ns:%s\n", k, a[k, int((n[k]+1)/2)], v[k]}'
	;;
*)
	echo "usage: $0 build REV | run [ROUNDS]" >&2
	exit 2
	;;
esac
