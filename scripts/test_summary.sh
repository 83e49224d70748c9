#!/usr/bin/env bash
# Prints how many GPU tests ran and how many skipped, from a ctest log (ctest lists skipped tests
# as "NN - name (Skipped)"). GPU tests are the tests of the *_gpu_test executables.
# Usage: scripts/test_summary.sh BUILD_DIR CTEST_LOG
set -euo pipefail
build=$1
log=$2
gpu_total=$(ctest --test-dir "$build" -N | grep -cE 'Test +#[0-9]+: [A-Za-z0-9_]+_gpu_test\.' || true)
gpu_skipped=$(grep -cE '^[[:space:]]*[0-9]+ - [A-Za-z0-9_]+_gpu_test\..*\(Skipped\)' "$log" || true)
other_skipped=$(grep -E '^[[:space:]]*[0-9]+ - .*\(Skipped\)' "$log" | grep -cvE ' - [A-Za-z0-9_]+_gpu_test\.' || true)
if [ "$gpu_skipped" -gt 0 ]; then
  echo "GPU tests: $gpu_skipped of $gpu_total SKIPPED (no usable CUDA device), $((gpu_total - gpu_skipped)) ran; other tests skipped: $other_skipped"
else
  echo "GPU tests: all $gpu_total ran, none skipped; other tests skipped: $other_skipped"
fi
