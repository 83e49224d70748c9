#!/usr/bin/env bash
# The device layer (tool/device, issue 29 deliverable 3) on a GPU host: the one input filler gives
# the same bits on the host (refcheck), on the device (the validator's runner, kernelevo-profile)
# and in the importer's torch (CPU and CUDA), and the validator, refcheck and the profiler still
# work on it. One PASS/FAIL/SKIP line per test, then a summary; exit 0 only when nothing failed.
#   device_test            host draws: law of randn, randint bounds, determinism, half/bf16, Python on CPU
#   device_gpu_test        device kernel == host fill for every kind x dtype (1M+ elements), kernelevo-profile's
#                          --dump-inputs == host fill, Python refcheck_values on CUDA == host fill
#   validate_gpu_test      the validator (fills and compares through tool/device) still judges right
#   kernelbench_gpu_test   imports at KernelBench sizes whose refcheck (C++ vs Python inputs) agrees
#   profile_test, evolve_gpu_test's profile test: kernelevo-profile runs a candidate for ncu
# Usage (repo root, after scripts/device_build.sh): scripts/device_fill_check.sh
# Logs go to $OUT (default /tmp/kevo-out). KEVO_PYTHON: the torch Python (default python3).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/kevo-out}
mkdir -p "$out"
[ -f build-gpu/env.sh ] || { echo "FAIL build-gpu/env.sh missing: run scripts/device_build.sh first"; exit 1; }
source build-gpu/env.sh
source scripts/gtest_lines.sh
export KERNELEVO_CACHE_HOME=/tmp/kevo-device-check-cache
pass=0; fail=0; skip=0
t0=$(date +%s)
exes=(device/device_test@300:* device/device_gpu_test@300:* validate/validate_gpu_test@900:*
      kernelbench/kernelbench_gpu_test@600:* profile/profile_test@120:*
      evolve/evolve_gpu_test@300:SearchGpu.ReplayedSearchFeedsSpeedOfLightAndProfileIntoPrompts)
for e in "${exes[@]}"; do
  log="$out/device_fill_check.$(basename "${e%%@*}").log"
  run_gtests "$e" "$log"
  # The figures worth reading: how much was compared, first differences, refcheck's max |diff|.
  [ -f "$log" ] && grep -hE "^compared [0-9]+ fills|first differing|max_abs_diff|Expected equality|Which is:" "$log" | head -12 | sed 's/^/   /'
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
