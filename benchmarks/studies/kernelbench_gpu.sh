#!/usr/bin/env bash
# KernelBench on a GPU host (one call): builds what it needs, runs the KernelBench GPU tests, then
# imports all problems at KernelBench's own sizes and prints the success rate, the reasons for the
# refusals and failures, and the time the import took. Files worth keeping go to $OUT.
# Usage: KERNELBENCH_DIR=/path/to/kernelbench benchmarks/studies/kernelbench_gpu.sh   (default ../shared/kernelbench;
# JOBS=N parallel imports, default 8; KEVO_KB_SKIP_TESTS=1 only imports)
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/kevo-out}
kb=${KERNELBENCH_DIR:-../shared/kernelbench}
mkdir -p "$out"
step() { echo; echo "== $* == ($(date +%T))"; }
step build
scripts/device_build.sh kernelevo kernelevo-runner kernelevo-refcheck kernelbench_test kernelbench_gpu_test > "$out/kb-build.log" 2>&1 ||
  { tail -40 "$out/kb-build.log"; exit 1; }
source build-gpu/env.sh
export KERNELEVO_CACHE_HOME=${KERNELEVO_CACHE_HOME:-/tmp/kevo-cache}

step KernelBench tests
[ -n "${KEVO_KB_SKIP_TESTS:-}" ] && echo "(skipped: KEVO_KB_SKIP_TESTS)" ||
{ build-gpu/tests/kernelbench/kernelbench_test --gtest_brief=0; build-gpu/tests/kernelbench/kernelbench_gpu_test --gtest_brief=0; } 2>&1 |
  tee "$out/kb-tests.log" | grep -E "^\[ *(OK|FAILED|SKIPPED) |speedup|max \|diff\||import of|x \(kernel" | head -60

step "import all problems at KernelBench sizes ($kb)"
start=$(date +%s)
build-gpu/tool/cli/kernelevo import kernelbench "$kb/level1" "$kb/level2" --out "$out/kb-suite" --jobs "${JOBS:-8}" \
  > "$out/kb-import.log" 2>&1
echo "exit $?, $(( $(date +%s) - start )) s"
tail -1 "$out/kb-import.log"
python3 - "$out/kb-suite/import.json" <<'PY'
import collections, json, sys
j = json.load(open(sys.argv[1]))
print("imported %d/%d (refused %d, failed %d) in %.0f s" % (j["imported"], j["problems"], j["refused"], j["failed"], j["seconds"]))
ok = [r for r in j["results"] if r["status"] == "ok"]
if ok:
    print("max |diff| C++ vs Python over all imported: %g" % max(r["verify"]["max_abs_diff"] for r in ok))
for reason, n in collections.Counter(r["reason"][:150] for r in j["results"] if r["status"] != "ok").most_common():
    print("%3d  %s" % (n, reason))
PY
