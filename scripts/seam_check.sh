#!/usr/bin/env bash
# The evaluator seam (tool/evaluate, issue 29 deliverable 2) on a GPU host: the local evaluator
# (validate/validator_evaluator.h) and the notes on a result (validate/annotate.h) that moved out of
# evolve/ and sol/, Evaluation carrying kevo::Status, and the search and the tuner through them,
# locally and through the queue. One PASS/FAIL/SKIP line per test, then a summary; exit 0 only
# when nothing failed.
#   tune_gpu_test     the tuner through ValidatorEvaluator; speed-of-light notes via annotate_sol
#   tune_cli_test     `kernelevo tune` (its status lines and --json trials)
#   evolve_gpu_test   a short real search through `kernelevo search` and the real validator
#   worker_gpu_test   RemoteEvaluator (to_evaluation of a worker's result, Status::ok), search --workers
#   validate_gpu_test the validator's verdicts (Status from evaluate/status.h)
#   cli_gpu_test      `kernelevo validate` / cache commands (speed of light and ptxas notes in --json)
# Usage (repo root, after scripts/device_build.sh): scripts/seam_check.sh
# Logs go to $OUT (default /tmp/kevo-out).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/kevo-out}
mkdir -p "$out"
[ -f build-gpu/env.sh ] || { echo "FAIL build-gpu/env.sh missing: run scripts/device_build.sh first"; exit 1; }
source build-gpu/env.sh
source scripts/gtest_lines.sh
export KERNELEVO_CACHE_HOME=build-gpu/test-cache  # relative on purpose: every part makes it absolute
pass=0; fail=0; skip=0
t0=$(date +%s)
exes=(tune/tune_gpu_test@600 tune/tune_cli_test@600 evolve/evolve_gpu_test@900 worker/worker_gpu_test@900
      validate/validate_gpu_test@900 cli/cli_gpu_test@900)
for e in "${exes[@]}"; do
  log="$out/seam_check.$(basename "${e%%@*}").log"
  run_gtests "$e" "$log"
  [ -f "$log" ] && grep -hE "speedup|Expected equality|Which is:|Failure" "$log" | head -6 | sed 's/^/   /'
done
echo "seam_check: $pass passed, $fail failed, $skip skipped in $(( $(date +%s) - t0 )) s"
[ "$fail" -eq 0 ]
