#!/usr/bin/env bash
# The Python helper on a GPU host (issue 30, deliverable 2), after
#   scripts/device_build.sh kernelevo kernelevo-runner kernelevo-refcheck
# Runs tests/python/pyhelper_test.py with python3 (PyTorch with CUDA) and the built kernelevo: the
# CPU-side tests (export_task of a trained Linear+GELU, weight files, load_op's reference fallback,
# cache-entry checks) and the GPU test: export on the GPU, `kernelevo cache add` validates
# tests/python/linear_gelu.cu into a fresh cache, load_op() compiles it as torch.ops.kernelevo.block
# (torch.utils.cpp_extension, nvcc) and its output is compared with the module's; the operator has the
# typed schema block(Tensor x, Tensor fc_weight, Tensor fc_bias) -> Tensor, is a torch.library.custom_op
# (PyTorch >= 2.4) and runs the kernel under torch.compile(fullgraph=True) through its fake kernel;
# `pip install ./python` into a fresh environment (Install) and `kernelevo doctor`'s Python lines (Doctor).
# Prints one PASS/FAIL line per test; exit 1 when one fails. Usage: scripts/pyhelper_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
[ -f build-gpu/env.sh ] && source build-gpu/env.sh
out=${OUT:-/tmp/kevo-out}
mkdir -p "$out"
kevo=build-gpu/tool/cli/kernelevo
[ -x "$kevo" ] || { echo "FAIL $kevo not built (scripts/device_build.sh kernelevo kernelevo-runner kernelevo-refcheck)"; exit 1; }
python3 -c 'import torch;print("torch", torch.__version__, "cuda", torch.version.cuda, "GPU", torch.cuda.is_available() and torch.cuda.get_device_name(0))' ||
  { echo "FAIL python3 cannot import torch"; exit 1; }
python3 -c 'import torch,sys;sys.exit(0 if torch.cuda.is_available() else 1)' || echo "FAIL python3's PyTorch sees no CUDA device (the GPU test would be skipped)"
export TORCH_EXTENSIONS_DIR="$out/torch-extensions"
start=$(date +%s)
timeout 300 python3 tests/python/pyhelper_test.py "$kevo" > "$out/pyhelper.log" 2>&1
rc=$?
secs=$(( $(date +%s) - start ))
"$kevo" doctor | grep -E "^(python|pytorch|triton|ncu) "
grep -E "^(cache add rc=|INFO|op vs module)" "$out/pyhelper.log"
grep -E "^(PASS|FAIL|SKIP) " "$out/pyhelper.log"
# Output of the tests that failed (tracebacks), if any.
grep -q -E "^(FAIL|ERROR):" "$out/pyhelper.log" && sed -n '/^=\{20,\}/,$p' "$out/pyhelper.log" | head -80
schema="INFO operator kernelevo::block(Tensor x, Tensor fc_weight, Tensor fc_bias) -> Tensor (torch.library.custom_op)"
compiled="INFO torch.compile(fullgraph=True): the kernel ran"
if [ $rc -eq 0 ] && grep -q "INFO kernel loaded" "$out/pyhelper.log" && grep -qF "$schema" "$out/pyhelper.log" &&
   grep -qF "$compiled" "$out/pyhelper.log"; then
  echo "PASS pyhelper: all tests, the cached kernel ran as the custom_op torch.ops.kernelevo.block (typed schema), eager and under torch.compile(fullgraph=True) (${secs} s; log $out/pyhelper.log)"
else
  grep -qF "$schema" "$out/pyhelper.log" || echo "FAIL missing: $schema"
  grep -qF "$compiled" "$out/pyhelper.log" || echo "FAIL missing: $compiled"
  echo "FAIL pyhelper: rc=$rc (${secs} s; log $out/pyhelper.log)"
  tail -20 "$out/pyhelper.log"
  exit 1
fi
