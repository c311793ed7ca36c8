#!/usr/bin/env bash
# Builds everything a GPU run needs into .gpu/ on a development machine (no cgo,
# no CUDA toolchain): the gpumem binary, the test binaries, and copies of the
# anchor programs and traces kept beside the repository in ../shared.
# Then run scripts/gpu/run.sh on the GPU machine from the repository root.
set -euo pipefail
cd "$(dirname "$0")/../.."
shared=${GPUMEM_SHARED:-../shared}
rm -rf .gpu && mkdir -p .gpu/anchors .gpu/traces
export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
go build -o .gpu/gpumem ./cmd/gpumem
go test -c -o .gpu/tests.test ./tests
for p in driver caching asyncpool deferrable; do
	if [ -d "$p" ]; then go test -c -o ".gpu/$p.test" "./$p"; fi
done
cp "$shared"/anchors/*.c "$shared"/anchors/*.cpp .gpu/anchors/
cp "$shared"/traces/*.trace.gz .gpu/traces/
ls -la .gpu
