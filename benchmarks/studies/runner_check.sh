#!/usr/bin/env bash
# The runner's timing core on a GPU host (issue 29: Judge::time_set_once split into a TimingSession's
# phases, the judge's and the candidate process's long functions split): every test that runs the
# judge's timing or its cheat checks, one executable at a time (one GPU is one timing domain), each
# test printed PASS/FAIL/SKIP, then two checks of paths no test takes (KEVO_TIMING_DUMP's
# diagnostics batch; every field of a timed set's figures), and a summary.
# Usage (repo root, after scripts/device_build.sh): benchmarks/studies/runner_check.sh
# Logs go to $OUT (default /tmp/kevo-out). Exit status: 0 when nothing failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/kevo-out}
mkdir -p "$out"
[ -f build-gpu/env.sh ] || { echo "FAIL build-gpu/env.sh missing: run scripts/device_build.sh first"; exit 1; }
source build-gpu/env.sh
source scripts/gtest_lines.sh
export KERNELEVO_CACHE_HOME=/tmp/kevo-runner-check-cache
pass=0; fail=0; skip=0
t0=$(date +%s)

# "exe@seconds:gtest_filter": validate_gpu_test in full (it holds the attack fixtures: memoizing,
# moved work, work on other streams, the wall check's retry, the physical floor); the sandbox's
# escapes through the candidate process; several validators on one GPU; the strict fp32 reference's
# timing; the CLI's repeated validations (a fresh candidate process each, the reference reused).
exes=(validate/validate_gpu_test@900:* sandbox/sandbox_test@300:* validate/validate_concurrent_gpu_test@300:*
      validate/validate_strict_reference_gpu_test@300:* cli/cli_gpu_test@300:CliValidateGpu.*
      validate/validate_test@300:* validate/validate_retry_test@120:* validate/trials_test@60:* validate/channel_test@60:*)
for e in "${exes[@]}"; do
  log="$out/runner_check.$(basename "${e%%@*}").log"
  run_gtests "$e" "$log"
done

# The paths no test takes: a validation with KEVO_TIMING_DUMP (the diagnostics batch of empty
# calls, whose figures must not leak into the kernel's), and the figures of each timed set.
kexe=$(find build-gpu/tool -maxdepth 3 -name kernelevo -type f -perm -u+x | head -1)
dump="$out/runner_check.timing_dump.jsonl"
rm -f "$dump"
if [ -z "$kexe" ]; then
  echo "FAIL RunnerCheck.TimingDump (no kernelevo binary under build-gpu/tool)"; fail=$((fail + 1))
else
  KEVO_TIMING_DUMP="$dump" timeout 300 "$kexe" validate --task tests/data/gelu_bias/task.json \
    --kernel tests/data/gelu_bias/kernels/good.cu --json > "$out/runner_check.validate.json" 2> "$out/runner_check.validate.err"
  echo "   kernelevo validate (KEVO_TIMING_DUMP): exit $?, output $out/runner_check.validate.json"
  python3 - "$out/runner_check.validate.json" "$dump" <<'EOF'
import json, sys
ok = True
def check(name, cond, why):
    global ok
    print(("PASS " if cond else "FAIL ") + name + ("" if cond else ": " + why))
    ok = ok and cond
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"FAIL RunnerCheck.ValidateJson: {e}"); sys.exit(1)
check("RunnerCheck.ValidateStatusOk", r.get("status") == "ok", f"status {r.get('status')}: {str(r.get('log'))[:300]}")
sets = r.get("details", {}).get("timing", {}).get("sets", [])
check("RunnerCheck.TimedSets", len(sets) > 0, "no timed sets in details.timing.sets")
want = ["shape_set", "label", "weight", "trials", "batches", "stopped_early", "trials_reduced_to_fit_budget", "stop_reason",
        "target_ci", "verified_calls", "buffer_copies", "l2_flush", "l2_flush_bytes", "l2_flush_us", "call_fence", "kernel",
        "uneven_calls", "launch_cost", "reference", "reference_source", "speedup", "wall_check", "floor_us", "floor_bytes"]
for s in sets:
    missing = [k for k in want if k not in s]
    kmiss = [k for k in ("time_us", "measured_us", "lowest_batch_mean_us", "uneven_calls") if k not in s.get("kernel", {})]
    check(f"RunnerCheck.SetFields[{s.get('label')}]", not missing and not kmiss, f"missing {missing} kernel {kmiss}")
    k, lc, w = s.get("kernel", {}), s.get("launch_cost", {}), s.get("wall_check", {})
    check(f"RunnerCheck.SetFigures[{s.get('label')}]",
          k.get("time_us", 0) > 0 and s.get("speedup", 0) > 0 and s.get("verified_calls", 0) >= 2 and
          w.get("excess_us", 1e30) <= w.get("allowed_us", 0) and (s.get("l2_flush") == "none" or lc.get("judge_empty_us", 0) > 0),
          json.dumps({"kernel": k, "launch_cost": lc, "wall_check": w})[:600])
    print(f"   set {s.get('label')}: kernel {k.get('time_us')} us (measured {k.get('measured_us')}), reference "
          f"{s.get('reference', {}).get('time_us')} us ({s.get('reference_source')}), speedup {s.get('speedup')}, "
          f"{s.get('trials')} calls in {s.get('batches')} batches ({s.get('stop_reason')}), verified {s.get('verified_calls')}, "
          f"launch correction {lc.get('correction_us')} us, wall excess {w.get('excess_us')} of {w.get('allowed_us')} us allowed")
lines = [json.loads(l) for l in open(sys.argv[2])] if __import__("os").path.exists(sys.argv[2]) else []
# One line per timing of a set: a set timed again (a failed wall check's retry) has two; the last counts.
check("RunnerCheck.TimingDumpLines", len(lines) >= len(sets) and len(sets) > 0, f"{len(lines)} dump lines for {len(sets)} timed sets")
by_label = {s.get("label"): s for s in sets}
last = {l.get("label"): l for l in lines}
for l in last.values():
    s = by_label.get(l.get("label"), {})
    good = (len(l.get("kernel_us", [])) == s.get("trials") and len(l.get("candidate_empty_us", [])) > 0 and
            len(l.get("judge_empty_us", [])) == len(l.get("candidate_empty_us", [])) and len(l.get("reference_us", [])) > 0)
    check(f"RunnerCheck.TimingDump[{l.get('label')}]", good,
          f"kernel_us {len(l.get('kernel_us', []))} (trials {s.get('trials')}), candidate_empty_us {len(l.get('candidate_empty_us', []))}, "
          f"judge_empty_us {len(l.get('judge_empty_us', []))}, reference_us {len(l.get('reference_us', []))}")
sys.exit(0 if ok else 1)
EOF
  [ $? -eq 0 ] && pass=$((pass + 1)) || fail=$((fail + 1))
fi

echo "== summary: $pass passed, $fail failed, $skip skipped (the RunnerCheck lines count as one) in $(( $(date +%s) - t0 )) s"
[ "$skip" -gt 0 ] && echo "   (skipped tests: see the SKIP lines; on the H200 none of validate_gpu_test should skip)"
[ "$fail" -eq 0 ] && echo "RUNNER CHECK PASSED" || echo "RUNNER CHECK FAILED"
[ "$fail" -eq 0 ]
