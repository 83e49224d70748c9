#!/usr/bin/env bash
# scripts/write_replay.py, the one writer of model_proof.sh's and eight_searches.sh's replay files:
# the source, the reply that does not compile, the variants, in order and with their hashes; a
# --define rewrites the macro's line; a --define the source lacks is exit 2 with a one-line reason.
# Usage: write_replay_test.sh SOURCE_DIR
set -euo pipefail
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
kernel=$src/tests/data/model_proof/linear_act_cublas.cu
python3 "$src/scripts/write_replay.py" "$kernel" "$tmp/r.jsonl" --variants 3 --hash-prefix t --cost-usd 0.01 \
  --define KEVO_PROOF_ACT=2 --compile-error "not this one"
python3 - "$tmp/r.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert [l["request_hash"] for l in lines] == ["t-1", "t-2", "t-3", "t-4", "t-5"], lines
bodies = [l["response"]["content"] for l in lines]
assert all(b.startswith("Here is the kernel.\n\n```cuda\n") and b.endswith("```\n") for b in bodies)
assert all("#define KEVO_PROOF_ACT 2\n" in b and "#define KEVO_PROOF_ACT 1" not in b for b in bodies)
assert "#error not this one" in bodies[1] and not any("#error" in b for b in bodies[:1] + bodies[2:])
assert ["kVariant%d = %d" % (v, v) in bodies[v + 1] for v in (1, 2, 3)] == [True] * 3 and "kVariant" not in bodies[0]
assert len(set(bodies)) == 5 and all(l["usage"]["cost_usd"] == 0.01 for l in lines)
print("write_replay: 5 replies as asked")
PY
rc=0
err=$(python3 "$src/scripts/write_replay.py" "$src/tests/data/model_proof/add_relu.cu" "$tmp/s.jsonl" --variants 1 \
  --hash-prefix t --define KEVO_PROOF_ACT=1 2>&1) || rc=$?
echo "$err" | tail -1
[ $rc -eq 2 ] && [[ "$(echo "$err" | tail -1)" == *"has no '#define KEVO_PROOF_ACT' line" ]] && [ ! -e "$tmp/s.jsonl" ]
