#!/usr/bin/env bash
# Builds KernelEvo and runs every test (README: "Run all tests"). GPU tests (the *_gpu_test
# executables) skip where no CUDA device exists; the last line says how many did, so a skip never
# reads as a pass. Usage: scripts/test.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
build=${1:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j"$(nproc)"
log="$build/ctest.log"
set +e
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" --timeout 1200 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
scripts/test_summary.sh "$build" "$log"
exit "$rc"
