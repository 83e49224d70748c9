#!/usr/bin/env bash
# Issue 27, deliverable 4, on a GPU host: four `kernelevo search` runs at once on one GPU, on four
# multi-GiB KernelBench problems (L1-9 tall-skinny GEMM with a 4 GiB output, L1-23 softmax over a
# 6 GiB input, L1-36 RMSNorm over ~7.5 GiB, L2-46 conv+tanh+avgpool), each fed plain honest kernels
# by the replay provider (--initial seed, then variants of the same kernel). Every validation,
# confirmation and Nsight Compute profile of the four shares the GPU through its lock; no honest
# kernel may be rejected by the wall-clock check ("do not agree with the time the judge observed").
#
# Usage (repo root, after scripts/device_build.sh kernelevo kernelevo-runner kernelevo-refcheck kernelevo-profile):
#   benchmarks/studies/kb_concurrent.sh
# Env: KEVO_KBC_GENERATIONS (default 3: 4 candidates per search), KEVO_KBC_SUITE (imported tasks,
# kept between runs; default build-gpu/kb_concurrent/suite), KEVO_KBC_PROBLEMS (a KernelBench folder
# with level1/ and level2/; default ../shared/kernelbench or shared/kernelbench when they hold these
# four problems, else tests/data/kb_concurrent, reconstructions at the sizes issue 27 gives),
# KEVO_KBC_NO_PROFILE=1 (searches run with --no-profile), OUT (logs; default /tmp/kevo-out),
# KEVO_KBC_KERNELEVO (the kernelevo to run; default build-gpu/tool/cli/kernelevo).
# Honest kernels: tests/data/kernelbench_honest/<task>.cu when present, else <task>_plain.cu.
# Prints one line per search and PASS or FAIL; exit 0 on PASS.
set -uo pipefail
cd "$(dirname "$0")/../.."
[ -f build-gpu/env.sh ] && source build-gpu/env.sh
out=${OUT:-/tmp/kevo-out}/kb_concurrent
suite=${KEVO_KBC_SUITE:-build-gpu/kb_concurrent/suite}
gens=${KEVO_KBC_GENERATIONS:-3}
ke=${KEVO_KBC_KERNELEVO:-build-gpu/tool/cli/kernelevo}
[ -x "$ke" ] || { echo "FAIL: $ke not built (scripts/device_build.sh kernelevo kernelevo-runner kernelevo-refcheck kernelevo-profile)"; exit 1; }
rm -rf "$out"
mkdir -p "$out" "$suite"
export KERNELEVO_CACHE_HOME=${KERNELEVO_CACHE_HOME:-/tmp/kevo-cache}
step() { echo; echo "== $* == ($(date +%T))"; }

files=(level1/9_Tall_skinny_matrix_multiplication_.py level1/23_Softmax.py level1/36_RMSNorm_.py
       level2/46_Conv2d_Subtract_Tanh_Subtract_AvgPool.py)
names=(kb1_9_Tall_skinny_matrix_multiplication kb1_23_Softmax kb1_36_RMSNorm kb2_46_Conv2d_Subtract_Tanh_Subtract_AvgPool)
problems=${KEVO_KBC_PROBLEMS:-}
if [ -z "$problems" ]; then
  problems=tests/data/kb_concurrent
  for d in ../shared/kernelbench shared/kernelbench; do
    all=1
    for f in "${files[@]}"; do [ -f "$d/$f" ] || all=0; done
    [ $all = 1 ] && { problems=$d; break; }
  done
fi

step "import (problems from $problems into $suite; imported tasks are kept)"
todo=()
for i in "${!files[@]}"; do [ -f "$suite/${names[$i]}/task.json" ] || todo+=("$problems/${files[$i]}"); done
if [ ${#todo[@]} -gt 0 ]; then
  start=$(date +%s)
  "$ke" import kernelbench "${todo[@]}" --out "$suite" > "$out/import.log" 2>&1
  echo "import exit $?, $(( $(date +%s) - start )) s"; tail -3 "$out/import.log"
else
  echo "all four already imported"
fi
for n in "${names[@]}"; do
  [ -f "$suite/$n/task.json" ] || { echo "FAIL: $n was not imported (see $out/import.log)"; tail -20 "$out/import.log"; exit 1; }
done

step "four searches at once ($gens generations each after the seed)"
profile=(); [ -n "${KEVO_KBC_NO_PROFILE:-}" ] && profile=(--no-profile)
pids=()
for n in "${names[@]}"; do
  k=tests/data/kernelbench_honest/$n.cu
  [ -f "$k" ] || k=tests/data/kernelbench_honest/${n}_plain.cu
  [ -f "$k" ] || { echo "FAIL: no honest kernel for $n"; exit 1; }
  echo "$n: $k"
  # The replay's n-th reply is the honest kernel with a distinct constant (no duplicate, no cache hit).
  python3 - "$k" "$out/$n.transcript.jsonl" <<'PY'
import json, sys
src = open(sys.argv[1]).read()
with open(sys.argv[2], "w") as f:
    for v in range(1, 41):
        body = src + "\nnamespace { [[maybe_unused]] constexpr int kVariant%d = %d; }\n" % (v, v)
        f.write(json.dumps({"time": "", "request_hash": "replay-%d" % v, "request": {},
                            "response": {"content": "Here is the kernel.\n\n```cuda\n" + body + "```\n",
                                         "finish_reason": "stop", "model": "replay-model"},
                            "usage": {"prompt_tokens": 3000, "completion_tokens": 800, "cost_usd": 0.0},
                            "latency_s": 0.1, "attempts": 1, "error": None}) + "\n")
PY
  "$ke" search --task "$suite/$n/task.json" --out "$out/kernels" --state "$out/$n.db" --fresh --initial "$k" \
    --replay "$out/$n.transcript.jsonl" --llm-replay-in-order --islands 1 --children 1 --jobs 1 \
    --generations "$gens" --repair-attempts 1 --mode full --seed 1 --max-time 480 "${profile[@]}" > "$out/$n.log" 2>&1 &
  pids+=($!)
done
start=$(date +%s)
for p in "${pids[@]}"; do wait "$p"; done
echo "four searches done in $(( $(date +%s) - start )) s"

step "results"
python3 - "$out" "${names[@]}" <<'PY'
import collections, os, sqlite3, sys
out, names = sys.argv[1], sys.argv[2:]
wall = "do not agree with the time the judge observed"
ok_all = True
not_judged_total = 0
for n in names:
    log = open(os.path.join(out, n + ".log"), errors="replace").read()
    db = os.path.join(out, n + ".db")
    rows = []
    if os.path.exists(db):
        rows = sqlite3.connect(db).execute("SELECT key, status, speedup, feedback, details FROM programs ORDER BY id").fetchall()
    evaluated = [r for r in rows if r[1] not in ("duplicate", "pending", "no_code")]
    statuses = collections.Counter(r[1] for r in rows)
    cheat = [r for r in rows if r[1] == "rejected" and (wall in r[3] or "misreport" in r[3])]
    not_judged = [r for r in rows if r[3].startswith("not judged")]
    not_judged_total += len(not_judged)
    confirm_refused = [l for l in log.splitlines() if "was not written to the cache" in l]
    confirm_wall = [l for l in confirm_refused if wall in l or "misreport" in l]
    best = max([r[2] for r in rows if r[1] == "ok"] + [0])
    print("%s: %d candidates evaluated (%s), best %.3fx; rejected by the wall-clock check: %d; not judged (GPU busy, "
          "not the kernel's fault): %d; best kernel %s" % (
              n, len(evaluated), ", ".join("%s %d" % kv for kv in sorted(statuses.items())), best, len(cheat), len(not_judged),
              "NOT cached: " + confirm_refused[0].split("cache: ", 1)[-1][:300] if confirm_refused else
              ("confirmed and cached" if "written to" in log else "none")))
    for r in cheat + not_judged:
        print("    %s %s: %s" % (r[0], r[1], r[3][:600].replace("\n", " | ")))
    for r in rows:
        if r[1] not in ("ok", "duplicate") and r not in cheat and r not in not_judged:
            print("    %s %s (not a timing rejection): %s" % (r[0], r[1], r[3][:300].replace("\n", " | ")))
    stopped = [l for l in log.splitlines() if "stopped (error" in l or l.startswith("kernelevo: error")]
    if stopped:  # an infrastructure failure ended the search: not fair to its kernels either
        print("    the search ended on an error: " + stopped[-1][:400])
        ok_all = False
    if not evaluated:
        if not stopped:
            print("    no candidate was evaluated; search log tail:\n      " + "\n      ".join(log.splitlines()[-8:]))
        ok_all = False
    if cheat or confirm_wall:
        ok_all = False
print()
print(("PASS: no honest kernel was rejected as a timing cheat with four searches on one GPU" +
       (" (%d candidates not judged: the GPU was busy or full; not held against them, but see why above)" % not_judged_total
        if not_judged_total else "")) if ok_all else
      "FAIL: an honest kernel was rejected by the wall-clock check, or a search ended on an error or evaluated nothing: see above and " + out)
sys.exit(0 if ok_all else 1)
PY
rc=$?
grep -h "waiting for GPU\|gpu_lock" "$out"/*.log | head -3
exit $rc
