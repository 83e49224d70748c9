#!/usr/bin/env bash
# The main job (README): builds KernelEvo, then the example project examples/fused_ops, which marks
# two LibTorch functions as evolvable with kernelevo_optimize() and commits an sm_90 kernel cache,
# and runs it. On a GPU it runs the evolved kernels and prints their speedup; without one it runs
# the LibTorch reference and says so. Usage: scripts/main_job.sh [BUILD_DIR] (relative or absolute)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
build=${1:-build}
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac  # absolute: the example's configure needs it so
prefix_args=()
# A CUDA-enabled LibTorch from PyTorch's pip package, when there is one (GPU hosts).
if torch_prefix=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)' 2>/dev/null); then
  prefix_args=(-DCMAKE_PREFIX_PATH="$torch_prefix")
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${prefix_args[@]}"
cmake --build "$build" --target kernelevo kernelevo-runner kevo_runtime
cmake -S examples/fused_ops -B "$build-example" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DKernelEvo_DIR="$build" "${prefix_args[@]}"
cmake --build "$build-example"
"$build-example/fused_ops"
