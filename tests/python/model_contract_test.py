"""The model folder contract (python/kernelevo/model_plan.md) from both sides: kernelevo.export_model
writes a folder, the built `kernelevo search --model-dir DIR --dry-run` and `kernelevo bench
--model-dir DIR --kernels DIR/cache` read it, and the plan holds every key model_plan.md's example
shows. A key renamed on either side fails here: the C++ reader refuses a plan without a key it needs
(exit 2), or its table no longer shows the plan's regions and shares, or the plan no longer has a
documented key. Also: integer inputs' value range ("low"/"high") from export_model to
load_model's plan_inputs. CPU only (the bench validates no kernel here: none is cached).
Usage: model_contract_test.py KERNELEVO [unittest args]. Exits 77 (ctest: skipped) without PyTorch."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PLAN_DOC = os.path.join(HERE, "..", "..", "python", "kernelevo", "model_plan.md")
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
try:
    import torch
    from torch import nn
except ImportError:
    print("SKIP this Python has no PyTorch")
    sys.exit(77)
import kernelevo  # noqa: E402
from kernelevo.model_load import plan_inputs, read_plan  # noqa: E402

KERNELEVO = None  # set from argv


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 16)

    def forward(self, x):
        return torch.softmax(self.fc2(self.act(self.fc1(x))), -1)


class Tokens(nn.Module):
    """Token ids into an embedding of 64 rows (ids 0..50 in the examples), then a linear head."""

    def __init__(self):
        super().__init__()
        self.emb, self.head = nn.Embedding(64, 16), nn.Linear(16, 32)

    def forward(self, ids):
        return self.head(self.emb(ids))


def doc_example(heading):
    """The first ```json block after `heading` in model_plan.md, parsed."""
    with open(PLAN_DOC, encoding="utf-8") as f:
        text = f.read()
    block = re.search(re.escape(heading) + r".*?```json\n(.*?)```", text, re.S)
    assert block, "model_plan.md has no json example under %r" % heading
    return json.loads(block.group(1))


def run(*args):
    p = subprocess.run([KERNELEVO] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


class ModelFolder(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kevo_contract_")
        cls.dir = os.path.join(cls.tmp, "tiny")
        torch.manual_seed(0)
        kernelevo.export_model(Tiny().eval(), torch.randn(64, 16), cls.dir, threshold=0.0, device="cpu", quiet=True)
        with open(os.path.join(cls.dir, "plan.json"), encoding="utf-8") as f:
            cls.plan = json.load(f)
        cls.tasks = [r for r in cls.plan["regions"] if r["status"] == "task"]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_plan_has_the_documented_keys(self):
        doc = doc_example("## plan.json")
        self.assertEqual(self.plan["format"], doc["format"])
        self.assertFalse(set(doc) - set(self.plan), "plan.json lacks keys model_plan.md shows")
        for key in ("inputs", "regions"):
            for got in self.plan[key]:
                self.assertFalse(set(doc[key][0]) - set(got), "plan.json %s[] lacks keys model_plan.md shows" % key)
        self.assertGreaterEqual(len(self.tasks), 2, self.plan["regions"])

    def test_search_dry_run_splits_the_time_over_every_task_region(self):
        rc, out, err = run("search", "--model-dir", self.dir, "--max-time", "60", "--dry-run")
        self.assertEqual(rc, 0, err)
        rows = {}
        for line in out.splitlines():
            m = re.match(r"(\S+)\s+([0-9.]+)%\s+(\d+) s\s+pending\b", line)
            if m:
                rows[m.group(1)] = (float(m.group(2)), int(m.group(3)))
        self.assertEqual(set(rows), {r["name"] for r in self.tasks}, out)
        self.assertEqual(sum(b for _, b in rows.values()), 60, out)
        for r in self.tasks:  # the share the C++ side shows is the plan's
            self.assertAlmostEqual(rows[r["name"]][0], 100 * r["share"], delta=0.051, msg=out)
        n = len(self.tasks)
        self.assertIn("%s: %d of %d region search(es) to run" % (self.plan["model"], n, n), out)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "search", "summary.json")), "a dry run writes nothing")

    def test_bench_lists_every_task_region(self):
        cache = os.path.join(self.dir, "cache")
        os.makedirs(cache, exist_ok=True)
        rc, out, err = run("bench", "--model-dir", self.dir, "--kernels", cache)
        self.assertEqual(rc, 0, err)
        with open(os.path.join(self.dir, "bench", "report.json"), encoding="utf-8") as f:
            report = json.load(f)
        self.assertEqual(report["suite"], os.path.join(self.dir, "regions"))
        by_name = {r["name"]: r for r in report["results"]}
        self.assertEqual(set(by_name), {r["task_name"] for r in self.tasks}, report["results"])
        for r in self.tasks:
            self.assertEqual(by_name[r["task_name"]]["task"], os.path.join(self.dir, r["task"], "task.json"))
            self.assertEqual(by_name[r["task_name"]]["status"], "missing")  # nothing cached: nothing validated

    def test_a_plan_without_a_key_is_refused_in_one_line(self):
        broken = os.path.join(self.tmp, "broken")
        shutil.copytree(self.dir, broken)
        plan = dict(self.plan, regions=[{k: v for k, v in r.items() if k != "share"} for r in self.plan["regions"]])
        with open(os.path.join(broken, "plan.json"), "w", encoding="utf-8") as f:
            json.dump(plan, f)
        rc, out, err = run("search", "--model-dir", broken, "--max-time", "60", "--dry-run")
        self.assertEqual(rc, 2, out + err)
        self.assertIn('missing key "share"', err)


class IntegerInputs(unittest.TestCase):
    def test_token_ids_keep_their_range(self):
        tmp = tempfile.mkdtemp(prefix="kevo_contract_ids_")
        self.addCleanup(shutil.rmtree, tmp, True)
        torch.manual_seed(0)
        ids = torch.randint(0, 51, (4, 32))
        ids[0, 0], ids[0, 1] = 0, 50  # the examples go from 0 up to 50
        out = os.path.join(tmp, "tokens")
        kernelevo.export_model(Tokens().eval(), ids, out, threshold=0.0, device="cpu", quiet=True)
        spec = read_plan(out)["inputs"][0]
        self.assertEqual((spec["dtype"], spec["low"], spec["high"]), ("int64", 0, 51), spec)
        drawn = plan_inputs(read_plan(out), "cpu")[0]
        self.assertEqual((drawn.dtype, list(drawn.shape)), (torch.int64, [4, 32]))
        self.assertTrue(0 <= int(drawn.min()) and int(drawn.max()) < 51, drawn)
        self.assertGreater(len(torch.unique(drawn)), 10, "integer inputs drawn from [0, 2) again: %s" % drawn)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: model_contract_test.py KERNELEVO [unittest args]")
    KERNELEVO = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
