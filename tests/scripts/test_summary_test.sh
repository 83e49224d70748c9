#!/usr/bin/env bash
# scripts/test_summary.sh on a ctest log: skipped GPU tests are counted as skipped, never as run.
# Usage: test_summary_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
printf '%s\n' "100% tests passed, 0 tests failed out of 3" "" "The following tests did not run:" \
  $'\t 38 - validate_gpu_test.ValidateGpu.CorrectKernelIsOkWithTimings (Skipped)' \
  $'\t195 - runtime_gpu_test.RuntimeGpu.DetectsTheDeviceAndRunsItsKernel (Skipped)' \
  $'\t 12 - store_test.Redis/Contract.Works (Skipped)' > "$log"
out=$("$src/scripts/test_summary.sh" "$build" "$log")
echo "$out"
[[ "$out" =~ ^"GPU tests: 2 of "[0-9]+" SKIPPED (no usable CUDA device), "[0-9]+" ran; other tests skipped: 1"$ ]]
printf '%s\n' "100% tests passed, 0 tests failed out of 3" > "$log"
out=$("$src/scripts/test_summary.sh" "$build" "$log")
echo "$out"
[[ "$out" =~ ^"GPU tests: all "[0-9]+" ran, none skipped; other tests skipped: 0"$ ]]
