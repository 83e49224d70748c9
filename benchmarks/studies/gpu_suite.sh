#!/usr/bin/env bash
# The GPU suite on a GPU host, in one call: builds (scripts/device_build.sh), then runs every test
# executable that holds GPU tests, one at a time (one GPU is one timing domain), each under a time
# limit, and prints one line per executable with its passed/failed/skipped counts.
# Usage: benchmarks/studies/gpu_suite.sh [EXE_REGEX]   (default: all of them; KEVO_SUITE_EXES picks tests,
# below). Logs go to $OUT (default /tmp/kevo-out). The Python helper's GPU tests are ctest's:
#   ctest --test-dir build-gpu -R 'pyhelper_test|model_load_test|load_op_cublas_test'
# Each executable gets KEVO_SUITE_TIMEOUT seconds (default 240); none starts after KEVO_SUITE_DEADLINE s.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/kevo-out}
mkdir -p "$out"
filter=${1:-.}
limit=${KEVO_SUITE_TIMEOUT:-240}
deadline=${KEVO_SUITE_DEADLINE:-100000}  # seconds after start: later executables are left out, and said so
t0=$(date +%s)
echo "== build ($(date +%T))"
if [ -n "${KEVO_NO_BUILD:-}" ]; then echo "(not rebuilt: KEVO_NO_BUILD)";
elif ! scripts/device_build.sh > "$out/build.log" 2>&1; then tail -60 "$out/build.log"; exit 1; fi
echo "built in $(( $(date +%s) - t0 )) s"
source build-gpu/env.sh
export KERNELEVO_CACHE_HOME=/tmp/kevo-test-cache
# Executables with GPU tests first, the sandbox's CPU escapes after; "exe[@seconds][:gtest_filter]"
# (@seconds: that executable's own time limit, for the long ones).
# (triton_gpu_test skips without Triton; benchmarks/studies/triton_check.sh runs it with figures.)
exes=(validate/validate_gpu_test sandbox/sandbox_test runtime/runtime_gpu_test validate/validate_test
      evolve/evolve_gpu_test tune/tune_gpu_test "tune/tune_cli_test" profile/profile_test sol/sol_test sol/sol_gpu_test@600
      cli/cli_gpu_test worker/worker_gpu_test@360 kernelbench/kernelbench_gpu_test@240 triton/triton_gpu_test
      validate/validate_attacks_gpu_test validate/gpu_ledger_test validate/validate_ledger_gpu_test
      reference/jit_precision_test baseline/baseline_gpu_test@360 device/device_gpu_test validate/validate_cublas_test)
# KEVO_SUITE_EXES="exe[@seconds][:gtest_filter] ..." replaces the list (a rerun of chosen tests).
[ -n "${KEVO_SUITE_EXES:-}" ] && read -r -a exes <<< "$KEVO_SUITE_EXES"
log="$out/tests.log"
: > "$log"
for e in "${exes[@]}"; do
  exe=${e%%:*}; gf='*'; [[ "$e" == *:* ]] && gf=${e#*:}
  own=$limit; [[ "$exe" == *@* ]] && own=${exe#*@} && exe=${exe%@*}
  [[ "$exe" =~ $filter ]] || continue
  bin=build-gpu/tests/$exe
  [ -x "$bin" ] || { echo "MISSING $exe"; continue; }
  left=$(( deadline - ($(date +%s) - t0) ))
  [ "$left" -gt 30 ] || { echo "NOT RUN $exe (deadline)"; continue; }
  [ "$left" -lt "$own" ] && lim=$left || lim=$own
  s=$(date +%s)
  echo "######## $exe ($gf)" >> "$log"
  timeout -k 10 "$lim" stdbuf -oL -eL "$bin" --gtest_filter="$gf" >> "$log" 2>&1
  rc=$?
  res=$(awk -v n="$exe" 'BEGIN{p=0}
    $0 ~ "^######## "n" " {p=1; next} /^######## / {p=0}
    p && /^\[  PASSED  \] [0-9]+ test/ {ok=$4} p && /^\[  SKIPPED \] [0-9]+ tests?, listed/ {sk=$4}
    p && /^\[  FAILED  \] [0-9]+ tests?, listed/ {fl=$4}
    END{printf "passed %s failed %s skipped %s", ok+0, fl+0, sk+0}' "$log")
  echo "$(printf '%-28s' "$exe") rc=$rc $res ($(( $(date +%s) - s )) s)"
done
echo "== failures"
grep -E "^\[  FAILED  \] [A-Za-z_/]+\.[A-Za-z_/]+" "$log" | sort -u | head -40
[ "$(grep -c "^\[ RUN      \]" "$log")" -gt 0 ] && echo "unfinished tests (killed by the time limit):" &&
  awk '/^######## /{e=$2} /^\[ RUN      \]/{r[e]=$0} /^\[       OK \]|^\[  FAILED  \]|^\[  SKIPPED \]/{delete r[e]} END{for (k in r) print k": "r[k]}' "$log"
echo "total $(( $(date +%s) - t0 )) s"
