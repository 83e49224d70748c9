#!/usr/bin/env bash
# Issue 15's repeatability figure on a GPU host: gelu_bias good.cu validated 5 times
#  1. in one run, as a search does (`validate --repeat 5`: one runner, the reference timed once), and
#  2. in 5 separate runs (each its own runner, so the reference is timed 5 times too).
# Usage: benchmarks/studies/repeatability.sh [BUILD_DIR] [N]   (extra validate options in $KEVO_REPEAT_OPTS)
set -euo pipefail
build=${1:-build}
n=${2:-5}
kevo="$build/tool/cli/kernelevo"
task=tests/data/gelu_bias/task.json
kernel=tests/data/gelu_bias/kernels/good.cu
export KERNELEVO_CACHE_HOME=${KERNELEVO_CACHE_HOME:-$(mktemp -d)}
tmp=$(mktemp -d)
echo "== in one run (validate --repeat $n) =="
"$kevo" validate --task $task --kernel $kernel --repeat "$n" ${KEVO_REPEAT_OPTS:-} || true
echo "== in $n separate runs =="
for i in $(seq "$n"); do
  "$kevo" validate --task $task --kernel $kernel --json ${KEVO_REPEAT_OPTS:-} > "$tmp/r$i.json" || true
done
python3 - "$tmp"/r*.json <<'PY'
import sys, json, statistics
runs = [json.load(open(f)) for f in sys.argv[1:]]
sp = [r['speedup'] for r in runs if r.get('status') == 'ok']
if not sp:
    sys.exit("no run was ok: " + " ".join(r.get('status', '?') for r in runs))
med = statistics.median(sp)
for r in runs:
    lc = {t.get('shape_set'): t.get('launch_cost', {}) for t in r.get('details', {}).get('timing', {}).get('sets', [])}
    def corr(s):
        c = lc.get(s.get('set'), {})
        return f" (launch cost -{c['correction_us']:.2f})" if c.get('applied') else ""
    sets = "  ".join(f"[{s['label']}: {s['speedup']:.4f}x k {s['kernel_us']:.2f}{corr(s)} r {s['reference_us']:.2f}]" for s in r.get('shapes', []))
    print(f"{r['status']:8} speedup {r['speedup']:.4f}x  {sets}")
print(f"median speedup {med:.4f}x; largest deviation from it {max(abs(x - med) / med for x in sp) * 100:.2f}% over {len(sp)} ok runs")
PY
