#!/usr/bin/env bash
# load_model on a GPU host (issue 38 item 3), after
#   scripts/device_build.sh kernelevo kernelevo-runner kernelevo-refcheck
# Runs tests/python/model_load_test.py with python3 (PyTorch with CUDA) and the built kernelevo: the CPU
# tests (load_model without kernels, a fingerprint mismatch, test doubles for usable/wrong regions, the
# end-to-end check's fallback, compare_model's labels) and the GPU test: a small transformer block
# (LayerNorm, attention, MLP; x [8, 128, 256] fp32) exported with export_model, the hand-written
# tests/python/mlp_gelu.cu validated by `kernelevo cache add` into DIR/cache for its mlp.fc region
# (Linear + GELU), load_model running it as torch.ops.kernelevo.NAME inside the block with the end-to-end
# check passing, and compare_model timing the block: PyTorch eager, torch.compile and the loaded model.
# Prints one PASS/FAIL line per test and the end-to-end times; exit 1 when one fails.
# Usage: scripts/model_check.sh
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
log="$out/model_load.log"
start=$(date +%s)
timeout 540 python3 tests/python/model_load_test.py "$kevo" > "$log" 2>&1
rc=$?
secs=$(( $(date +%s) - start ))
# The plan, the cache add, the loaded model's report and the comparison (the GPU test prints them).
sed -n '/^# TransformerBlock/,/^| | total/p' "$log"
grep -E "^(cache add rc=|INFO|kernelevo (model|compare_model)|  )" "$log" | grep -v "^  File" | head -40
grep -E "^(PASS|FAIL|SKIP) " "$log"
grep -q -E "^(FAIL|ERROR):" "$log" && sed -n '/^=\{20,\}/,$p' "$log" | head -80
if [ $rc -eq 0 ] && grep -q "^PASS Gpu.test_a_cached_kernel_runs_in_the_loaded_model" "$log" && grep -q "^INFO e2e " "$log"; then
  echo "PASS model_check: all tests; mlp_gelu.cu ran as the mlp.fc region of the loaded transformer block, the" \
       "end-to-end check passed (${secs} s; log $log)"
else
  echo "FAIL model_check: rc=$rc (${secs} s; log $log)"
  tail -30 "$log"
  exit 1
fi
