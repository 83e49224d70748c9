#!/usr/bin/env python3
"""The tables of benchmarks/studies/precision_proof.sh (issue 35) from its `kernelevo validate --json` outputs.

Usage: precision_proof_table.py JSONDIR TABLE.md "POLICIES" "ATTACKS" TASK...
JSONDIR holds honest.<policy>.<task>.{json,err,rc,secs,lim} or .skip, and attack.<policy>.<variant>.*.
Keys read (tool/validate/validate.cpp ValidationResult::to_json, tool/baseline/baseline.cpp speedups_json,
tool/validate/accuracy.cpp, tool/sol/sol.cpp): status, speedup, kernel_us, reference_us, max_abs_diff, log,
baselines.{eager,compile}.{us,speedup,not_run}, details.accuracy.<output>.{rel_l2,rel_l2_bound},
details.kernelbench_check, details.reference_precision, details.timing.reference_strict_us,
details.sol.{fraction,floor_beaten,sets[].fraction}.
Prints the tables and writes them to TABLE.md; exit 0 only when every honest kernel is ok under every
policy, every attack is rejected under every policy, and no SOL fraction is above 100% (no floor beaten).
"""
import json
import math
import os
import sys


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def load(jdir, stem):
    """(json or None, why-not text)."""
    skip = read(os.path.join(jdir, stem + ".skip")).strip()
    if skip:
        return None, skip
    if not os.path.exists(os.path.join(jdir, stem + ".rc")):
        return None, "not run"
    rc, lim = read(os.path.join(jdir, stem + ".rc")).strip(), read(os.path.join(jdir, stem + ".lim")).strip()
    try:
        return json.loads(read(os.path.join(jdir, stem + ".json"))), ""
    except ValueError:
        err = " | ".join(read(os.path.join(jdir, stem + ".err")).strip().splitlines()[-3:])[-200:]
        if rc in ("124", "137"):
            return None, "timed out after %s s %s" % (lim, err)
        return None, "no JSON (exit %s) %s" % (rc, err)


def num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def f(v, fmt="%.4g"):
    v = num(v)
    return "" if v is None else fmt % v


def pos(v, fmt):
    """A time or speedup; blank where the tool has none (0 when nothing was timed)."""
    v = num(v)
    return "" if v is None or v <= 0 else fmt % v


def details(j):
    d = j.get("details")
    return d if isinstance(d, dict) else {}


def rel_l2(j):
    acc = details(j).get("accuracy")
    if not isinstance(acc, dict):
        return None, None
    errs = [num(a.get("rel_l2")) for a in acc.values() if isinstance(a, dict)]
    bounds = [num(a.get("rel_l2_bound")) for a in acc.values() if isinstance(a, dict)]
    errs, bounds = [e for e in errs if e is not None], [b for b in bounds if b is not None]
    return (max(errs) if errs else None), (min(bounds) if bounds else None)


def baseline(j, kind):
    b = j.get("baselines")
    b = b.get(kind) if isinstance(b, dict) else None
    if not isinstance(b, dict):
        return "", "", "no baseline in the JSON"
    if "not_run" in b:
        return "not run", "", str(b["not_run"])
    return pos(b.get("us"), "%.1f"), pos(b.get("speedup"), "%.3f"), ""


def ref_precision(j):
    d = details(j)
    p = d.get("reference_precision")
    if p is None and isinstance(d.get("timing"), dict):
        p = d["timing"].get("reference_precision")
    if isinstance(p, dict):
        return "correctness %s; timing %s" % (p.get("correctness", "?"), p.get("timing", "?"))
    return "" if p is None else str(p)


def sol_fractions(j):
    """[(label, fraction)], floor_beaten."""
    s = details(j).get("sol")
    if not isinstance(s, dict):
        return [], False
    out = [("overall", num(s.get("fraction")))]
    for st in s.get("sets") or []:
        if isinstance(st, dict):
            out.append(("set %s" % st.get("label", st.get("set", "?")), num(st.get("fraction"))))
    beaten = bool(s.get("floor_beaten")) or any(bool(st.get("floor_beaten")) for st in s.get("sets") or [] if isinstance(st, dict))
    return [(k, v) for k, v in out if v is not None and v > 0], beaten


def geomean(xs):
    xs = [x for x in xs if x is not None and x > 0]
    return (math.exp(sum(math.log(x) for x in xs) / len(xs)), len(xs)) if xs else (None, 0)


def honest_table(jdir, policies, tasks, out, sol):
    ok_all, speed, notes = True, {p: {"reference": [], "eager": [], "compile": []} for p in policies}, []
    out.append("## Honest kernels (tests/data/kernelbench_honest), KernelBench's own sizes unless the log says --max-numel\n")
    out.append("| problem | policy | status | LibTorch ref us (timed under the policy) | strict-fp32 ref us | PyTorch eager us | "
               "torch.compile us | kernel us | speedup vs ref | vs eager | vs compile | max rel L2 err (bound) | KernelBench 1e-2 |")
    out.append("|" + "---|" * 13)
    timed_as = {}
    for t in tasks:
        for p in policies:
            stem = "honest.%s.%s" % (p, t)
            j, why = load(jdir, stem)
            if j is None:
                ok_all = False
                out.append("| %s | %s | NOT RUN | | | | | | | | | | |" % (t, p))
                notes.append("%s under %s: %s" % (t, p, why))
                continue
            st = j.get("status", "?")
            ok_all = ok_all and st == "ok"
            eu, es, ew = baseline(j, "eager")
            cu, cs, cw = baseline(j, "compile")
            e, b = rel_l2(j)
            strict_us = (details(j).get("timing") or {}).get("reference_strict_us") if isinstance(details(j).get("timing"), dict) else None
            out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                t, p, st, pos(j.get("reference_us"), "%.1f"), pos(strict_us, "%.1f"), eu, cu, pos(j.get("kernel_us"), "%.1f"),
                pos(j.get("speedup"), "%.3f"), es, cs, (f(e, "%.2e") + (" (%s)" % f(b, "%.1e") if b is not None else "")),
                details(j).get("kernelbench_check", "")))
            if ref_precision(j):
                timed_as.setdefault(p, ref_precision(j))
            if st != "ok":
                notes.append("%s under %s: %s: %s" % (t, p, st, " | ".join(str(j.get("log", "")).splitlines())[:300]))
            else:
                speed[p]["reference"].append(num(j.get("speedup")))
                speed[p]["eager"].append(num(float(es)) if es else None)
                speed[p]["compile"].append(num(float(cs)) if cs else None)
                for kind, w in (("eager", ew), ("compile", cw)):
                    if w:
                        notes.append("%s under %s: %s not run: %s" % (t, p, kind, w))
            fr, beaten = sol_fractions(j)
            sol.append((stem, fr, beaten))
    out.append("")
    for p in policies:
        parts = []
        for kind, label in (("reference", "the LibTorch reference"), ("eager", "PyTorch eager"), ("compile", "torch.compile")):
            g, n = geomean(speed[p][kind])
            parts.append("%s %s (%d kernels)" % (label, "n/a" if g is None else "%.3fx" % g, n))
        out.append("- geomean speedup under `%s` over: %s" % (p, "; ".join(parts)))
        if p in timed_as:
            out.append("  - reference precision under `%s`: %s" % (p, timed_as[p]))
    if notes:
        out.append("\nNotes:\n" + "\n".join("- " + n for n in notes))
    return ok_all


def attack_table(jdir, policies, attacks, out, sol):
    out.append("\n## Attacks (tests/data/attacks/small_softmax kernel.cu, VARIANT defined), correctness only\n")
    out.append("| attack | policy | status | verdict | max abs diff | max rel L2 err (bound) | KernelBench 1e-2 |")
    out.append("|" + "---|" * 7)
    n_rej, n_all = 0, 0
    for v in attacks:
        for p in policies:
            n_all += 1
            j, why = load(jdir, "attack.%s.%s" % (p, v))
            if j is None:
                out.append("| %s | %s | NOT RUN | not proven: %s | | | |" % (v, p, why.replace("|", "/")[:150]))
                continue
            st = j.get("status", "?")
            verdict = {"mismatch": "REJECTED (wrong outputs)", "rejected": "REJECTED (other check)"}.get(st)
            if verdict:
                n_rej += 1
            else:
                verdict = "NOT REJECTED" if st == "ok" else "not proven (%s: %s)" % (st, str(j.get("log", "")).replace("\n", " ").replace("|", "/")[:120])
            e, b = rel_l2(j)
            out.append("| %s | %s | %s | %s | %s | %s | %s |" % (v, p, st, verdict, f(j.get("max_abs_diff"), "%.2e") if st != "no_device" else "",
                       f(e, "%.2e") + (" (%s)" % f(b, "%.1e") if b is not None else ""), details(j).get("kernelbench_check", "")))
            sol.append(("attack.%s.%s" % (p, v), *sol_fractions(j)))
    out.append("\n- attacks rejected: %d of %d (%d attacks x %d policies)" % (n_rej, n_all, len(attacks), len(policies)))
    return n_rej == n_all


def sol_summary(sol, out):
    out.append("\n## Speed of light (details.sol of every validation above)\n")
    fr = [(stem, k, v) for stem, fs, _ in sol for k, v in fs]
    beaten = [stem for stem, _, b in sol if b]
    over = [x for x in fr if x[2] > 1.0]
    if fr:
        stem, k, v = max(fr, key=lambda x: x[2])
        out.append("- max SOL fraction: %.1f%% (%s, %s) over %d fractions of %d validations" % (100 * v, stem, k, len(fr), len(sol)))
    else:
        out.append("- no SOL fraction measured (no timed kernel)")
    for stem, k, v in over:
        out.append("- ABOVE 100%%: %s %s %.1f%%" % (stem, k, 100 * v))
    for stem in beaten:
        out.append("- FLOOR BEATEN (a time below its floor; no fraction given): %s" % stem)
    out.append("- SOL check: %s" % ("PASS (none above 100%, no floor beaten)" if fr and not over and not beaten
                                    else "FAIL" if over or beaten else "NOT SHOWN (nothing measured)"))
    return bool(fr) and not over and not beaten


def main():
    if len(sys.argv) < 6:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    jdir, table, policies, attacks, tasks = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split(), sys.argv[5:]
    out, sol = ["# Issue 35 precision proof\n"], []
    ok_h = honest_table(jdir, policies, tasks, out, sol)
    ok_a = attack_table(jdir, policies, attacks, out, sol)
    ok_s = sol_summary(sol, out)
    out.append("\n- honest kernels all ok under %s: %s; attacks all rejected: %s; SOL: %s" % (
        " and ".join(policies), "yes" if ok_h else "NO", "yes" if ok_a else "NO", "ok" if ok_s else "NOT OK"))
    text = "\n".join(out) + "\n"
    with open(table, "w") as fh:
        fh.write(text)
    print(text, end="")
    return 0 if ok_h and ok_a and ok_s else 1


if __name__ == "__main__":
    sys.exit(main())
