#!/usr/bin/env bash
# Issue 35's proof on a GPU host: precision policies, PyTorch baselines, tolerances that cannot be gamed and
# speed-of-light fractions that stay below 100%.
#  1. `kernelevo import kernelbench` of 11 KernelBench problems (4 of level 1, 7 of level 2: convolutions
#     L1-83, L2-57, L2-46; matmuls L1-1, L2-9, L2-12, L2-40, L2-56, L2-63) twice, at KernelBench's own
#     sizes: once with --precision pytorch, once with --precision strict (the two imports run at once);
#  2. `kernelevo validate --json` of each honest kernel (tests/data/kernelbench_honest) under each policy, and
#     ONE table (OUTDIR/table.md): status, the LibTorch reference's time (as the policy times it), PyTorch
#     eager, torch.compile, the kernel, the speedup over each, the relative L2 error, KernelBench's 1e-2
#     check; geomeans over each baseline per policy;
#  3. the six attack kernels of tests/data/attacks/small_softmax (kernel.cu with VARIANT defined, as
#     tests/validate/attacks_gpu_test.cpp builds them) validated against a strict and a pytorch copy of its
#     task: each must be rejected (status mismatch) under both (runs while the imports run);
#  4. the speed-of-light fraction of every validation (details.sol.fraction and its sets'): none above 100%,
#     and no floor beaten (details.sol.floor_beaten: a measured time below its floor).
# Every step is time-limited and the script goes on after a failure, saying why.
#
# Usage (repo root, after scripts/device_build.sh):
#   benchmarks/studies/precision_proof.sh [OUTDIR]  (default /tmp/precision_proof)
# Writes to OUTDIR only: table.md (the tables and summaries), proof.log (this script's output) and details.tar.gz
# (every validate JSON and stderr, the import logs and import.json). Suites and scratch go to KEVO_PP_WORK.
# Env: KEVO_PP_BUDGET (seconds for the whole script, default 420: each step's limit is cut to what is left;
#        validations not started when it is spent are listed as such),
#      KEVO_PP_JOBS (validations at once, default 2: the judge and the baselines take the GPU lock, so
#        timings never overlap; a second job overlaps compiles and process start-up),
#      KEVO_PP_IMPORT_LIMIT (seconds per import, default 420), KEVO_PP_VALIDATE_LIMIT (per honest validation,
#        lock waits included, default 240),
#      KEVO_PP_MAX_NUMEL (--max-numel for the imports: a dry run at small sizes, NOT the proof),
#      KEVO_PP_WORK (scratch: suites, JSONs; default /tmp/precision_proof_work), KEVO_PP_KERNELEVO,
#      KEVO_PP_PROBLEMS (space-separated substrings of problem paths: only those problems, e.g. "56_Matmul"),
#      KEVO_PP_RESUME=1 (a second call on the same host when the first ran out of budget: keeps KEVO_PP_WORK,
#        reuses its complete imports and every validation that ended ok or rejected, runs the rest).
# Exit 0 only when every honest kernel is ok under both policies, every attack is rejected under both, and
# no SOL fraction is above 100%.
set -uo pipefail
cd "$(dirname "$0")/../.."
[ -f build-gpu/env.sh ] && source build-gpu/env.sh
outdir=${1:-/tmp/precision_proof}
work=${KEVO_PP_WORK:-/tmp/precision_proof_work}
ke=${KEVO_PP_KERNELEVO:-build-gpu/tool/cli/kernelevo}
[ -x "$ke" ] || ke=build/tool/cli/kernelevo
export KERNELEVO_CACHE_HOME=${KERNELEVO_CACHE_HOME:-/tmp/kevo-cache}
budget=${KEVO_PP_BUDGET:-420}
jobs=${KEVO_PP_JOBS:-2}
t0=$(date +%s)
policies=(pytorch strict)
honest=tests/data/kernelbench_honest
attack_dir=tests/data/attacks/small_softmax
attacks=(CONSTANT ZEROS SKIP_K_TILE SKIP_BIAS WRONG_ROWS BF16)
# Convolutions and matmuls first: when the budget runs short, they are the ones validated.
problems=(tests/data/kernelbench_problems/level1/83_conv_depthwise_2D_square_input_asymmetric_kernel.py
          tests/data/kernelbench_problems/level2/57_Conv2d_ReLU_HardSwish.py
          tests/data/kb_concurrent/level2/46_Conv2d_Subtract_Tanh_Subtract_AvgPool.py
          tests/data/kernelbench/level1/1_Square_matrix_multiplication_.py
          tests/data/kernelbench/level2/12_Gemm_Multiply_LeakyReLU.py
          tests/data/kernelbench_problems/level2/40_Matmul_Scaling_ResidualAdd.py
          tests/data/kernelbench_problems/level2/9_Matmul_Subtract_Multiply_ReLU.py
          tests/data/kernelbench_problems/level2/63_Gemm_ReLU_Divide.py
          tests/data/kernelbench_problems/level2/56_Matmul_Sigmoid_Sum.py
          tests/data/kernelbench/level1/40_LayerNorm.py
          tests/data/kernelbench/level1/48_Mean_reduction_over_a_dimension.py)
# KEVO_PP_PROBLEMS: space-separated substrings of problem paths (e.g. "56_Matmul"): only those problems.
if [ -n "${KEVO_PP_PROBLEMS:-}" ]; then
  kept=()
  for f in "${problems[@]}"; do for w in $KEVO_PP_PROBLEMS; do [[ $f == *"$w"* ]] && { kept+=("$f"); break; }; done; done
  [ ${#kept[@]} -gt 0 ] || { echo "FAIL: KEVO_PP_PROBLEMS=$KEVO_PP_PROBLEMS matches no problem"; exit 1; }
  problems=("${kept[@]}")
fi

step() { echo; echo "== $* == ($(date +%T), $(( $(date +%s) - t0 )) s)"; }
# Seconds a step may take: its own limit ($1), cut to what is left of the budget less a reserve ($2); 0: skip.
limit() { local left=$(( budget - ${2:-0} - ($(date +%s) - t0) )); [ $left -lt 15 ] && left=0; echo $(( left < $1 ? left : $1 )); }
# task name: "kb<level>_" + file stem, non [A-Za-z0-9_] -> "_", trailing "_" stripped (the importer's task_name())
task_name() {
  local lv st; lv=$(basename "$(dirname "$1")"); st=$(basename "$1" .py)
  st=$(echo "$st" | sed 's/[^A-Za-z0-9_]/_/g; s/_*$//'); echo "kb${lv#level}_$st"
}
kernel_of() { local k=$honest/$1.cu; [ -f "$k" ] || k=$honest/${1}_plain.cu; echo "$k"; }

# One validation in the background, at most $jobs at once: writes $work/json/$2.{json,err,rc,secs}.
# $1 task, $2 id, $3 kernel, $4 limit, rest: extra options.
run_validate() {
  local task=$1 id=$2 kernel=$3 lim=$4; shift 4
  if [ "${KEVO_PP_RESUME:-0}" = 1 ] && grep -qE '^  "status": "(ok|mismatch|rejected)"' "$work/json/$id.json" 2>/dev/null; then
    echo "$id: kept from the earlier run"; return
  fi
  local p alive
  while :; do  # count only validations (the imports run beside them)
    alive=0; for p in "${vpids[@]}"; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
    [ "$alive" -lt "$jobs" ] && break
    wait -n
  done
  echo "$id: started (limit $lim s)"
  (
    s=$(date +%s)
    timeout "$lim" "$ke" validate --task "$task" --kernel "$kernel" --json --timeout 60 "$@" \
      > "$work/json/$id.json" 2> "$work/json/$id.err"
    echo $? > "$work/json/$id.rc"; echo $(( $(date +%s) - s )) > "$work/json/$id.secs"; echo "$lim" > "$work/json/$id.lim"
  ) &
  vpids+=($!)
}
vpids=()

all_imported() { local f; for f in "${problems[@]}"; do [ -f "$work/suite_$1/$(task_name "$f")/task.json" ] || return 1; done; }

import_suites() {
  local numel=() pol lim
  [ -n "${KEVO_PP_MAX_NUMEL:-}" ] && numel=(--max-numel "$KEVO_PP_MAX_NUMEL")
  [ -n "${KEVO_PP_MAX_NUMEL:-}" ] && echo "NOTE: --max-numel $KEVO_PP_MAX_NUMEL: shrunk problems, not KernelBench's sizes"
  lim=$(limit "${KEVO_PP_IMPORT_LIMIT:-420}" 150)  # leaves time for the validations (on the H200 each import of the 11 took 251-276 s)
  for pol in "${policies[@]}"; do
    [ "$lim" -gt 0 ] || { echo "import $pol: skipped (budget spent)"; continue; }
    if [ "${KEVO_PP_RESUME:-0}" = 1 ] && [ -f "$work/suite_$pol/import.json" ] && all_imported "$pol"; then
      echo "import $pol: kept from the earlier run" > "$work/import_$pol.summary"; continue
    fi
    rm -rf "$work/suite_$pol"
    ( s=$(date +%s)
      timeout "$lim" "$ke" import kernelbench "${problems[@]}" --out "$work/suite_$pol" --precision "$pol" "${numel[@]}" \
        > "$work/import_$pol.log" 2>&1
      r=$?
      echo "import $pol: exit $r in $(( $(date +%s) - s )) s$([ $r = 124 ] && echo " (TIMED OUT at $lim s)")"
    ) > "$work/import_$pol.summary" &
    echo $! > "$work/import_$pol.pid"
  done
}

attack_tasks() {
  local pol
  for pol in "${policies[@]}"; do
    mkdir -p "$work/attacks/$pol"
    cp "$attack_dir/ref.cpp" "$work/attacks/$pol/"
    python3 - "$attack_dir/task.json" "$work/attacks/$pol/task.json" "$pol" <<'PY'
import json, sys
t = json.load(open(sys.argv[1])); t["precision"] = sys.argv[3]; t["name"] += "_" + sys.argv[3]
json.dump(t, open(sys.argv[2], "w"), indent=2)
PY
    for v in "${attacks[@]}"; do
      { echo "#define VARIANT $v"; cat "$attack_dir/kernel.cu"; } > "$work/attacks/$v.cu"
    done
  done
}

main() {
  [ -x "$ke" ] || { echo "FAIL: no kernelevo built (scripts/device_build.sh)"; return 1; }
  if [ "${KEVO_PP_RESUME:-0}" = 1 ]; then rm -f "$work"/json/*.skip "$work"/import_*.pid
  else rm -rf "$work/json" "$work/attacks" "$work"/suite_* "$work"/import_*; fi  # only what it writes
  mkdir -p "$work/json"
  echo "precision_proof: $ke, budget $budget s, $jobs validation(s) at once, outputs in $outdir, scratch in $work"
  git log -1 --format='commit %h %s' 2>/dev/null | cut -c1-120

  step "import of ${#problems[@]} problems, --precision ${policies[*]} (in the background)"
  import_suites

  step "attacks: tests/data/attacks/small_softmax kernel.cu with VARIANT set, under ${policies[*]} (correctness only)"
  attack_tasks
  local pol v lim n
  for pol in "${policies[@]}"; do
    for v in "${attacks[@]}"; do
      lim=$(limit 60 120)
      [ "$lim" -gt 0 ] || { echo "attack $v under $pol: not validated (budget spent)"; continue; }
      run_validate "$work/attacks/$pol/task.json" "attack.$pol.$v" "$work/attacks/$v.cu" "$lim" --no-timing --no-baselines
    done
  done

  step "waiting for the imports"
  for pol in "${policies[@]}"; do
    [ -f "$work/import_$pol.pid" ] && wait "$(cat "$work/import_$pol.pid")"
    cat "$work/import_$pol.summary" 2>/dev/null
    grep -E ": (refused|failed)|error" "$work/import_$pol.log" 2>/dev/null | head -6
    tail -1 "$work/import_$pol.log" 2>/dev/null
  done

  step "honest kernels under each policy (--timing-trials 30 --timing-extend 0, baselines on)"
  for f in "${problems[@]}"; do
    n=$(task_name "$f")
    for pol in "${policies[@]}"; do
      t=$work/suite_$pol/$n/task.json; k=$(kernel_of "$n")
      [ -f "$k" ] || { echo "no kernel $k" > "$work/json/honest.$pol.$n.skip"; continue; }
      [ -f "$t" ] || { echo "not imported (see import_$pol.log in details.tar.gz)" > "$work/json/honest.$pol.$n.skip"; continue; }
      lim=$(limit "${KEVO_PP_VALIDATE_LIMIT:-240}" 10)  # a validation may wait for the GPU lock behind the others
      [ "$lim" -gt 0 ] || { echo "not validated: the ${budget} s budget was spent" > "$work/json/honest.$pol.$n.skip"; continue; }
      run_validate "$t" "honest.$pol.$n" "$k" "$lim" --timing-trials 30 --timing-extend 0
    done
  done
  wait

  step "results"
  local names=(); for f in "${problems[@]}"; do names+=("$(task_name "$f")"); done
  python3 benchmarks/studies/precision_proof_table.py "$work/json" "$outdir/table.md" "${policies[*]}" "${attacks[*]}" \
    "${names[@]}"
  local prc=$?
  tar -czf "$outdir/details.tar.gz" -C "$work" json $(cd "$work" && ls -d import_*.log suite_*/import.json 2>/dev/null)
  echo
  echo "precision_proof: $(( $(date +%s) - t0 )) s in all; table: $outdir/table.md, details: $outdir/details.tar.gz"
  [ $prc = 0 ] && echo "precision_proof: PASS" || echo "precision_proof: FAIL (see above)"
  return $prc
}

mkdir -p "$outdir"; rm -f "$outdir/table.md" "$outdir/proof.log" "$outdir/details.tar.gz"
main 2>&1 | tee "$outdir/proof.log.tmp"
rc=${PIPESTATUS[0]}
mv -f "$outdir/proof.log.tmp" "$outdir/proof.log" 2>/dev/null
exit "$rc"
