#!/usr/bin/env python3
"""Where the GPU's time goes while several searches share it (issue 48): a table per phase of the
time the GPU lock was held in each mode and of the time the GPU executed kernels meanwhile.

Reads, from one run of benchmarks/studies/gpu_busy.sh (or any run with KEVO_PHASE_LOG set):
  phases.jsonl  $KEVO_PHASE_LOG: one line per job of every judge (its phases: start, end, the lock
                they held) and one line per hold of the GPU lock by anyone (judges, profiles,
                PyTorch baselines, imports, bandwidth);
  util.csv      NVML's GPU utilization (nvidia-smi --query-gpu=timestamp,utilization.gpu -lms 100):
                the share of each sample period in which a kernel executed on the device;
  window        two unix times: when the searches started and ended.
A sample's busy time is split among the phases running at that moment, in proportion to their
overlap with it (a timing holds the GPU alone: its share is exact; shared phases split theirs).

Usage: gpu_busy.py OUTDIR [--json]
"""
import collections
import datetime
import json
import os
import sys


def read_util(path):
    samples = []
    for line in open(path, errors="replace"):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 2:
            continue
        try:
            t = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            samples.append((t, float(parts[1]) / 100.0))
        except ValueError:
            continue
    return samples


def read_phases(path):
    jobs, holds = [], []
    for line in open(path, errors="replace"):
        try:
            j = json.loads(line)
        except ValueError:
            continue
        (holds if "lock" in j and "asked" in j else jobs).append(j)
    return jobs, holds


def category(reason):
    for key, name in (("(timing)", "judge: timed calls"), ("(correctness checks)", "judge: correctness checks"),
                      ("profiling", "profiling (ncu)"), ("PyTorch baselines", "PyTorch baselines"),
                      ("importing", "import"), ("bandwidth", "copy bandwidth")):
        if key in reason:
            return name
    return "other: " + reason


class Timeline:
    """The wall time in 10 ms bins: the GPU's utilization and how many spans run in each."""
    BIN = 0.01

    def __init__(self, samples, start, end, spans):
        self.start, n = start, max(1, int((end - start) / self.BIN) + 1)
        self.util = [0.0] * n
        for (a, u), (b, _) in zip(samples, samples[1:]):
            for i in range(self.index(a), min(n, self.index(b))):
                self.util[i] = u
        self.running = [0] * n
        for t0, t1, *_ in spans:
            for i in range(self.index(t0), min(n, self.index(t1))):
                self.running[i] += 1

    def index(self, t):
        return max(0, int((t - self.start) / self.BIN))

    def busy(self, t0, t1):
        """GPU-executing seconds in [t0, t1), each bin's share split among the spans running in it."""
        n = len(self.util)
        bins = range(self.index(t0), min(n, self.index(t1)))
        return sum(self.util[i] * self.BIN / max(1, self.running[i]) for i in bins)


def main():
    out = sys.argv[1]
    as_json = "--json" in sys.argv
    samples = read_util(os.path.join(out, "util.csv"))
    jobs, holds = read_phases(os.path.join(out, "phases.jsonl"))
    start, end = (float(x) for x in open(os.path.join(out, "window")).read().split())
    wall = end - start
    # Every interval that ran on the GPU: a judge's phases, and the tool's own holds (profiles, baselines).
    spans = []
    for j in jobs:
        for p in j.get("phases", []):
            if p["lock"] != "none" or p["phase"] in ("load", "context", "spawn"):
                spans.append((p["t0"], p["t1"], "judge: " + p["phase"], p["lock"]))
    for h in holds:
        cat = category(h.get("reason", ""))
        if not cat.startswith("judge"):
            spans.append((h["got"], h["released"], cat, h["lock"]))
    spans = [s for s in spans if s[1] > start and s[0] < end]

    timeline = Timeline(samples, start, end, spans)
    rows = collections.OrderedDict()
    for t0, t1, name, lock in spans:  # a helper's preparing (shared) and measuring (exclusive): two rows
        r = rows.setdefault((name, lock), {"phase": name, "lock": lock, "count": 0, "held_s": 0.0, "gpu_busy_s": 0.0})
        r["count"] += 1
        r["held_s"] += t1 - t0
        r["gpu_busy_s"] += timeline.busy(max(t0, start), min(t1, end))
    # Waits for the lock, and the judge's own split of its checks and timing (profile_s sums).
    waits = collections.Counter()
    sub = collections.Counter()
    for j in jobs:
        for k, v in j.get("profile_s", {}).items():
            if k.startswith("wait."):
                waits[k] += v
            elif k.startswith(("trials.", "timing.")) and isinstance(v, (int, float)):
                sub[k] += v
    exclusive = sum(min(h["released"], end) - max(h["got"], start) for h in holds
                    if h["lock"] == "exclusive" and h["released"] > start and h["got"] < end)
    in_window = [(t, u) for t, u in samples if start <= t <= end]
    device_busy = sum(u for _, u in in_window) / len(in_window) if in_window else 0.0
    validations = sum(1 for j in jobs if j.get("profile_s", {}).get("timing") is not None)
    judged = len(jobs)
    summary = {"wall_s": wall, "device_busy_share": device_busy, "jobs": judged, "timed_jobs": validations,
               "jobs_per_gpu_minute": judged / (wall / 60) if wall > 0 else 0.0,
               "exclusive_share": exclusive / wall if wall > 0 else 0.0,
               "phases": list(rows.values()), "waits_s": dict(waits), "judge_split_s": dict(sub)}
    if as_json:
        print(json.dumps(summary, indent=1))
        return
    print("wall %.1f s; the GPU executed kernels %.0f%% of it (NVML); %d jobs judged (%d timed): %.1f per GPU-minute; "
          "a measurement held the GPU alone %.0f%% of the wall time" %
          (wall, 100 * device_busy, judged, validations, summary["jobs_per_gpu_minute"],
           100 * summary["exclusive_share"]))
    print()
    print("| phase | lock | spans | held (s) | GPU executing (s) | executing / held |")
    print("|---|---|---:|---:|---:|---:|")
    for r in sorted(rows.values(), key=lambda r: -r["held_s"]):
        share = r["gpu_busy_s"] / r["held_s"] if r["held_s"] > 0 else 0.0
        print("| %s | %s | %d | %.1f | %.1f | %.0f%% |" %
              (r["phase"], r["lock"], r["count"], r["held_s"], r["gpu_busy_s"], 100 * share))
    print()
    print("waiting for the lock (s, summed over judges): " +
          (", ".join("%s %.1f" % kv for kv in sorted(waits.items())) or "none"))
    print("inside the checks and the timing (s, summed): " +
          ", ".join("%s %.1f" % kv for kv in sorted(sub.items(), key=lambda kv: -kv[1])[:12]))


if __name__ == "__main__":
    main()
