#!/usr/bin/env bash
# Builds and runs benchmarks/studies/runner_study.cu on a GPU machine (issue 15's diagnostics):
# the gated check's cost with a spinning-kernel gate vs a stream-memory wait, and where a
# launch-bound kernel's per-process timing shift comes from. Prints numbers; asserts nothing.
#   benchmarks/studies/runner_study.sh [PROCESSES]   (placement study repeated in PROCESSES processes; default 4)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${TMPDIR:-/tmp}/kevo_runner_study
mkdir -p "$out"
arch=${CUDA_ARCH:-90}
nvcc -O3 -std=c++17 -arch=sm_$arch -o "$out/runner_study" benchmarks/studies/runner_study.cu -lcuda
nvcc -O3 -arch=sm_$arch -cubin -o "$out/gelu.cubin" benchmarks/studies/runner_study.cu
"$out/runner_study" gate
for i in $(seq "${1:-4}"); do
    echo "process $i:"
    "$out/runner_study" placement "$out/gelu.cubin"
done
