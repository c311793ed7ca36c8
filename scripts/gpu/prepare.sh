#!/usr/bin/env bash
# Builds everything a GPU run needs into .gpu/ on a development machine (no cgo,
# no CUDA toolchain): the gpumem binary, the test binaries, and copies of the
# anchor programs and traces kept beside the repository in ../shared.
# Then run scripts/gpu/run.sh on the GPU machine from the repository root,
# carrying .gpu/final (the folder is small: stripped binaries, anchors, traces).
set -euo pipefail
cd "$(dirname "$0")/../.."
shared=${GPUMEM_SHARED:-../shared}
G=${G:-.gpu/final}
rm -rf "$G" && mkdir -p "$G/anchors" "$G/traces" "$G/kernels"
export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
ld='-s -w'
go build -ldflags="$ld" -o "$G/gpumem" ./cmd/gpumem
# The same binary with short calls held off (every driver call through
# runtime.cgocall), for run.sh asyncpool's OLD: OLD=$G/gpumem-ordinary.
printf '#!/bin/sh\nGPUMEM_SHORT_CALLS=0 exec "$(dirname "$0")/gpumem" "$@"\n' >"$G/gpumem-ordinary"
chmod +x "$G/gpumem-ordinary"
go test -c -ldflags="$ld" -o "$G/tests.test" ./tests
for p in asyncpool managed deferrable; do
	go test -c -ldflags="$ld" -o "$G/$p.test" "./$p"
done
# The cgo anchor of the transition benchmark, outside the product: its
# sources are templates (scripts/gpu/cgoanchor/*.go.in), made a package of
# the module (it uses internal/ccall and internal/native) only for the time
# of the build, with cgo, where a C compiler is present.
if command -v gcc >/dev/null; then
	gen=$(mktemp -d scripts/gpu/cgoanchor/gen.XXXXXX)
	trap 'rm -rf "$gen"' EXIT
	for f in scripts/gpu/cgoanchor/*.go.in; do
		cp "$f" "$gen/$(basename "${f%.in}")"
	done
	CGO_ENABLED=1 go test -c -tags cgoanchor -ldflags="$ld" -o "$G/cgoanchor.test" "./$gen"
	rm -rf "$gen"
fi
cp "$shared"/anchors/*.c "$shared"/anchors/*.cpp "$G/anchors/"
cp "$shared"/traces/*.trace.gz testdata/*.trace.gz "$G/traces/"
cp scripts/gpu/*.c scripts/gpu/*.h "$G/anchors/" 2>/dev/null || true
# The kernels' sources, for the fatbin nvcc builds (run.sh kernels); the
# dialect header comes from gpumem compile --print-header there.
cp kernels/*.cu "$G/kernels/"
du -sh "$G"
