"""The KernelBench importer's code is the package kernelevo.kernelbench (issue 39 item 5): its modules
import as such and import a problem in this process; tool/kernelbench/import_kernelbench.py is a thin
entry script over them (argument parsing and a call) that finds the package beside it; no Python file
of python/ or tool/ is over 600 lines, no function over 80 (its docstring not counted).
Usage: kernelbench_package_test.py [unittest args]. Exits 77 (ctest: skipped) without PyTorch."""
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
SCRIPT = os.path.join(ROOT, "tool", "kernelbench", "import_kernelbench.py")
REFERENCE = os.path.join(ROOT, "tool", "kernelbench", "jit_reference.cpp")
sys.path.insert(0, os.path.join(ROOT, "python"))
try:
    import torch
except ImportError:
    print("SKIP this Python has no PyTorch")
    sys.exit(77)
from kernelevo.kernelbench import common, driver, fill, task_import  # noqa: E402

PROBLEM = """import torch
import torch.nn as nn

batch_size = 8
in_features = 32
out_features = 16


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.fc(x)) * 2


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
"""

BRANCH = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return -x


def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
"""

PHASES = ["load", "build", "inputs", "eager", "trace", "check", "fp64", "write"]


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


class Limits(unittest.TestCase):
    def python_files(self):
        for top in ("python", "tool"):
            for d, dirs, files in os.walk(os.path.join(ROOT, top)):
                dirs[:] = [x for x in dirs if x not in ("build", "__pycache__") and not x.endswith(".egg-info")]
                for f in files:
                    if f.endswith(".py"):
                        yield os.path.join(d, f)

    def test_no_python_file_over_600_lines_and_no_function_over_80(self):
        files = list(self.python_files())
        self.assertIn(SCRIPT, files)
        for path in files:
            with open(path, encoding="utf-8") as f:
                text = f.read()
            rel = os.path.relpath(path, ROOT)
            self.assertLessEqual(text.count("\n"), 600, "%s has %d lines (at most 600)" % (rel, text.count("\n")))
            for node in ast.walk(ast.parse(text, rel)):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                lines = node.end_lineno - node.lineno + 1
                doc = node.body[0]
                if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str):
                    lines -= doc.end_lineno - doc.lineno + 1
                self.assertLessEqual(lines, 80, "%s:%d: %s() has %d lines besides its docstring (at most 80)" % (
                    rel, node.lineno, node.name, lines))

    def test_the_entry_script_is_thin(self):
        """Argument parsing and a call: it imports no torch and nothing of the importer but its driver."""
        with open(SCRIPT, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                imported.add(node.module)
        self.assertEqual(imported, {"argparse", "json", "os", "sys", "kernelevo.kernelbench.driver"})


class Package(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kevo-kbpkg-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def args(self, out):
        return types.SimpleNamespace(out=out, device="cpu", device_kind="cpu", refcheck="", library="", max_numel=0,
                                     timeout=300, scratch="", precision=None, regions=False, reference_source=REFERENCE)

    def test_import_one_in_process_writes_the_task(self):
        problem = write(os.path.join(self.dir, "level1", "7_Linear_ReLU.py"), PROBLEM)
        out = os.path.join(self.dir, "out")
        os.makedirs(out)
        lines = []
        res = task_import.import_one(problem, self.args(out), REFERENCE, 0, lambda line, flush=False: lines.append(line))
        self.assertEqual(res["status"], "ok", res)
        self.assertEqual(res["name"], "kb1_7_Linear_ReLU")
        self.assertEqual([json.loads(l)["progress"]["phase"] for l in lines], PHASES)
        with open(os.path.join(out, "kb1_7_Linear_ReLU", "task.json"), encoding="utf-8") as f:
            task = json.load(f)
        self.assertEqual(task, res["task_json"])
        self.assertEqual([(i["name"], i["shape"]) for i in task["inputs"]],
                         [("x", ["batch_size", "in_features"]), ("fc_weight", ["out_features", "in_features"]),
                          ("fc_bias", ["out_features"])])
        self.assertEqual(task["inputs"][0]["init"], {"kind": "rand", "low": 0, "high": 1})
        self.assertEqual(task["flops"], str(2 * 8 * 32 * 16))
        for f in ("model.pt", "fc_weight.bin", "fc_bias.bin", "problem.py", "graph.py"):
            self.assertTrue(os.path.isfile(os.path.join(out, "kb1_7_Linear_ReLU", f)), f)

    def test_the_filler_is_the_packages_own(self):
        """refcheck_values: seeded, the same bits twice, and of the asked dtype (tests/device compares
        them with the C++ filler bit for bit)."""
        gen = {"kind": "randint", "seed": 3, "a": -5.0, "b": 7.0}
        a = fill.refcheck_values(gen, [1000], torch.int64, "cpu")
        self.assertTrue(torch.equal(a, fill.refcheck_values(gen, [1000], torch.int64, "cpu")))
        self.assertEqual((int(a.min()), int(a.max())), (-5, 6))
        self.assertEqual(common.DTYPES[torch.bfloat16], ("bfloat16", 2))

    def run_script(self, script, *argv):
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KERNELEVO_PYTHON_DIR")}
        return subprocess.run([sys.executable, script, *argv], capture_output=True, text=True, env=env, timeout=600)

    def test_the_entry_script_runs_the_package(self):
        """Without --kernelevo-python it finds the source tree's python/ beside it; one result per
        problem (ok, refused with its line) after the progress lines, the driver's protocol."""
        ok = write(os.path.join(self.dir, "level1", "7_Linear_ReLU.py"), PROBLEM)
        branch = write(os.path.join(self.dir, "level1", "8_Branch.py"), BRANCH)
        out = os.path.join(self.dir, "out")
        p = self.run_script(SCRIPT, "--out", out, "--reference-source", REFERENCE, ok, branch)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        records = [json.loads(l) for l in p.stdout.splitlines()]
        results = [r for r in records if "progress" not in r]
        self.assertEqual([(r["name"], r["status"]) for r in results], [("kb1_7_Linear_ReLU", "ok"), ("kb1_8_Branch", "refused")])
        self.assertIn("data-dependent control flow at line 7", results[1]["reason"])
        phases = [r["progress"]["phase"] for r in records if "progress" in r and r["progress"]["name"] == "kb1_7_Linear_ReLU"]
        self.assertEqual(phases, PHASES)
        self.assertTrue(os.path.isfile(os.path.join(out, "kb1_7_Linear_ReLU", "model.pt")))
        self.assertFalse(os.path.exists(os.path.join(out, "kb1_8_Branch")))

    def test_the_entry_script_without_the_package_is_one_fatal_line(self):
        alone = os.path.join(self.dir, "share", "kernelevo", "kernelbench", "import_kernelbench.py")
        os.makedirs(os.path.dirname(alone))
        shutil.copyfile(SCRIPT, alone)
        p = self.run_script(alone, "--out", self.dir, "--reference-source", REFERENCE, alone)
        self.assertEqual(p.returncode, 2, p.stderr[-3000:])
        fatal = json.loads(p.stdout)["fatal"]
        self.assertIn("the kernelevo Python package (kernelevo/kernelbench/driver.py) was not found beside the importer",
                      fatal)
        p = self.run_script(alone, "--out", self.dir, "--reference-source", REFERENCE, "--kernelevo-python",
                            os.path.join(ROOT, "python"), os.path.join(self.dir, "missing.py"))
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertEqual(json.loads(p.stdout)["status"], "failed")

    def test_the_driver_takes_the_default_precision_from_the_package(self):
        args = self.args(self.dir)
        args.files, args.device = [], "cpu"
        self.assertEqual(driver.run(args, print), 0)
        self.assertEqual(args.precision, {"task": None, "policy": "pytorch", "cudnn_tf32": True, "matmul_tf32": False})


if __name__ == "__main__":
    unittest.main(verbosity=2)
