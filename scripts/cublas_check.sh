#!/usr/bin/env bash
# Issue 38 item 4 on a GPU host: candidates calling cuBLAS/cuBLASLt with the handles the caller made
# (kernel ABI version 2, kernelevo/abi.h; kernelevo/cublas_host.h).
#  1. compile_test: real nvcc builds of cublasSgemm / cublasLtMatmul candidates, the source rules
#     (own handle refused), a version-1 kernel without cuBLAS;
#  2. validate_cublas_test: on the matmul task, cublas_sgemm.cu and cublaslt_matmul.cu validated ok
#     through the runner's handle and workspace, cublas_own_handle.cu a compile_error pointing at
#     kevo_cublas_handle(stream), cublas_other_stream.cu a runtime_error "returned 5" (the runner
#     serves the call's stream only);
#  3. validate_gpu_test's stream cheats (cheat_side_stream{,_late}.cu, now spelled past the source
#     rules) still caught by the runner; profile_test's kernelevo-profile loading a cuBLAS candidate;
#  4. tests/python/load_op_cublas_test.py: `kernelevo cache add` of linear_gelu_cublas.cu, then
#     load_op() with its glue (-lcublas -lcublasLt), equal to the module, on two streams.
# Builds nothing. Usage (repo root):  scripts/cublas_check.sh
#   build first:  scripts/device_build.sh kernelevo kernelevo-runner kernelevo-profile compile_test validate_cublas_test validate_gpu_test profile_test
# Env: OUT (logs; default /tmp/kevo-out). Exit 0 when every test passed.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -f build-gpu/env.sh ] && source build-gpu/env.sh
export KERNELEVO_CACHE_HOME=${KERNELEVO_CACHE_HOME:-/tmp/kevo-cache}
out=${OUT:-/tmp/kevo-out}/cublas
mkdir -p "$out"
pass=0 fail=0 skip=0
source scripts/gtest_lines.sh
for e in "compile/compile_test@300" "validate/validate_cublas_test@600" \
         "validate/validate_gpu_test@600:*cheat_side_stream*:ValidateGpu.WorkLeftOnAnotherStreamIsTimed" \
         "profile/profile_test@300:ProfileProgram.*"; do
  run_gtests "$e" "$out/$(basename "${e%%@*}").log"
done
export TORCH_EXTENSIONS_DIR="$out/torch-extensions"
timeout 600 python3 tests/python/load_op_cublas_test.py build-gpu/tool/cli/kernelevo > "$out/load_op_cublas.log" 2>&1
prc=$?
grep -E "^(cache add rc=|INFO)" "$out/load_op_cublas.log"
if grep -qE "^OK \(skipped=|skipped" "$out/load_op_cublas.log" || [ "$prc" -eq 77 ]; then
  echo "SKIP load_op_cublas_test (no CUDA PyTorch; log $out/load_op_cublas.log)"; skip=$((skip + 1))
elif [ "$prc" -eq 0 ]; then
  echo "PASS load_op_cublas_test"; pass=$((pass + 1))
else
  echo "FAIL load_op_cublas_test (exit $prc; log $out/load_op_cublas.log)"; fail=$((fail + 1))
fi
echo "cublas_check: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
