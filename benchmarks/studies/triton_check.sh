#!/usr/bin/env bash
# The Triton backend on a GPU host with Triton 3.x, in one call (about 4 minutes at most):
#   1. versions (Python, Triton, nvcc, GPU), then builds what it needs (scripts/device_build.sh:
#      kernelevo, kernelevo-runner, triton_gpu_test, triton_test into build-gpu);
#   2. `kernelevo validate` of the two Triton candidates (GELU, row softmax) in the background
#      (this also builds their LibTorch references, which the GPU tests then reuse), while
#      triton_gpu_test measures the AOT compile time (issue 13's target: median <= 8 s);
#   3. the rest of triton_gpu_test: AOT compile + validation of both candidates, the cheat
#      fixtures, cache entries, a replayed `search --backend both` that keeps a Triton kernel;
#   4. if time is left, the CPU tests (triton_test) too.
# Every Triton compile runs in the compile sandbox (bubblewrap) like nvcc does.
# Python with Triton: $KERNELEVO_PYTHON (default python3). Logs go to $OUT (default /tmp/kevo-out);
# the whole console output is also in $OUT/triton-check.log. Exit 0 only when every step passed.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/kevo-out}
mkdir -p "$out"
exec > >(tee "$out/triton-check.log") 2>&1
budget=${KEVO_TRITON_BUDGET_S:-225}   # seconds for the whole script (the lead's limit is 240)
start=$SECONDS
left() { echo $((budget - (SECONDS - start))); }
# A timeout for a step: the time left minus a reserve for what follows (never under 10 s).
lim() { local v=$(( $(left) - $1 )); [ "$v" -lt 10 ] && v=10; echo "$v"; }
step() { echo; echo "== $* == (t=$((SECONDS - start)) s, $(left) s left)"; }
failed=()
fail() { failed+=("$1"); echo "FAILED: $1"; }
# The first lines of a failure: gtest failures with their messages, else the log's last lines.
show_failure() {
  local f=$1
  if grep -q -E "Failure|FAILED|error" "$f"; then
    grep -n -A14 -E "Failure$|: Failure|\[  FAILED  \]|[Ee]rror" "$f" | head -60
  else
    tail -25 "$f"
  fi
}

export KERNELEVO_PYTHON=${KERNELEVO_PYTHON:-python3}
step versions
"$KERNELEVO_PYTHON" - <<'PY' 2>&1 | tee "$out/triton-versions.txt"
import sys
print("python", sys.version.split()[0], sys.executable)
try:
    import triton
    print("triton", triton.__version__, triton.__file__)
except Exception as e:
    print("triton NOT IMPORTABLE:", type(e).__name__, e)
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.version.cuda)
except Exception as e:
    print("torch not importable:", e)
PY
command -v nvcc >/dev/null && nvcc --version | grep release
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -2
command -v bwrap >/dev/null && echo "bwrap $(bwrap --version 2>&1)" || echo "bwrap NOT FOUND (the compile sandbox needs it; apt-get install bubblewrap)"

step build
build_limit=$(lim 100)
if [ "${KEVO_NO_BUILD:-0}" = 1 ] && [ -x build-gpu/tests/triton/triton_gpu_test ]; then
  echo "(KEVO_NO_BUILD=1: using build-gpu as it is)"; rc=0
else
  timeout "$build_limit" scripts/device_build.sh kernelevo kernelevo-runner triton_gpu_test triton_test \
    > "$out/triton-build.log" 2>&1
  rc=$?
fi
if [ $rc -ne 0 ]; then
  [ $rc -eq 124 ] && echo "the build did not finish within ${build_limit} s"
  echo "BUILD FAILED (rc $rc); first errors:"
  grep -m 20 -E "error|Error|FAILED" "$out/triton-build.log"
  echo "--- last lines of $out/triton-build.log:"
  tail -15 "$out/triton-build.log"
  exit 1
fi
echo "built in $((SECONDS - start)) s"
source build-gpu/env.sh
export KERNELEVO_CACHE_HOME=${KERNELEVO_CACHE_HOME:-/tmp/kevo-cache}  # shared with device_check.sh: reference builds are reused
kevo=build-gpu/tool/cli/kernelevo
gpu_test=build-gpu/tests/triton/triton_gpu_test

step "kernelevo validate (background) + AOT compile time"
pids=()
for f in gelu_bias row_softmax; do
  task=tests/data/gelu_bias/task.json
  [ $f = row_softmax ] && task=tests/data/triton/row_softmax_task.json
  timeout "$(lim 60)" $kevo validate --task $task --kernel tests/data/triton/$f.py > "$out/triton-validate-$f.log" 2>&1 &
  pids+=($!)
done
timeout "$(lim 60)" $gpu_test --gtest_filter='TritonGpu.AotCompile*' > "$out/triton-gpu-aot.log" 2>&1
rc=$?
grep -E "^\[ triton   \]" "$out/triton-gpu-aot.log"
if grep -q -E "\[  SKIPPED \]" "$out/triton-gpu-aot.log"; then
  fail "the GPU tests were skipped (reason below): nothing was checked on the GPU"
  grep -m 3 -E "Skipped|no usable Triton|no CUDA device" "$out/triton-gpu-aot.log"
fi
if [ $rc -ne 0 ]; then fail "AOT compile time test (rc $rc)"; show_failure "$out/triton-gpu-aot.log"; fi
i=0
for f in gelu_bias row_softmax; do
  wait "${pids[$i]}"; rc=$?; i=$((i + 1))
  echo "-- kernelevo validate $f.py (rc $rc):"
  grep -v "^\s*$" "$out/triton-validate-$f.log" | tail -8
  [ $rc -ne 0 ] && fail "kernelevo validate $f.py (rc $rc)"
done

step "triton_gpu_test (validation, cheats, cache, replayed --backend both search)"
limit=$(( $(left) - 5 ))
if [ "$limit" -lt 20 ]; then
  fail "no time left for triton_gpu_test"
else
  timeout "$limit" $gpu_test --gtest_filter='-TritonGpu.AotCompile*' > "$out/triton-gpu-test.log" 2>&1
  rc=$?
  [ $rc -eq 124 ] && echo "triton_gpu_test did not finish within $limit s (see $out/triton-gpu-test.log)"
  grep -E "^\[ triton   \]|^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]" "$out/triton-gpu-test.log"
  if [ $rc -ne 0 ]; then fail "triton_gpu_test (rc $rc)"; show_failure "$out/triton-gpu-test.log"; fi
fi

if [ "$(left)" -gt 30 ]; then
  step "triton_test (CPU: launch description, recorded AOT output, sandbox, cache)"
  timeout "$(lim 3)" build-gpu/tests/triton/triton_test --gtest_brief=1 > "$out/triton-test.log" 2>&1
  rc=$?
  tail -3 "$out/triton-test.log"
  if [ $rc -ne 0 ]; then fail "triton_test (rc $rc)"; show_failure "$out/triton-test.log"; fi
else
  echo; echo "(triton_test skipped: not enough time left; it runs in CI)"
fi

echo
echo "== summary == ($((SECONDS - start)) s; logs in $out)"
grep -h -E "^triton |^python " "$out/triton-versions.txt"
grep -h -E "^\[ triton   \]" "$out/triton-gpu-aot.log" "$out/triton-gpu-test.log" 2>/dev/null
if [ ${#failed[@]} -eq 0 ]; then
  echo "ALL PASSED"
  exit 0
fi
printf 'FAILED: %s\n' "${failed[@]}"
exit 1
