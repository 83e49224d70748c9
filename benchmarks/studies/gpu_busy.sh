#!/usr/bin/env bash
# Issue 48's benchmark on a GPU host: N `kernelevo search` runs at once on one GPU, on imported
# KernelBench problems at their own sizes, each fed its honest kernel by the replay provider (the
# seed, then one round of CHILDREN replies: scripts/write_replay.py's, the first a duplicate of the
# seed); NVML samples the GPU's utilization all the while and every judge and holder of the GPU lock
# logs its phases ($KEVO_PHASE_LOG). Prints gpu_busy.py's
# table: per phase, the time the lock was held (shared or exclusive) and the time the GPU executed
# kernels meanwhile; the wall time, the GPU busy share and the jobs judged per GPU-minute.
#
# Usage (repo root): benchmarks/studies/gpu_busy.sh KERNELEVO SUITE OUTDIR [N]
#   KERNELEVO  the kernelevo to run (a build without the phase log still gives the wall time, the
#              busy share and the rate: the "before" of a comparison)
#   SUITE      a folder of imported tasks (kernelevo import kernelbench --out SUITE); the first N with
#              an honest kernel in tests/data/kernelbench_honest are searched
# Env: KEVO_GB_CHILDREN (default 4), KEVO_GB_JOBS (the searches' --jobs, default 4),
#   KEVO_GB_EXTRA (more search options, e.g. --no-profile).
set -uo pipefail
ke=$(readlink -f "$1"); suite=$2; out=$3; n=${4:-10}
children=${KEVO_GB_CHILDREN:-4}
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/phases.jsonl "$out"/util.csv "$out"/*.db* "$out"/*.log
names=()
for d in "$suite"/*/; do
  t=$(basename "$d")
  [ -f "$d/task.json" ] || continue
  k=tests/data/kernelbench_honest/$t.cu
  [ -f "$k" ] || k=tests/data/kernelbench_honest/${t}_plain.cu
  [ -f "$k" ] && names+=("$t")
  [ ${#names[@]} -ge "$n" ] && break
done
if [ ${#names[@]} -eq 0 ]; then
  echo "gpu_busy: no task of $suite has an honest kernel in tests/data/kernelbench_honest" >&2
  exit 2
fi
echo "gpu_busy: ${#names[@]} searches at once (${names[*]}), the seed and $children children each; $ke"
for t in "${names[@]}"; do
  k=tests/data/kernelbench_honest/$t.cu
  [ -f "$k" ] || k=tests/data/kernelbench_honest/${t}_plain.cu
  # The replies: the source itself (a duplicate of the seed: dropped), then variants of it (no cache hit).
  python3 scripts/write_replay.py "$k" "$out/$t.replay.jsonl" --variants 40 --hash-prefix "replay-$t"
done
nvidia-smi --query-gpu=timestamp,utilization.gpu --format=csv,noheader,nounits -lms 100 > "$out/util.csv" &
sampler=$!
export KEVO_PHASE_LOG=$out/phases.jsonl
start=$(date +%s.%N)
pids=()
for t in "${names[@]}"; do
  k=tests/data/kernelbench_honest/$t.cu
  [ -f "$k" ] || k=tests/data/kernelbench_honest/${t}_plain.cu
  "$ke" search --task "$suite/$t/task.json" --out "$out/kernels" --state "$out/$t.db" --fresh --initial "$k" \
    --replay "$out/$t.replay.jsonl" --llm-replay-in-order --islands 1 --children "$children" --generations 1 \
    --jobs "${KEVO_GB_JOBS:-4}" --repair-attempts 1 --seed 1 --max-time 540 ${KEVO_GB_EXTRA:-} > "$out/$t.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
end=$(date +%s.%N)
sleep 0.5
kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
echo "$start $end" > "$out/window"
echo "gpu_busy: all searches done in $(python3 -c "print('%.1f' % ($end - $start))") s"
for t in "${names[@]}"; do
  printf '%s: %s; %s; %s waiting line(s)\n' "$t" \
    "$(grep -o 'busy with evaluations[^;,)]*' "$out/$t.log" | tail -1)" \
    "$(grep -E 'best|written to' "$out/$t.log" | tail -1 | cut -c1-160)" "$(grep -c 'waiting for GPU' "$out/$t.log")"
done
python3 - "$out" "${names[@]}" <<'PY'
import collections, sqlite3, sys
out, names = sys.argv[1], sys.argv[2:]
start, end = (float(x) for x in open(out + "/window").read().split())
st = collections.Counter()
for t in names:
    try:
        st.update(r[0] for r in sqlite3.connect(out + "/" + t + ".db").execute("SELECT status FROM programs"))
    except sqlite3.Error as e:
        print(t + ": no state (" + str(e) + ")")
judged = sum(v for k, v in st.items() if k not in ("duplicate", "pending", "no_code"))
print("candidates judged: %d (%s) in %.1f s: %.1f per GPU-minute" %
      (judged, ", ".join("%s %d" % kv for kv in sorted(st.items())), end - start, judged / ((end - start) / 60)))
PY
if [ -s "$out/phases.jsonl" ]; then
  python3 "$(dirname "$0")/gpu_busy.py" "$out"
else
  python3 - "$out" <<'PY'
import sys
out = sys.argv[1]
start, end = (float(x) for x in open(out + "/window").read().split())
u = []
for line in open(out + "/util.csv"):
    try:
        u.append(float(line.split(",")[1]))
    except (IndexError, ValueError):
        pass
print("no phase log (a kernelevo without KEVO_PHASE_LOG): wall %.1f s, the GPU executed kernels %.0f%% of it (NVML)" %
      (end - start, sum(u) / len(u) if u else 0))
PY
fi
