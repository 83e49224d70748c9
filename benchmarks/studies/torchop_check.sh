#!/usr/bin/env bash
# The functions as PyTorch operators on a GPU host (issue 30): after scripts/device_build.sh, builds
# the example's operator module (kernelevo_torch_library(fused_ops_torch ...)) against the LibTorch of
# python3's PyTorch, loads it from python3 and checks CUDA op == reference (the evolved sm_90
# kernel ran), gradients == the reference's, torch.compile (inductor); then runs cmake_test's
# operator test (the test project's scale/pair ops: CPU, CUDA, Meta, gradcheck, torch.compile); then the
# Python helper's operator (kernelevo.load_op: a torch.library.custom_op with a typed schema from
# task.json, its fake kernel under torch.compile(fullgraph=True), its backward; needs
# build-gpu/tool/cli/kernelevo, scripts/device_build.sh kernelevo kernelevo-runner kernelevo-refcheck).
# Prints PASS/FAIL lines; exit 1 when one fails. Usage: benchmarks/studies/torchop_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
[ -f build-gpu/env.sh ] && source build-gpu/env.sh
out=${OUT:-/tmp/kevo-out}
mkdir -p "$out"
fail=0
torch_prefix=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)') || { echo "FAIL python3 cannot import torch"; exit 1; }
python3 -c 'import torch;print("torch", torch.__version__, "cuda", torch.version.cuda, "GPU", torch.cuda.is_available() and torch.cuda.get_device_name(0))'

ex=build-gpu/torchop-example
echo "== example: configure and build fused_ops_torch ($(date +%T))"
if cmake -S examples/fused_ops -B "$ex" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKernelEvo_DIR="$PWD/build-gpu" \
     -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$torch_prefix" > "$out/torchop-configure.log" 2>&1 &&
   ninja -C "$ex" fused_ops_torch > "$out/torchop-build.log" 2>&1; then
  echo "PASS example operator module built: $ex/libfused_ops_torch.so"
  grep "KernelEvo: .* sm_90" "$out/torchop-configure.log"
  timeout 120 python3 examples/fused_ops/example_op.py "$ex/libfused_ops_torch.so" --compile 2>&1 | tee "$out/torchop-example.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail=1
  grep -q "cuda gelu_bias == reference (ran sm_90)" "$out/torchop-example.log" &&
    echo "PASS the CUDA op ran the evolved sm_90 kernel" || { echo "FAIL the CUDA op did not run the sm_90 kernel"; fail=1; }
else
  echo "FAIL example operator module: see $out/torchop-configure.log / torchop-build.log"
  tail -30 "$out/torchop-configure.log" "$out/torchop-build.log"
  fail=1
fi

echo "== cmake_test FunctionsArePyTorchOperatorsLoadableFromPython ($(date +%T))"
if ninja -C build-gpu cmake_test > "$out/torchop-cmake-test-build.log" 2>&1; then
  KEVO_PYTHON=$(command -v python3) timeout 170 build-gpu/tests/cmake/cmake_test \
    --gtest_filter='*PyTorchOperators*' > "$out/torchop-cmake-test.log" 2>&1
  rc=$?
  grep -E "^(PASS|FAIL|SKIP|INFO)|\[  (PASSED|FAILED|SKIPPED) " "$out/torchop-cmake-test.log"
  if [ $rc -eq 0 ] && grep -q "PASS cuda" "$out/torchop-cmake-test.log"; then
    echo "PASS cmake_test operator test (CUDA path included)"
  else
    echo "FAIL cmake_test operator test (rc $rc; no CUDA lines means it did not run the GPU): $out/torchop-cmake-test.log"
    tail -40 "$out/torchop-cmake-test.log"
    fail=1
  fi
else
  echo "FAIL cmake_test does not build: $out/torchop-cmake-test-build.log"; fail=1
fi
echo "== load_op's operator: custom_op, typed schema, fake kernel under torch.compile(fullgraph=True) ($(date +%T))"
kevo=build-gpu/tool/cli/kernelevo
if [ -x "$kevo" ]; then
  TORCH_EXTENSIONS_DIR="$out/torch-extensions" timeout 300 python3 tests/python/pyhelper_test.py "$kevo" \
    Gpu Operator > "$out/torchop-pyop.log" 2>&1
  rc=$?
  grep -E "^(PASS|FAIL|SKIP|INFO) " "$out/torchop-pyop.log"
  if [ $rc -eq 0 ] && grep -qF "(torch.library.custom_op)" "$out/torchop-pyop.log" &&
     grep -qF "INFO torch.compile(fullgraph=True): the kernel ran" "$out/torchop-pyop.log"; then
    echo "PASS load_op's custom_op: typed schema, the kernel eager and under torch.compile(fullgraph=True)"
  else
    echo "FAIL load_op's operator (rc $rc): $out/torchop-pyop.log"
    tail -40 "$out/torchop-pyop.log"
    fail=1
  fi
else
  echo "FAIL $kevo not built (scripts/device_build.sh kernelevo kernelevo-runner kernelevo-refcheck)"; fail=1
fi
[ $fail -eq 0 ] && echo "PASS torchop_check" || echo "FAIL torchop_check"
exit $fail
