#!/usr/bin/env bash
# Prints the validator's performance figures on a GPU host (issue 2's targets):
#  1. compile latency of a small candidate (fresh source each time, so the cache never answers)
#  2. a whole validation, compile excluded, of a KernelBench-size elementwise task (ReLU 4096x393216)
#  3. repeatability: the same kernel validated 5 times, speedups vs their median
# Usage: benchmarks/studies/measure_validator.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
kevo="$build/tool/cli/kernelevo"
data=tests/data
export KERNELEVO_CACHE_HOME=${KERNELEVO_CACHE_HOME:-$(mktemp -d)}
tmp=$(mktemp -d)
echo "== compile latency (nvcc, sm_90, small candidate) =="
times=()
for i in $(seq 1 7); do
  { echo "// variant $i $RANDOM"; cat $data/gelu_bias/kernels/good.cu; } > "$tmp/k$i.cu"
  t0=$(date +%s.%N)
  "$kevo" validate --task $data/gelu_bias/task.json --kernel "$tmp/k$i.cu" --arch sm_90 --json --no-timing > "$tmp/c$i.json" || true
  t1=$(date +%s.%N)
  times+=("$(python3 -c "import json;print(json.load(open('$tmp/c$i.json'))['compile_s'])")")
done
python3 - "${times[@]}" <<'PY'
import sys, statistics
v = sorted(float(x) for x in sys.argv[1:])
print(f"compile seconds: {' '.join(f'{x:.2f}' for x in v)}  median {statistics.median(v):.2f} s")
PY
echo "== whole validation of a KernelBench-size elementwise task (compile excluded) =="
"$kevo" validate --task $data/kb_relu/task.json --kernel $data/kb_relu/relu.cu --json > "$tmp/warm.json" || true  # builds the reference once
for i in 1 2 3; do
  "$kevo" validate --task $data/kb_relu/task.json --kernel $data/kb_relu/relu.cu --json > "$tmp/kb$i.json" || true
done
python3 - "$tmp"/kb1.json "$tmp"/kb2.json "$tmp"/kb3.json <<'PY'
import sys, json
for f in sys.argv[1:]:
    j = json.load(open(f))
    prof = " ".join(f"{k} {v:.2f}" for k, v in (j.get('details') or {}).get('profile_s', {}).items())
    print(f"status {j['status']}  run {j['run_s']:.2f} s (compile {j['compile_s']:.2f} s, cached)  kernel {j['kernel_us']:.0f} us  reference {j['reference_us']:.0f} us  speedup {j['speedup']:.3f}  [runner: {prof}]")
PY
# Repeatability under each timing configuration (the default first): 5 validations each.
repeat() {
  local label=$1; shift
  echo "== repeatability ($label): gelu_bias good.cu validated 5 times =="
  for i in 1 2 3 4 5; do
    "$kevo" validate --task $data/gelu_bias/task.json --kernel $data/gelu_bias/kernels/good.cu --json "$@" > "$tmp/r$i.json" || true
  done
  python3 - "$tmp"/r?.json <<'PY'
import sys, json, statistics
s = [json.load(open(f)) for f in sys.argv[1:]]
sp = [j['speedup'] for j in s]
med = statistics.median(sp)
print("speedups: " + " ".join(f"{x:.3f}" for x in sp) + f"  median {med:.3f}  max deviation {max(abs(x-med)/med for x in sp)*100:.2f}%")
print("kernel us: " + " ".join(f"{j['kernel_us']:.1f}" for j in s) + "  reference us: " + " ".join(f"{j['reference_us']:.1f}" for j in s))
print("status: " + " ".join(j['status'] for j in s))
for j in s:
    t = ((j.get('details') or {}).get('timing') or {}).get('sets') or [{}]
    w = t[0].get('wall_check', {})
    print("  per set: " + "; ".join(f"{x.get('label')}: kernel {x.get('kernel', {}).get('median_us', 0):.2f} us ref {x.get('reference', {}).get('median_us', 0):.2f} us "
                                     f"x{x.get('speedup', 0):.3f} ({x.get('trials')} calls, ci {x.get('kernel', {}).get('ci95', 0)*100:.2f}%)" for x in t))
    print(f"  batches {t[0].get('batches')} calls {t[0].get('trials')} flush {t[0].get('l2_flush_us', 0):.1f} us  batch wall median {w.get('batch_wall_median_us', 0):.0f} us  "
          f"batch excess median {w.get('batch_excess_median_us', 0):.0f} us  excess {w.get('excess_us', 0):.0f} of {w.get('allowed_us', 0):.0f} us allowed")
print("run seconds: " + " ".join(f"{j['run_s']:.2f}" for j in s))
PY
}
repeat "default: --l2-flush read --timing-copies 64"
if [ "${KEVO_MEASURE_VARIANTS:-0}" = 1 ]; then
  repeat "--l2-flush none" --l2-flush none
  repeat "--timing-copies 1" --timing-copies 1
  repeat "--timing-copies 8" --timing-copies 8
fi
