#!/usr/bin/env bash
# Issue 27, deliverable 6, on a GPU host: `kernelevo import kernelbench` on the GPU inside the
# sandbox (bwrap with the GPU's device nodes, under the GPU lock), with a line per problem and phase.
# 1. Imports the four multi-GiB problems of issue 27 (tests/data/kb_concurrent: L1-9, L1-23, L1-36,
#    L2-46 at their real sizes) and prints where the time goes (the phase lines, each problem's phases
#    from import.json, the total against the 60 s goal).
# 2. Imports the hostile fixtures beside an honest problem on the GPU (tests/data/kernelbench/
#    hostile_*.py, honest_relu.py): nothing they aim at may exist afterwards, no secret may show.
# Usage (repo root, after scripts/device_build.sh kernelevo kernelevo-runner kernelevo-refcheck):
#   benchmarks/studies/kb_import_sandbox.sh
# Env: OUT (default /tmp/kevo-out), KEVO_KIS_KERNELEVO (default build-gpu/tool/cli/kernelevo).
# Prints PASS or FAIL lines; exit 0 when all pass.
set -uo pipefail
cd "$(dirname "$0")/../.."
[ -f build-gpu/env.sh ] && source build-gpu/env.sh
ke=${KEVO_KIS_KERNELEVO:-build-gpu/tool/cli/kernelevo}
[ -x "$ke" ] || { echo "FAIL: $ke not built (scripts/device_build.sh kernelevo kernelevo-runner kernelevo-refcheck)"; exit 1; }
out=${OUT:-/tmp/kevo-out}/kb_import_sandbox
rm -rf "$out"; mkdir -p "$out"
export KERNELEVO_CACHE_HOME=${KERNELEVO_CACHE_HOME:-/tmp/kevo-cache}
fails=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
command -v bwrap >/dev/null && echo "bwrap: $(command -v bwrap) ($(bwrap --version 2>&1))" || echo "bwrap NOT on PATH"

echo "== 1. four multi-GiB problems on the GPU, sandboxed ($(date +%T))"
kb=tests/data/kb_concurrent
start=$(date +%s.%N)
"$ke" import kernelbench "$kb/level1/9_Tall_skinny_matrix_multiplication_.py" "$kb/level1/23_Softmax.py" \
  "$kb/level1/36_RMSNorm_.py" "$kb/level2/46_Conv2d_Subtract_Tanh_Subtract_AvgPool.py" --out "$out/suite" 2>&1 | tee "$out/import.log"
rc=${PIPESTATUS[0]}
wall=$(python3 -c "import time; print('%.1f' % (time.time() - $start))")
echo "import exit $rc, wall ${wall} s"
python3 - "$out/suite/import.json" "$wall" <<'PY' || fails=$((fails + 1))
import json, sys
r = json.load(open(sys.argv[1]))
ok = True
def check(cond, what):
    global ok
    print(("PASS: " if cond else "FAIL: ") + what)
    ok = ok and cond
for p in r["results"]:
    ph = p.get("phases", {})
    print("  %-50s %-8s %6.1f s  %s" % (p["name"], p["status"], p.get("seconds", 0),
          "  ".join("%s %.1f" % (k, v) for k, v in ph.items())))
    if p["status"] != "ok":
        print("    reason:", p.get("reason", ""))
check(r["imported"] == 4, "%d/4 imported" % r["imported"])
check(r.get("device") == "cuda", "imported on the %s" % r.get("device"))
check("bwrap" in r.get("sandbox", "") and "GPU device nodes" in r.get("sandbox", ""), "sandbox: %s" % r.get("sandbox"))
check(r.get("gpu_lock") is True, "the import took the GPU lock")
print("INFO: import of the four took %.1f s (kernelevo's own count), %s s wall; goal under 60 s: %s" % (
    r["seconds"], sys.argv[2], "met" if float(sys.argv[2]) < 60 else "NOT met"))
sys.exit(0 if ok else 1)
PY
n=$(grep -c '^kernelevo:   .*: .* s$' "$out/import.log")
[ "$n" -ge 4 ] && pass "$n phase lines on stderr" || fail "only $n phase lines on stderr"

echo "== 2. hostile problems beside an honest one, on the GPU ($(date +%T))"
mark=kevo_hostile_marker
d=tests/data/kernelbench
targets=("$HOME/$mark" "$HOME/kevo_hostile_denied_marker" /tmp/$mark /tmp/$mark.system /var/tmp/$mark /var/tmp/$mark.system "$out/$mark"
         "/$mark" "$d/$mark")
rm -f "${targets[@]}"
KEVO_TEST_API_TOKEN=kevo-gpu-token-91c KEVO_HOSTILE_DB_URL=postgres://kevo:pw-3d@db \
  "$ke" import kernelbench "$d/hostile_escape.py" "$d/hostile_denied.py" "$d/hostile_network.py" "$d/honest_relu.py" \
  --out "$out/hostile" --jobs 1 \
  > "$out/hostile.log" 2>&1
echo "import exit $?"; grep -v '^kernelevo:   ' "$out/hostile.log" | tail -5
for t in "${targets[@]}"; do [ -e "$t" ] && fail "$t was written by a problem file"; done
grep -rqs -e kevo-gpu-token-91c -e pw-3d "$out/hostile" "$out/hostile.log" && fail "a secret reached the outputs" || pass "no secret in the outputs"
python3 - "$out/hostile" <<'PY' || fails=$((fails + 1))
import json, sys
r = {p["name"]: p for p in json.load(open(sys.argv[1] + "/import.json"))["results"]}
probe = json.load(open(sys.argv[1] + "/hostile_probe.json"))
print("  hostile saw:", json.dumps(probe))
ok = r["kb_honest_relu"]["status"] == "ok" and r["kb_hostile_denied"]["status"] == "refused" \
    and "denied by the import sandbox" in r["kb_hostile_denied"].get("reason", "") \
    and "tried to use the network" in r["kb_hostile_network"].get("reason", "") \
    and all(probe.get(k) != "done" for k in ("socket", "home_passwd", "beside_problem", "root", "problem_file")) \
    and probe["secret_token"] is None and probe["secret_plain"] is None
print(("PASS" if ok else "FAIL") + ": honest %s; denied: %s; network: %s" % (
    r["kb_honest_relu"]["status"], r["kb_hostile_denied"].get("reason", ""), r["kb_hostile_network"].get("reason", "")))
sys.exit(0 if ok else 1)
PY
[ $fails -eq 0 ] && echo "PASS: kb_import_sandbox" || echo "FAIL: kb_import_sandbox ($fails failed)"
exit $((fails > 0))
