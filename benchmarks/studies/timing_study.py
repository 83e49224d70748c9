#!/usr/bin/env python3
"""Studies the judge's raw per-call times (KEVO_TIMING_DUMP=FILE, one JSON line per timed set) of
repeated validations of one kernel: for each way of summarizing a set's calls, how far the
validations' speedups (geometric mean over the sets) lie from their median.
Usage: KEVO_TIMING_DUMP=t.jsonl kernelevo validate ... (N times); benchmarks/studies/timing_study.py t.jsonl"""
import collections, json, math, statistics, sys

if len(sys.argv) != 2:
    sys.exit(__doc__)
try:
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
except (OSError, ValueError) as e:
    sys.exit(f"timing_study: cannot read {sys.argv[1]}: {e}")
if not rows:
    sys.exit(f"timing_study: {sys.argv[1]} holds no timed sets (was KEVO_TIMING_DUMP set for the validations?)")
labels = list(dict.fromkeys(r["label"] for r in rows))
if len(rows) % len(labels):
    sys.exit(f"timing_study: {len(rows)} sets for {len(labels)} labels: the file mixes tasks or holds an unfinished validation")
runs = [rows[i:i + len(labels)] for i in range(0, len(rows), len(labels))]

def iqm(v):
    v = sorted(v); c = len(v) // 4
    return statistics.fmean(v[c:len(v) - c])

def trim10(v):
    v = sorted(v); c = len(v) // 10
    return statistics.fmean(v[c:len(v) - c])

stats = {"median": statistics.median, "iqm": iqm, "trim10": trim10, "mean": statistics.fmean,
         "p25": lambda v: sorted(v)[len(v) // 4], "min": min}
for first in (100, None):
    print(f"== calls used: {'first %d' % first if first else 'all'}")
    for name, f in stats.items():
        fits, per = [], collections.defaultdict(list)
        for run in runs:
            sp = []
            for s in run:
                k, r = s["kernel_us"][:first], s["reference_us"][:first]
                sp.append(f(r) / f(k)); per[s["label"]].append((f(k), f(r)))
            fits.append(math.exp(statistics.fmean(math.log(x) for x in sp)))
        med = statistics.median(fits)
        dev = max(abs(x - med) / med for x in fits) * 100
        sets = "; ".join(f"{l}: k {' '.join('%.3f' % k for k, _ in v)} r {' '.join('%.3f' % r for _, r in v)}" for l, v in per.items())
        print(f"{name:7s} max dev {dev:5.2f}%  fitness {' '.join('%.4f' % x for x in fits)}\n        {sets}")
print("== per run, per set: calls, stop reason; kernel time histogram in 32 ns ticks (tick:count, top 8)")
for i, run in enumerate(runs):
    for s in run:
        c = collections.Counter(round(x / 0.032) for x in s["kernel_us"])
        print(f"run {i} {s['label']}: {len(s['kernel_us'])} calls, {s['stop_reason']}; " +
              " ".join(f"{t}:{n}" for t, n in sorted(c.most_common(8))))
