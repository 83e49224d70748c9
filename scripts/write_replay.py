#!/usr/bin/env python3
"""Writes a replay file (JSONL, one scripted LLM reply a line, what `kernelevo search --replay FILE
--llm-replay-in-order` answers with) from one kernel source: the source itself, then distinct
variants of it (an unused constant appended, so that each reply is a different kernel).

Used by model_proof.sh, eight_searches.sh and gpu_busy.sh of benchmarks/studies/ (the one writer of
their replies).

    write_replay.py SOURCE OUT --variants N --hash-prefix P [--cost-usd C]
                    [--define NAME=VALUE ...] [--compile-error MESSAGE]

  --variants N         N variants after the source (kVariant1 .. kVariantN)
  --hash-prefix P      each line's request_hash is P-1, P-2, ...
  --cost-usd C         each reply's reported cost (default 0)
  --define NAME=VALUE  rewrites the source's `#define NAME X` line to `#define NAME VALUE` first
                       (an error when the source has no such line)
  --compile-error MSG  a reply that does not compile (the source + `#error MSG`) second, before the
                       variants
"""
import argparse
import json
import re
import sys


def replies(src, variants, compile_error):
    def variant(v):
        return src + "\nnamespace { [[maybe_unused]] constexpr int kVariant%d = %d; }\n" % (v, v)

    out = [src]
    if compile_error:
        out.append(src + "\n#error " + compile_error + "\n")
    return out + [variant(v) for v in range(1, variants + 1)]


def line(n, body, hash_prefix, cost_usd):
    return json.dumps({"time": "", "request_hash": "%s-%d" % (hash_prefix, n), "request": {},
                       "response": {"content": "Here is the kernel.\n\n```cuda\n" + body + "```\n",
                                    "finish_reason": "stop", "model": "replay-model"},
                       "usage": {"prompt_tokens": 3000, "completion_tokens": 800, "cost_usd": cost_usd},
                       "latency_s": 0.1, "attempts": 1, "error": None}) + "\n"


def define(src, assignment, source_path):
    name, sep, value = assignment.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z_]\w*", name) or not value or any(c.isspace() for c in value):
        raise ValueError("--define: expected NAME=VALUE (a macro name and one token), not '%s'" % assignment)
    pattern = re.compile(r"#define %s \S+" % re.escape(name))
    if not pattern.search(src):
        raise ValueError("--define %s: %s has no '#define %s' line" % (assignment, source_path, name))
    return pattern.sub(lambda _: "#define %s %s" % (name, value), src)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source")
    ap.add_argument("out")
    ap.add_argument("--variants", type=int, required=True)
    ap.add_argument("--hash-prefix", required=True)
    ap.add_argument("--cost-usd", type=float, default=0.0)
    ap.add_argument("--define", action="append", default=[])
    ap.add_argument("--compile-error", default="")
    a = ap.parse_args(argv)
    if a.variants < 0:
        ap.error("--variants: must be 0 or more, not %d" % a.variants)
    try:
        with open(a.source) as f:
            src = f.read()
        for d in a.define:
            src = define(src, d, a.source)
    except (OSError, ValueError) as e:
        ap.error(str(e))
    with open(a.out, "w") as f:
        for n, body in enumerate(replies(src, a.variants, a.compile_error), 1):
            f.write(line(n, body, a.hash_prefix, a.cost_usd))


if __name__ == "__main__":
    main(sys.argv[1:])
