#!/usr/bin/env bash
# The main job (README): builds the example project examples/fused_ops, which marks two LibTorch
# functions as evolvable with kernelevo_optimize() and commits an sm_90 kernel cache, and runs it.
# On a GPU host it builds KernelEvo (the kernelevo tool, its runner and the runtime), then the
# example against that build (find_package), and runs the evolved kernels and prints their speedup.
# Without a GPU (nvidia-smi lists none) the tool could validate or search nothing, so it builds only
# what the example needs: the example with KernelEvo as a subdirectory (the runtime and the two
# functions' libraries; no tool, no tests), and runs it: every call runs the LibTorch reference, and
# it says so. Without a kernelevo program configure cannot check the committed kernels (the tool's
# `cache status` is the one judge of an entry), so it says so and compiles the references only.
# KEVO_MAIN_JOB_FULL=1 forces the full build anyway.
# Usage: scripts/main_job.sh [BUILD_DIR] (relative or absolute; the example goes to BUILD_DIR-example)
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
scripts/install_deps.sh
build=${1:-build}
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac  # absolute: the example's configure needs it so
prefix_args=()
# A CUDA-enabled LibTorch from PyTorch's pip package, when there is one (GPU hosts).
if torch_prefix=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)' 2>/dev/null); then
  prefix_args=(-DCMAKE_PREFIX_PATH="$torch_prefix")
fi
gpus=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU ' || true)
if [ "${gpus:-0}" -gt 0 ] || [ "${KEVO_MAIN_JOB_FULL:-0}" = 1 ]; then
  mode="full: KernelEvo (kernelevo, kernelevo-runner, runtime) in $build, then the example against it"
  echo "main_job: $gpus GPU(s) listed by nvidia-smi; building $mode"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${prefix_args[@]}"
  cmake --build "$build" --target kernelevo kernelevo-runner kevo_runtime
  cmake -S examples/fused_ops -B "$build-example" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DKERNELEVO_SOURCE_DIR= -DKernelEvo_DIR="$build" "${prefix_args[@]}"
  cmake --build "$build-example"
else
  mode="example only: KernelEvo's runtime and the example's fused_ops, references only (no kernelevo tool to check"
  mode+=" the committed kernels)"
  echo "main_job: no GPU (nvidia-smi lists none); building $mode"
  cmake -S examples/fused_ops -B "$build-example" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DKERNELEVO_SOURCE_DIR="$PWD" "${prefix_args[@]}"
  cmake --build "$build-example" --target fused_ops
fi
echo "main_job: built in $((SECONDS - start)) s; running $build-example/fused_ops"
"$build-example/fused_ops"
echo "main_job: done in $((SECONDS - start)) s ($mode)"
