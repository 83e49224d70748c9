#!/usr/bin/env bash
# Issue 36's proof on a GPU host: eight `kernelevo search` runs at once on one GPU, on eight imported
# KernelBench problems, replayed (repeatable), then the same through `--workers` (two `kernelevo
# worker`s on the one GPU, a real redis-server). Checks and prints, for each part: LLM requests spent on
# a non-problem (must be 0: from every search's state file and its --json waste figure), no candidate
# lost (every reply the searches took from their replay files is a program with a final status), the
# waste figure 0, and the GPU busy share (the validations' GPU-seconds, summed over the eight states,
# over the part's wall time; issue 36's target is 80%: shown, not a pass condition). PASS/FAIL, exit 0/1.
#
# What each search is fed (--replay FILE --llm-replay-in-order, --initial the honest kernel,
# --generations 1 --children 2 --repair-attempts 1): reply 1 the seed's source byte for byte (a
# DUPLICATE: dropped, no further request), reply 2 the honest kernel with an #error line (a kernel that
# FAILS: compile error; its repair request is a real one), reply 3 the honest kernel with an unused
# constant (what the repair gets: a new program); the spare replies after that are never asked for
# when nothing is wasted. So each search spends 3 requests and validates 2 programs (and confirms its
# best once more before caching it).
#
# What is SIMULATED, and how (read this before quoting the figures):
#  - Problem sizes: the imports use --max-numel (KEVO_ES_MAX_NUMEL, default 1 Mi input elements: L1-9's
#    output is still 16384 x 16384, 1 GiB; the softmax
#    KEVO_ES_BIG_NUMEL, default 512 Mi: softmax over [1024, 393216], 1.5 GiB per tensor), not KernelBench's
#    own sizes (at those the import alone takes minutes). So the eight working sets do NOT exceed the H200's 141 GB.
#  - Device memory: the GPU memory ledger (validate/gpu_ledger.h) is told the device has
#    KERNELEVO_GPU_MEMORY_BYTES (default: half the sum of the eight working sets, computed and printed
#    below; a working set is what the judge reserves: each shape set's inputs + 2 x outputs, plus the
#    largest set's inputs). Every validation, reference and kept timing copy of the eight searches
#    (and of the workers) reserves against that budget: the working sets together exceed it.
#  - The case the judge cannot place at first: a real other process on the GPU (this script's
#    memory hog, Python + PyTorch) keeps the GPU's free memory near KEVO_ES_HOG_LEAVE_BYTES (default
#    2.5 GiB: enough for a new process's CUDA context and the small problems, not for the softmax's
#    input and output together)
#    from just before the searches start until a search logs "was not judged" (or KEVO_ES_HOG_MAX_S,
#    default 90 s). The judge's allocations for the softmax (or L1-9) fail on a GPU whose memory is
#    taken by another program; the tool must re-run that candidate itself, with no LLM request.
#
# Usage (repo root, after scripts/device_build.sh kernelevo kernelevo-runner kernelevo-refcheck):
#   benchmarks/studies/eight_searches.sh [OUTDIR]      (default /tmp/eight_searches)
# Writes under OUTDIR: proof.log (this output), work/ (suite, states, logs, replies, locks; the build
# cache too unless KERNELEVO_CACHE_HOME is set).
# Env: KEVO_ES_BUDGET (seconds for everything, default 260: each step is cut to what is left),
#   KEVO_ES_KERNELEVO (default build-gpu/tool/cli/kernelevo, else build/tool/cli/kernelevo),
#   KEVO_ES_SUITE (imported tasks, reused when complete; default OUTDIR/work/suite), KEVO_ES_MAX_NUMEL,
#   KEVO_ES_BIG_NUMEL, KEVO_ES_HOG_LEAVE_BYTES, KEVO_ES_HOG_MAX_S, KERNELEVO_GPU_MEMORY_BYTES,
#   KEVO_ES_PARTS ("local workers", default both; "import": only the import, e.g. in an earlier call on the
#   same host with KEVO_ES_SUITE=build-gpu/eight_searches/suite and KERNELEVO_CACHE_HOME=build-gpu/kevo-cache,
#   which the proof's call then reuses: the import and the LibTorch reference's build are then not in its budget).
set -uo pipefail
cd "$(dirname "$0")/../.."
[ -f build-gpu/env.sh ] && source build-gpu/env.sh
outdir=$(mkdir -p "${1:-/tmp/eight_searches}" && cd "${1:-/tmp/eight_searches}" && pwd)
work=$outdir/work
mkdir -p "$work"
exec > >(tee "$outdir/proof.log") 2>&1
tee_pid=$!
trap 'exec >&- 2>&-; wait $tee_pid 2>/dev/null' EXIT  # every line out before the script ends
budget=${KEVO_ES_BUDGET:-260}
t0=$(date +%s)
ke=${KEVO_ES_KERNELEVO:-build-gpu/tool/cli/kernelevo}
[ -x "$ke" ] || ke=build/tool/cli/kernelevo
ke=$(readlink -f "$ke" 2>/dev/null || echo "$ke")
suite=${KEVO_ES_SUITE:-$work/suite}
parts=${KEVO_ES_PARTS:-local workers}
honest=tests/data/kernelbench_honest
# The build cache (the suites' LibTorch reference, compiled candidates) may be shared with other runs;
# the GPU lock and memory ledger are this run's own.
export KERNELEVO_CACHE_HOME=${KERNELEVO_CACHE_HOME:-$work/cache} KERNELEVO_LOCK_DIR=$work/locks
mkdir -p "$KERNELEVO_LOCK_DIR"
step() { echo; echo "== $* == ($(date +%T), $(( $(date +%s) - t0 )) s of $budget)"; }
# Seconds a step may take: its own limit ($1), cut to what is left of the budget less a reserve ($2).
limit() { local left=$(( budget - ${2:-0} - ($(date +%s) - t0) )); [ $left -lt 10 ] && left=0; echo $(( left < $1 ? left : $1 )); }
fail_now() { echo "FAIL: $*"; echo "RESULT: FAIL"; exit 1; }

# The eight problems (problem file, then its honest kernel); the first is the one with the big buffers.
problems=(tests/data/kb_concurrent/level1/23_Softmax.py
          tests/data/kernelbench/level1/19_ReLU.py
          tests/data/kernelbench/level1/24_LogSoftmax.py
          tests/data/kb_concurrent/level1/36_RMSNorm_.py
          tests/data/kernelbench/level1/48_Mean_reduction_over_a_dimension.py
          tests/data/kb_concurrent/level1/9_Tall_skinny_matrix_multiplication_.py
          tests/data/kernelbench/level1/1_Square_matrix_multiplication_.py
          tests/data/kernelbench/level2/12_Gemm_Multiply_LeakyReLU.py)
# task name: "kb<level>_" + file stem, non [A-Za-z0-9_] -> "_", trailing "_" stripped (the importer's task_name())
task_name() {
  local lv st; lv=$(basename "$(dirname "$1")"); st=$(basename "$1" .py)
  st=$(echo "$st" | sed 's/[^A-Za-z0-9_]/_/g; s/_*$//'); echo "kb${lv#level}_$st"
}
names=(); kernels=()
for f in "${problems[@]}"; do
  [ -f "$f" ] || fail_now "missing problem file $f"
  n=$(task_name "$f"); k=$honest/$n.cu; [ -f "$k" ] || k=$honest/${n}_plain.cu
  [ -f "$k" ] || fail_now "no honest kernel for $n in $honest"
  names+=("$n"); kernels+=("$k")
done

step "replies (no GPU needed)"
mkdir -p "$work/replay"
for i in "${!names[@]}"; do
  # The honest kernel, one that does not compile, then variants (from the third on, spares: asked
  # for only if a request is wasted).
  python3 scripts/write_replay.py "${kernels[$i]}" "$work/replay/${names[$i]}.jsonl" --variants 9 --hash-prefix eight \
    --cost-usd 0.01 --compile-error "eight_searches.sh: a reply that does not compile" ||
    fail_now "writing the replies of ${names[$i]}"
  echo "${names[$i]}: ${kernels[$i]}, replies in $work/replay/${names[$i]}.jsonl"
done

step "GPU and tools"
[ -x "$ke" ] || fail_now "kernelevo not built ($ke): scripts/device_build.sh kernelevo kernelevo-runner kernelevo-refcheck"
if ! (command -v nvidia-smi >/dev/null && timeout 20 nvidia-smi -L 2>/dev/null | grep -q "^GPU "); then
  fail_now "no CUDA GPU here (nvidia-smi -L lists none): this proof runs on a GPU host"
fi
timeout 20 nvidia-smi -L | head -1
timeout 60 python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null ||
  fail_now "python3 has no PyTorch with CUDA (the importer and the memory hog need it)"

step "import (suite $suite; kept when complete)"
# The softmax goes to suite/big (its own --max-numel), the others to suite/small.
task_of() { if [ "$1" = 0 ]; then echo "$suite/big/${names[0]}/task.json"; else echo "$suite/small/${names[$1]}/task.json"; fi; }
missing=()
for i in "${!names[@]}"; do [ -f "$(task_of "$i")" ] || missing+=("$i"); done
if [ ${#missing[@]} -gt 0 ]; then
  lim=$(limit 120 120)
  [ "$lim" -gt 0 ] || fail_now "no time left to import"
  rm -rf "$suite"; mkdir -p "$suite"
  echo "NOTE: --max-numel ${KEVO_ES_BIG_NUMEL:-536870912} for ${names[0]}, ${KEVO_ES_MAX_NUMEL:-1048576} for the others: shrunk problems, not KernelBench's sizes"
  s=$(date +%s)
  timeout "$lim" "$ke" import kernelbench "${problems[0]}" --out "$suite/big" --max-numel "${KEVO_ES_BIG_NUMEL:-536870912}" \
    > "$work/import_big.log" 2>&1 & ib=$!
  timeout "$lim" "$ke" import kernelbench "${problems[@]:1}" --out "$suite/small" --max-numel "${KEVO_ES_MAX_NUMEL:-1048576}" \
    > "$work/import_small.log" 2>&1 & is=$!
  wait $ib; rb=$?; wait $is; rs=$?
  echo "imports: exit $rb (big) and $rs (small) in $(( $(date +%s) - s )) s (limit $lim s)"
  grep -h "imported\|refused\|failed" "$work"/import_*.log | tail -12
fi
tasks=()
for i in "${!names[@]}"; do
  [ -f "$(task_of "$i")" ] || { tail -5 "$work"/import_*.log; fail_now "${names[$i]} was not imported (see $work/import_*.log)"; }
  tasks+=("$(task_of "$i")")
done

[ "$parts" = import ] && { echo "RESULT: imported only (KEVO_ES_PARTS=import)"; exit 0; }

step "working sets and the ledger's budget"
budget_bytes=$(python3 - "${tasks[@]}" <<'PY'
import json, math, os, sys
files = sys.argv[1:]
size = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "int32": 4, "int8": 1, "uint8": 1, "bool": 1}
total = 0
for f in files:
    t, n = json.load(open(f)), os.path.basename(os.path.dirname(f))
    sets = t.get("shapes") or [{}]
    def nbytes(spec, s):
        dims = [d if isinstance(d, int) else s[d] for d in spec["shape"]]
        return math.prod(dims) * size.get(spec["dtype"], 4)
    ws, largest_in = 0, 0
    for s in sets:  # what the judge reserves for a job (runner/ledger_use.cu)
        i = sum(nbytes(x, s) for x in t["inputs"]); o = sum(nbytes(x, s) for x in t["outputs"])
        ws += i + 2 * o; largest_in = max(largest_in, i)
    ws += largest_in
    total += ws
    print("  %-52s working set %8.3f GiB" % (n, ws / 2**30), file=sys.stderr)
env = os.environ.get("KERNELEVO_GPU_MEMORY_BYTES")
b = int(env) if env else total // 2
print("  sum of the eight: %.3f GiB; the ledger's device memory (KERNELEVO_GPU_MEMORY_BYTES): %.3f GiB%s" %
      (total / 2**30, b / 2**30, " (below the sum)" if b < total else " (NOT below the sum)"), file=sys.stderr)
print(b)
PY
) || fail_now "reading the tasks' sizes"
export KERNELEVO_GPU_MEMORY_BYTES=$budget_bytes

# ---- one part: eight searches at once, local (no $1) or through workers ($1 = the queue's URL) ----
cat > "$work/hog.py" <<'PY'
# Another program on the GPU: keeps its free memory near LEAVE bytes (takes what is above, gives back
# what others need below) until STOP exists or MAX_S passed; READY is written once it holds.
import os, sys, time, torch
leave, max_s, stop, ready = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
chunk, held, peak, t0 = 256 << 20, [], 0, time.time()
free, total = torch.cuda.mem_get_info()
while time.time() - t0 < max_s and not os.path.exists(stop):
    free, total = torch.cuda.mem_get_info()
    if free > leave + chunk:
        for _ in range((free - leave) // chunk):
            try:
                held.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))
            except RuntimeError:
                break
    elif free < leave - chunk and held:
        del held[-min(len(held), (leave - free) // chunk + 1):]
        torch.cuda.empty_cache()
    peak = max(peak, len(held) * chunk)
    if not os.path.exists(ready):
        open(ready, "w").close()
    time.sleep(0.05)
print("memory hog: held up to %.1f GiB of %.1f GiB for %.0f s, leaving about %.1f GiB free (%s)" % (
      peak / 2**30, total / 2**30, time.time() - t0, leave / 2**30,
      "stopped: a search reported a candidate not judged" if os.path.exists(stop) else "its time limit"))
PY

# Ends a process this script started: SIGTERM, then SIGKILL after 10 s; never waits longer.
stop_pid() {
  kill "$1" 2>/dev/null
  for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$1" 2>/dev/null; wait "$1" 2>/dev/null
}

run_part() {
  local part=$1 url=${2:-} dir=$work/$1 lim i pids=() hog watch
  mkdir -p "$dir"; rm -f "$dir"/*.db "$dir"/*.json "$dir"/*.log "$dir/hog.stop" "$dir/hog.ready"
  lim=$(limit "$3" 15)
  [ "$lim" -ge 30 ] || { echo "FAIL ($part): no time left for the searches ($lim s)"; return 1; }
  python3 "$work/hog.py" "${KEVO_ES_HOG_LEAVE_BYTES:-2684354560}" "${KEVO_ES_HOG_MAX_S:-90}" "$dir/hog.stop" "$dir/hog.ready" \
    > "$dir/hog.log" 2>&1 & hog=$!
  for i in $(seq 300); do [ -f "$dir/hog.ready" ] || ! kill -0 $hog 2>/dev/null && break; sleep 0.1; done
  [ -f "$dir/hog.ready" ] || echo "NOTE ($part): the memory hog is not holding memory: $(tail -2 "$dir/hog.log")"
  local workers=(); [ -n "$url" ] && workers=(--workers "$url")
  local s=$(date +%s)
  for i in "${!names[@]}"; do
    timeout $(( lim + 15 )) "$ke" search --task "${tasks[$i]}" --out "$dir/kernels" --state "$dir/${names[$i]}.db" \
      --fresh --initial "${kernels[$i]}" --replay "$work/replay/${names[$i]}.jsonl" --llm-replay-in-order \
      --islands 1 --children 2 --jobs 2 --generations 1 --repair-attempts 1 --schedule generations --mode full --seed 1 \
      --no-profile --no-baselines --timing-trials 30 --max-time "$lim" --json "${workers[@]}" > "$dir/${names[$i]}.json" 2> "$dir/${names[$i]}.log" &
    pids+=($!)
  done
  # The hog goes once a search (the softmax's, or L1-9's with its 1 GiB output) has said that a
  # candidate was not judged (or at its time limit).
  ( while kill -0 $hog 2>/dev/null; do
      cat "$dir"/*.log 2>/dev/null | grep -q "was not judged" && { touch "$dir/hog.stop"; break; }
      sleep 0.2
    done ) & watch=$!
  local rc=0; for i in "${!pids[@]}"; do wait "${pids[$i]}" || echo "${names[$i]}: search exit $?"; done
  local wall=$(( $(date +%s) - s ))
  touch "$dir/hog.stop"
  for _ in $(seq 25); do kill -0 $hog 2>/dev/null || break; sleep 0.2; done  # it ends itself and says what it held
  stop_pid $hog; stop_pid $watch
  cat "$dir/hog.log"
  grep -h "was not judged" "$dir"/*.log | head -4 | cut -c1-300
  echo "eight searches ($part) done in $wall s (limit $lim s)"
  python3 - "$dir" "$wall" "$part" "${names[@]}" <<'PY'
import json, os, sqlite3, sys
d, wall, part, names = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4:]
ok, gpu_s, wasted_db, wasted_json, lost, calls_total, runs_many, not_judged_final = True, 0.0, 0, 0, 0, 0, 0, 0
def prev(key):  # g1.i0.c2.a1 -> g1.i0.c2.a0 (the attempt a repair was asked for)
    head, _, a = key.rpartition(".a")
    return head + ".a" + str(int(a) - 1) if a.isdigit() and int(a) > 0 else ""
for n in names:
    db, js = os.path.join(d, n + ".db"), os.path.join(d, n + ".json")
    try:
        summary = json.loads(open(js).read() or "{}")
    except ValueError:
        summary = {}
    if not os.path.exists(db):
        print("%s: no state file; log tail: %s" % (n, open(os.path.join(d, n + ".log"), errors="replace").read()[-600:]))
        ok = False; continue
    c = sqlite3.connect(db)
    progs = c.execute("SELECT key, status, feedback, details, llm_call_id, origin FROM programs ORDER BY id").fetchall()
    calls = c.execute("SELECT id, key, kind FROM llm_calls ORDER BY id").fetchall()
    by_key = {p[0]: p for p in progs}
    det = {p[0]: json.loads(p[3] or "{}") for p in progs}
    # A request on a non-problem: a repair of a duplicate, of a candidate not judged, or of an empty error.
    waste = [k for (_, k, kind) in calls if kind == "repair" and prev(k) in by_key and
             (by_key[prev(k)][1] in ("duplicate", "not_judged") or det[prev(k)].get("outside_kernel") is True
              or not by_key[prev(k)][2])]
    answered = {p[4] for p in progs if p[4]}
    unaccounted = [k for (i, k, _) in calls if i not in answered]
    pending = [p[0] for p in progs if p[1] == "pending"]
    lost += len(unaccounted) + len(pending)
    calls_total += len(calls)
    wasted_db += len(waste)
    w = summary.get("waste", {})
    wasted_json += int(w.get("wasted", {}).get("requests", -1) != 0)
    g = sum(float(x.get("gpu_s", 0) or 0) for x in det.values())
    gpu_s += g
    many = [k for k, x in det.items() if int(x.get("runs", 1) or 1) > 1]
    runs_many += len(many)
    not_judged_final += sum(1 for p in progs if p[1] == "not_judged")
    st = {}
    for p in progs: st[p[1]] = st.get(p[1], 0) + 1
    print("%-50s %d requests, programs: %s; wasted %d (state) / %s (--json); GPU %.1f s%s%s%s" % (
        n, len(calls), ", ".join("%s %d" % kv for kv in sorted(st.items())), len(waste),
        w.get("wasted", {}).get("requests", "missing"), g,
        "; run again by the tool (not judged at first): " + ", ".join(many) if many else "",
        "; UNACCOUNTED replies: " + ", ".join(unaccounted) if unaccounted else "",
        "; PENDING: " + ", ".join(pending) if pending else ""))
    if "duplicate" not in st or "compile_error" not in st:
        print("    expected a duplicate and a compile error among its programs"); ok = False
    if summary.get("exit_code", 1) != 0:
        print("    search exit_code %s, stop: %s" % (summary.get("exit_code"), summary.get("stop_reason"))); ok = False
share = gpu_s / wall if wall > 0 else 0
print()
print("[%s] LLM requests spent on a non-problem: %d (from the states), searches whose --json waste figure is not 0: %d" % (part, wasted_db, wasted_json))
print("[%s] candidates lost: %d (of %d replies taken from the replay files; every other reply is a program with a final status)" % (part, lost, calls_total))
print("[%s] candidates the judge could not place at first, run again by the tool without a request: %d; left not judged at the end: %d" % (part, runs_many, not_judged_final))
print("[%s] GPU busy share: %.1f s of validations over %.0f s wall = %.0f%% (issue 36's target: 80%%; %s). The GPU time is "
      "the states' gpu_s (every evaluation, retries included; not the local searches' confirmation of their best before "
      "caching); the wall time includes the searches' start-up and the wait for the hog's memory" % (
    part, gpu_s, wall, 100 * share, "met" if share >= 0.8 else "NOT met"))
good = ok and wasted_db == 0 and wasted_json == 0 and lost == 0 and runs_many > 0 and not_judged_final == 0
if runs_many == 0: print("[%s] the outside-the-kernel case did not occur (no candidate was run again): the proof is incomplete" % part)
print("[%s] %s" % (part, "PASS" if good else "FAIL"))
sys.exit(0 if good else 1)
PY
}

rc_local=skipped rc_workers=skipped
if [[ " $parts " == *" local "* ]]; then
  step "part 1: eight searches at once on the local GPU"
  cap=150; [[ " $parts " == *" workers "* ]] && cap=$(( (budget - ($(date +%s) - t0) - 25) / 2 ))
  run_part local "" "$cap"; rc_local=$?
fi
if [[ " $parts " == *" workers "* ]]; then
  step "part 2: the same through --workers (two kernelevo workers on the one GPU, a real redis-server)"
  rs=$(command -v redis-server || true)
  if [ -z "$rs" ]; then
    echo "FAIL (workers): redis-server is not on PATH (build-gpu/env.sh puts the unpacked .debs' one there)"; rc_workers=1
  else
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    mkdir -p "$work/redis"
    "$rs" --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work/redis" > "$work/redis/server.log" 2>&1 & rpid=$!
    url="redis://127.0.0.1:$port/0?prefix=eight"
    wpids=()
    for w in 1 2; do
      "$ke" worker --redis "$url" --gpu 0 --name "eight-w$w" > "$work/worker$w.log" 2>&1 & wpids+=($!)
    done
    sleep 2
    run_part workers "$url" 400; rc_workers=$?
    for p in "${wpids[@]}"; do stop_pid "$p"; done
    echo "workers: $(grep -c "" "$work/worker1.log") and $(grep -c "" "$work/worker2.log") log lines; tails:"
    tail -n 2 "$work/worker1.log" "$work/worker2.log"
    stop_pid "$rpid"
  fi
fi

step "result"
echo "part 1 (local): $([ "$rc_local" = 0 ] && echo PASS || echo "FAIL ($rc_local)"); part 2 (--workers): $([ "$rc_workers" = 0 ] && echo PASS || echo "FAIL ($rc_workers)")"
echo "(problems shrunk with --max-numel; device memory simulated for the ledger; the outside-the-kernel failure caused by a real memory hog: see the header)"
if [ "$rc_local" = 0 ] && [ "$rc_workers" = 0 ]; then echo "RESULT: PASS"; exit 0; fi
echo "RESULT: FAIL (logs under $work)"; exit 1
