#!/usr/bin/env bash
# The device layer (tool/device, issue 29 deliverable 3) on a GPU host: the one input filler gives
# the same bits on the host (refcheck), on the device (the validator's runner, the profiler's bench)
# and in the importer's torch (CPU and CUDA), and the validator, refcheck and the profiler still
# work on it. One PASS/FAIL/SKIP line per test, then a summary; exit 0 only when nothing failed.
#   device_test            host draws: law of randn, randint bounds, determinism, half/bf16, Python on CPU
#   device_gpu_test        device kernel == host fill for every kind x dtype (1M+ elements), the bench's
#                          --dump-inputs == host fill, Python refcheck_values on CUDA == host fill
#   validate_gpu_test      the validator (fills and compares through tool/device) still judges right
#   kernelbench_gpu_test   imports at KernelBench sizes whose refcheck (C++ vs Python inputs) agrees
#   profile_test, evolve_gpu_test's profile test: kernelevo-bench runs a candidate for ncu
# Usage (repo root, after scripts/device_build.sh): scripts/device_fill_check.sh
# Logs go to $OUT (default /tmp/kevo-out). KEVO_PYTHON: the torch Python (default python3).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/kevo-out}
mkdir -p "$out"
[ -f build-gpu/env.sh ] || { echo "FAIL build-gpu/env.sh missing: run scripts/device_build.sh first"; exit 1; }
source build-gpu/env.sh
export KERNELEVO_CACHE_HOME=/tmp/kevo-device-check-cache
pass=0; fail=0; skip=0
t0=$(date +%s)
exes=(device/device_test@300:* device/device_gpu_test@300:* validate/validate_gpu_test@900:*
      kernelbench/kernelbench_gpu_test@600:* profile/profile_test@120:*
      evolve/evolve_gpu_test@300:SearchGpu.ReplayedSearchFeedsSpeedOfLightAndProfileIntoPrompts)
for e in "${exes[@]}"; do
  exe=${e%%@*}; rest=${e#*@}; lim=${rest%%:*}; gf=${rest#*:}
  bin=build-gpu/tests/$exe
  if [ ! -x "$bin" ]; then echo "FAIL $exe (not built)"; fail=$((fail + 1)); continue; fi
  log="$out/device_fill_check.$(basename "$exe").log"
  s=$(date +%s)
  timeout -k 10 "$lim" stdbuf -oL -eL "$bin" --gtest_filter="$gf" > "$log" 2>&1
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
  # The figures worth reading: how much was compared, first differences, refcheck's max |diff|.
  grep -hE "^compared [0-9]+ fills|first differing|max_abs_diff|Expected equality|Which is:" "$log" | head -12 | sed 's/^/   /'
  echo "   $exe: exit $rc, $(( $(date +%s) - s )) s, log $log"
done
# refcheck's verdicts in the GPU import (the C++ reference and the Python model on the same inputs).
imp=$(find "$KERNELEVO_CACHE_HOME" build-gpu/test-cache -name import.json -newer scripts/device_fill_check.sh 2>/dev/null | head -3)
for f in $imp; do
  python3 - "$f" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for r in j.get("results", []):
    v = r.get("verify", {})
    print("   refcheck %-50s %-8s device %s max_abs_diff %s" % (r["name"], r["status"], v.get("device"), v.get("max_abs_diff")))
PY
done
echo "== device_fill_check: $pass passed, $fail failed, $skip skipped in $(( $(date +%s) - t0 )) s"
[ "$fail" -eq 0 ] && echo "PASS device_fill_check" || echo "FAIL device_fill_check"
[ "$fail" -eq 0 ]
