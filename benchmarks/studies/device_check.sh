#!/usr/bin/env bash
# One call on a GPU host (see README "Development on a GPU host"): builds everything, runs the GPU
# tests, validates the example's cached kernels for real (re-adding them with measured metadata),
# builds and runs the example, and prints the validator's and the dispatch's performance figures.
# Files worth keeping are written to $OUT (default /tmp/kevo-out).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/kevo-out}
mkdir -p "$out"
step() { echo; echo "== $* == ($(date +%T))"; }
step build
scripts/device_build.sh > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
source build-gpu/env.sh
export KERNELEVO_CACHE_HOME=/tmp/kevo-cache
torch_prefix=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
kevo=build-gpu/tool/cli/kernelevo

step example: configure
cmake -S examples/fused_ops -B build-ex -G Ninja -DCMAKE_BUILD_TYPE=Release -DKernelEvo_DIR="$PWD/build-gpu" \
  -DCMAKE_PREFIX_PATH="$torch_prefix" > "$out/example-configure.log" 2>&1 || tail -30 "$out/example-configure.log"
grep "KernelEvo:" "$out/example-configure.log"
# Build the example in the background while the kernels are validated.
ninja -C build-ex > "$out/example-build.log" 2>&1 &
build_pid=$!

step example: validate and re-add the cached kernels
for f in gelu_bias row_softmax; do
  $kevo cache add --task build-ex/kernelevo/$f/task.json --kernel examples/fused_ops/kernels/$f/sm_90.cu \
    --arch sm_90 --cache-dir examples/fused_ops/kernels 2>&1 | tail -12
  cp examples/fused_ops/kernels/$f/sm_90.json "$out/$f.sm_90.json"
done
$kevo cache status --cache-dir examples/fused_ops/kernels --build-dir build-ex

step runtime GPU test and dispatch benchmark
build-gpu/tests/runtime/runtime_gpu_test --gtest_brief=1 2>&1 | tail -5
build-gpu/benchmarks/kevo_dispatch_bench --benchmark_min_time=0.1 2>&1 | grep -E "^BM_|^Run" | head -12

step example: build and run
wait $build_pid || tail -30 "$out/example-build.log"
cmake build-ex > /dev/null 2>&1 && ninja -C build-ex >> "$out/example-build.log" 2>&1
build-ex/fused_ops 2>&1 | tee "$out/example.log"

step validator figures
timeout 420 benchmarks/studies/measure_validator.sh build-gpu 2>&1 | tee "$out/measure.log"
