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
pass=0; fail=0; skip=0
t0=$(date +%s)
exes=(tune/tune_gpu_test@600 tune/tune_cli_test@600 evolve/evolve_gpu_test@900 worker/worker_gpu_test@900
      validate/validate_gpu_test@900 cli/cli_gpu_test@900)
for e in "${exes[@]}"; do
  exe=${e%%@*}; lim=${e#*@}
  bin=build-gpu/tests/$exe
  if [ ! -x "$bin" ]; then echo "FAIL $exe (not built)"; fail=$((fail + 1)); continue; fi
  log="$out/seam_check.$(basename "$exe").log"
  s=$(date +%s)
  KERNELEVO_CACHE_HOME=build-gpu/test-cache timeout -k 10 "$lim" stdbuf -oL -eL "$bin" > "$log" 2>&1
  rc=$?
  while read -r verdict name; do
    case $verdict in
      OK) echo "PASS $name"; pass=$((pass + 1)) ;;
      FAILED) echo "FAIL $name"; fail=$((fail + 1)) ;;
      SKIPPED) echo "SKIP $name"; skip=$((skip + 1)) ;;
    esac
  done < <(sed -nE 's/^\[ +(OK|FAILED|SKIPPED) +\] ([A-Za-z0-9_/]+\.[A-Za-z0-9_/]+)(, where .*)? \([0-9]+ ms\)$/\1 \2/p' "$log")
  unfinished=$(awk '/^\[ RUN      \]/{r=$4} /^\[       OK \]|^\[  FAILED  \]|^\[  SKIPPED \]/{r=""} END{print r}' "$log")
  if [ -n "$unfinished" ]; then echo "FAIL $unfinished (unfinished: killed after $lim s)"; fail=$((fail + 1)); fi
  if [ "$rc" -ne 0 ] && ! grep -q '^\[  FAILED  \]' "$log" && [ -z "$unfinished" ]; then
    echo "FAIL $exe (exit $rc without a failed test; see $log)"; fail=$((fail + 1))
  fi
  grep -hE "speedup|Expected equality|Which is:|Failure" "$log" | head -6 | sed 's/^/   /'
  echo "   $exe: exit $rc, $(( $(date +%s) - s )) s, log $log"
done
echo "seam_check: $pass passed, $fail failed, $skip skipped in $(( $(date +%s) - t0 )) s"
[ "$fail" -eq 0 ]
