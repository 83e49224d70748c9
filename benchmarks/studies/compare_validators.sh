#!/usr/bin/env bash
# Side-by-side figures of two builds of kernelevo on a GPU host, interleaved so drift hits both:
# compile latency of a small candidate (fresh sources), the whole validation of gelu_bias (compile
# cached), and a KernelBench-size task. Usage: benchmarks/studies/compare_validators.sh OLD_BUILD NEW_BUILD
set -uo pipefail
old=$1 new=$2
data=tests/data
tmp=$(mktemp -d)
export KERNELEVO_CACHE_HOME=${KERNELEVO_CACHE_HOME:-$tmp/cache}
v() { "$1/tool/cli/kernelevo" validate --task "$2" --kernel "$3" --json "${@:4}" 2>/dev/null; }
field() { python3 -c "import json,sys;j=json.load(open(sys.argv[1]));print(j.get(sys.argv[2]))" "$@"; }
for b in old new; do
  d=${!b}
  v "$d" $data/gelu_bias/task.json $data/gelu_bias/kernels/good.cu > /dev/null  # builds the reference
  v "$d" $data/kb_relu/task.json $data/kb_relu/relu.cu --no-timing > /dev/null
done
echo "== compile latency (fresh source each time) =="
for i in 1 2 3 4 5; do
  for b in old new; do
    d=${!b}
    { echo "// $b $i $RANDOM$RANDOM"; cat $data/gelu_bias/kernels/good.cu; } > "$tmp/k.cu"
    v "$d" $data/gelu_bias/task.json "$tmp/k.cu" --no-timing > "$tmp/c-$b-$i.json"
    echo "$b compile_s $(field "$tmp/c-$b-$i.json" compile_s)"
  done
done
echo "== whole validation of gelu_bias (compile cached): wall time of the command, run_s, speedup =="
for i in 1 2 3 4 5; do
  for b in old new; do
    d=${!b}
    t0=$(date +%s.%N)
    v "$d" $data/gelu_bias/task.json $data/gelu_bias/kernels/good.cu > "$tmp/g-$b-$i.json"
    t1=$(date +%s.%N)
    echo "$b wall $(python3 -c "print(round($t1-$t0,3))") run_s $(field "$tmp/g-$b-$i.json" run_s) speedup $(field "$tmp/g-$b-$i.json" speedup) status $(field "$tmp/g-$b-$i.json" status)"
  done
done
echo "== KernelBench-size ReLU 4096x393216 (6.4 GB) =="
for i in 1 2; do
  for b in old new; do
    d=${!b}
    t0=$(date +%s.%N)
    v "$d" $data/kb_relu/task.json $data/kb_relu/relu.cu > "$tmp/r-$b-$i.json"
    t1=$(date +%s.%N)
    echo "$b wall $(python3 -c "print(round($t1-$t0,3))") run_s $(field "$tmp/r-$b-$i.json" run_s) speedup $(field "$tmp/r-$b-$i.json" speedup) status $(field "$tmp/r-$b-$i.json" status)"
  done
done
cp "$tmp"/g-new-1.json "${OUT:-/tmp}/gelu-new.json" 2>/dev/null
cp "$tmp"/r-new-1.json "${OUT:-/tmp}/relu-new.json" 2>/dev/null
