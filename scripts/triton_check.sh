#!/usr/bin/env bash
# The Triton backend on a GPU host with Triton 3.x, in one call: builds what it needs, runs the
# Triton GPU tests (AOT compile of the GELU and row-softmax candidates, validation, the cheat
# fixtures, the AOT compile time, cache entries, a replayed --backend both search), then stores both
# Triton candidates into a copy of the example project's cache, builds the example through
# kernelevo_optimize() (plain C++ against the CUDA driver API: no Python) and runs it.
# Python with Triton: $KERNELEVO_PYTHON (default python3). Logs go to $OUT (default /tmp/kevo-out).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/kevo-out}
mkdir -p "$out"
export KERNELEVO_PYTHON=${KERNELEVO_PYTHON:-python3}
step() { echo; echo "== $* == ($(date +%T))"; }
step build
scripts/device_build.sh kernelevo kernelevo-runner triton_gpu_test triton_test kevo_runtime > "$out/triton-build.log" 2>&1 \
  || { tail -40 "$out/triton-build.log"; exit 1; }
source build-gpu/env.sh
export KERNELEVO_CACHE_HOME=${KERNELEVO_CACHE_HOME:-/tmp/kevo-cache}  # shared with device_check.sh: reference builds are reused
kevo=build-gpu/tool/cli/kernelevo
"$KERNELEVO_PYTHON" -c 'import triton; print("Triton", triton.__version__)'

step "CI tests (recorded AOT output)"
build-gpu/tests/triton/triton_test --gtest_brief=1 2>&1 | tail -4

step "GPU tests (real Triton)"
build-gpu/tests/triton/triton_gpu_test 2>&1 | tee "$out/triton-gpu-test.log" | grep -E "^\[ (triton|  FAILED|  PASSED|  SKIPPED) |Failure|rror" | head -40

step "kernelevo validate on the two candidates"
$kevo validate --task tests/data/gelu_bias/task.json --kernel tests/data/triton/gelu_bias.py 2>&1 | tail -8
$kevo validate --task tests/data/triton/row_softmax_task.json --kernel tests/data/triton/row_softmax.py 2>&1 | tail -8

step "example project with Triton kernels"
ex=/tmp/kevo-ex-triton
rm -rf "$ex" && cp -r examples/fused_ops "$ex"
torch_prefix=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
cmake -S "$ex" -B "$ex/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKernelEvo_DIR="$PWD/build-gpu" \
  -DCMAKE_PREFIX_PATH="$torch_prefix" > "$out/triton-example-configure.log" 2>&1 || tail -30 "$out/triton-example-configure.log"
for f in gelu_bias row_softmax; do
  $kevo cache add --task "$ex/build/kernelevo/$f/task.json" --kernel tests/data/triton/$f.py --arch sm_90 \
    --cache-dir "$ex/kernels" 2>&1 | tail -4
  cp "$ex/kernels/$f/sm_90.json" "$out/$f.triton.sm_90.json"
done
$kevo cache status --cache-dir "$ex/kernels" --build-dir "$ex/build"
cmake "$ex/build" 2>&1 | grep "KernelEvo:"
ninja -C "$ex/build" > "$out/triton-example-build.log" 2>&1 || tail -30 "$out/triton-example-build.log"
grep -c python "$out/triton-example-build.log" | sed 's/^/build log lines mentioning python: /'
"$ex/build/fused_ops" 2>&1 | tee "$out/triton-example.log"
