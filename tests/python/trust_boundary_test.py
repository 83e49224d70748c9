"""Trust boundaries of the Python helper (issue 50 items 6, 7 and 9): what load_model, load_op and
export_task read or write when a model folder, a task or a cache entry was made by someone else, or a
name is one the CLI refuses. Each refusal is one clear error naming the file (and the field), before
anything is read outside the folder, allocated or written; the built kernelevo agrees where it reads
the same file. Usage: trust_boundary_test.py KERNELEVO [unittest args]. Exits 77 without PyTorch."""
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
try:
    import torch
    from torch import nn
except ImportError:
    print("SKIP this Python has no PyTorch")
    sys.exit(77)
import kernelevo  # noqa: E402
from kernelevo import model_folder  # noqa: E402
from kernelevo import op as kop  # noqa: E402
from kernelevo.kernelbench import common  # noqa: E402

KERNELEVO = None


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 8)

    def forward(self, x):
        return torch.softmax(self.fc2(torch.relu(self.fc1(x))), -1)


def tiny():
    torch.manual_seed(3)
    return Tiny().eval()


class Deadline:
    """A test that would hang (a FIFO opened, /dev/zero read) fails after `seconds` instead."""

    def __init__(self, seconds=30):
        self.seconds = seconds

    def __enter__(self):
        def expire(*_):
            raise AssertionError("still reading after %d s (a FIFO or a device was opened)" % self.seconds)
        self.old = signal.signal(signal.SIGALRM, expire)
        signal.alarm(self.seconds)

    def __exit__(self, *exc):
        signal.alarm(0)
        signal.signal(signal.SIGALRM, self.old)


def run(*args):
    p = subprocess.run([KERNELEVO] + list(args), capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


class ModelFolder(unittest.TestCase):
    """Item 6: a model folder's plan.json, its region tasks and their weight files."""

    @classmethod
    def setUpClass(cls):
        cls.template = tempfile.mkdtemp(prefix="kevo-trust-model-")
        torch.manual_seed(0)
        kernelevo.export_model(tiny(), (torch.randn(4, 16),), os.path.join(cls.template, "m"), device="cpu",
                               quiet=True, threshold=0.0)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.template, ignore_errors=True)

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kevo-trust-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.out = os.path.join(self.dir, "m")
        shutil.copytree(os.path.join(self.template, "m"), self.out, symlinks=True)
        self.plan_path = os.path.join(self.out, "plan.json")
        with open(self.plan_path) as f:
            self.plan = json.load(f)
        self.first = next(r for r in self.plan["regions"] if r["status"] == "task")

    def write_plan(self):
        with open(self.plan_path, "w") as f:
            json.dump(self.plan, f)

    def refused(self, pattern, cli=True):
        """load_model refuses the folder with one PlanError naming plan.json (and the built kernelevo too)."""
        with Deadline(), self.assertRaises(model_folder.PlanError) as caught:
            kernelevo.load_model(self.out, tiny(), kernelevo=KERNELEVO)
        text = str(caught.exception)
        self.assertTrue(text.startswith(self.plan_path + ": "), text)
        self.assertRegex(text, pattern)
        self.assertNotIn("\n", text)
        if cli:
            rc, out, err = run("search", "--model-dir", self.out, "--max-time", "60", "--dry-run")
            self.assertEqual(rc, 2, out + err)
            self.assertRegex(err, pattern)
        return text

    def outside(self):
        """A copy of the first region's task outside the model folder (what a hostile plan points at)."""
        where = os.path.join(self.dir, "outside")
        shutil.copytree(os.path.join(self.out, self.first["task"]), where)
        return where

    def test_a_region_task_outside_the_model_folder_is_refused_as_the_cli_refuses_it(self):
        where = self.outside()
        self.first["task"] = "../outside"
        self.write_plan()
        self.refused(r'regions\[\d+\] \(.*\): task "\.\./outside" leaves the model folder')
        self.first["task"] = where
        self.write_plan()
        self.refused('task "%s" is an absolute path' % re.escape(where))

    def test_a_symlinked_region_folder_is_refused(self):
        where = self.outside()
        folder = os.path.join(self.out, self.first["task"])
        shutil.rmtree(folder)
        os.symlink(where, folder)
        self.refused('task "%s" leaves the model folder' % re.escape(self.first["task"]))

    def test_a_plan_of_the_wrong_form_is_one_error_naming_the_field(self):
        cases = [(lambda p: p.pop("regions"), 'missing key "regions"'),
                 (lambda p: p.update(regions=5), '"regions" must be an array'),
                 (lambda p: p["regions"][0].update(share=-1),
                  r'regions\[0\] \(.*\): "share" must be a number from 0 to 1'),
                 # Issue 50's attack: a share past the whole (their sum overflowed: "inf%").
                 (lambda p: p["regions"][0].update(share=1e308),
                  r'regions\[0\] \(.*\): "share" must be a number from 0'),
                 (lambda p: p["regions"][0].update(status="odd"), 'unknown status "odd"'),
                 (lambda p: p["regions"][0].update(task_name="a/../b"), 'task_name "a/../b" is not an identifier')]
        for change, pattern in cases:
            with self.subTest(pattern):
                self.setUp()
                change(self.plan)
                self.write_plan()
                self.refused(pattern)
        # What only load_model reads (the CLI does not draw inputs): refused before anything is allocated.
        for shape, pattern in (([-4, 16], r'inputs\[0\]: "shape" must be at most 8 whole numbers >= 0'),
                               ([1000000, 1000000, 40], r"inputs\[0\]: shape .*over \d+ GiB"),
                               ("4x16", r'inputs\[0\]: "shape" must be an array')):
            with self.subTest(shape=shape):
                self.setUp()
                self.plan["inputs"][0]["shape"] = shape
                self.write_plan()
                self.refused(pattern, cli=False)
        self.setUp()
        self.plan["fingerprint"] = 5
        self.write_plan()
        self.refused('"fingerprint" must be a string', cli=False)
        with open(self.plan_path, "w") as f:
            f.write("[1, 2")
        self.refused("not valid JSON", cli=False)

    def weight_file(self):
        task_dir = os.path.join(self.out, self.first["task"])
        with open(os.path.join(task_dir, "task.json")) as f:
            task = json.load(f)
        spec = next(s for s in task["inputs"] if s.get("init", {}).get("kind") == "file")
        return task_dir, os.path.join(task_dir, spec["init"]["path"])

    def test_a_weight_file_that_is_a_fifo_a_device_or_of_another_size_is_refused_at_once(self):
        task_dir, weight = self.weight_file()
        with open(weight, "rb") as f:
            data = f.read()
        os.remove(weight)
        os.mkfifo(weight)
        with Deadline(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with self.assertRaisesRegex(ValueError, "%s is a FIFO" % re.escape(weight)):
                kop.load_op(task_dir, kernelevo=KERNELEVO)
            loaded = kernelevo.load_model(self.out, tiny(), kernelevo=KERNELEVO)  # the region stays in PyTorch
        reason = dict((n, why) for n, _, why in loaded.regions)[self.first["name"]]
        self.assertIn("is a FIFO", reason)
        os.remove(weight)
        os.symlink("/dev/zero", weight)
        with Deadline(), warnings.catch_warnings(), self.assertRaisesRegex(ValueError, "is a character device"):
            warnings.simplefilter("ignore")
            kop.load_op(task_dir, kernelevo=KERNELEVO)
        os.remove(weight)
        with open(weight, "wb") as f:
            f.write(data + b"\0" * 4)
        with warnings.catch_warnings(), self.assertRaisesRegex(ValueError, "has %d bytes; a float32.* has %d" % (
                len(data) + 4, len(data))):
            warnings.simplefilter("ignore")
            kop.load_op(task_dir, kernelevo=KERNELEVO)

    def test_the_statuses_are_the_cli_readers(self):
        with open(os.path.join(HERE, "..", "..", "tool", "model", "plan.h")) as f:
            listed = re.search(r"#define KEVO_REGION_STATUS_LIST\(X\)(.*)", f.read()).group(1)
        self.assertEqual(sorted(model_folder._STATUSES), sorted(re.findall(r"X\((\w+)\)", listed)))

    def test_an_honest_folder_still_loads(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loaded = kernelevo.load_model(self.out, tiny(), kernelevo=KERNELEVO)
        self.assertEqual(loaded.mismatch, [])
        self.assertEqual(len(loaded.regions), len(self.plan["regions"]))


class CacheEntry(unittest.TestCase):
    """Item 7: a cache entry is judged by the C++ reader (`kernelevo cache status`, tool/cache/cache.cpp
    lookup()), then load_op's policy: validated, and a speedup that is a measured figure or 0."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kevo-trust-cache-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        torch.manual_seed(1)
        self.task_json = kernelevo.export_task(nn.Linear(64, 32), (torch.randn(8, 64),), self.dir, name="block",
                                               device="cpu", quiet=True)
        self.cache = os.path.join(self.dir, "kernels")
        os.makedirs(os.path.join(self.cache, "block"))
        self.cu = os.path.join(self.cache, "block", "sm_90.cu")
        shutil.copyfile(os.path.join(HERE, "linear_gelu.cu"), self.cu)
        hashes = json.loads(subprocess.run([KERNELEVO, "cache", "hash", "--task", self.task_json, "--json"],
                                           capture_output=True, text=True, check=True).stdout)
        self.meta = {"function": "block", "arch": "sm_90", "task_hash": hashes["task_hash"],
                     "reference_hash": hashes["reference_hash"], "validated": True, "speedup": 1.5,
                     "source_hash": hashlib.sha256(kop._read_bytes(self.cu)).hexdigest()}

    def entry(self, **change):
        with open(self.cu[:-3] + ".json", "w") as f:
            json.dump(dict(self.meta, **change), f)
        return kop._usable_entry(self.task_json, "block", self.cache, "sm_90", KERNELEVO)

    def test_each_bad_entry_is_refused_with_a_reason(self):
        self.assertEqual(self.entry(), (self.cu, None, 1.5))
        self.assertEqual(self.entry(speedup=0), (self.cu, None, None))  # validated without timing
        cases = [({"validated": "false"}, "unreadable metadata"),
                 ({"validated": False}, "stored unvalidated"),
                 ({"function": "other"}, "describes other sm_90, not block sm_90"),
                 ({"arch": "sm_80"}, "describes block sm_80, not block sm_90"),
                 ({"speedup": -3}, "speedup -3"),
                 ({"speedup": "fast"}, "unreadable metadata"),
                 ({"source_hash": "0" * 64}, "edited"),
                 ({"task_hash": "0" * 64}, "the task changed"),
                 ({"reference_hash": "0" * 64}, "the reference source changed")]
        for change, reason in cases:
            with self.subTest(change=change):
                kernel, why, speedup = self.entry(**change)
                self.assertIsNone(kernel, why)
                self.assertIsNone(speedup)
                self.assertIn(reason, why)
                self.assertNotIn("\n", why)

    def test_an_entry_the_cli_calls_invalid_is_never_used(self):
        self.entry(function="other")
        rc, out, err = run("cache", "status", "--cache-dir", self.cache, "--task", self.task_json, "--json")
        row = next(r for r in json.loads(out)["entries"] if r["function"] == "block" and r["arch"] == "sm_90")
        self.assertEqual(row["state"], "invalid")
        self.assertIn(row["reason"], kop._usable_entry(self.task_json, "block", self.cache, "sm_90", KERNELEVO)[1])
        os.remove(self.cu[:-3] + ".json")
        os.mkfifo(self.cu[:-3] + ".json")
        with Deadline():
            kernel, why, _ = kop._usable_entry(self.task_json, "block", self.cache, "sm_90", KERNELEVO)
        self.assertIsNone(kernel)
        self.assertIn("no metadata file sm_90.json", why)  # (C++ lookup(): not a regular file)


class TaskName(unittest.TestCase):
    """Item 9: export_task's name follows the CLI's rule (tool/task/task_checks.cpp task_name_problem)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kevo-trust-name-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.out = os.path.join(self.dir, "tasks")

    def export(self, name):
        return kernelevo.export_task(nn.Linear(8, 4), (torch.randn(2, 8),), self.out, name=name, device="cpu",
                                     quiet=True)

    def test_the_limit_is_the_clis(self):
        with open(os.path.join(HERE, "..", "..", "tool", "task", "task_checks.h")) as f:
            limit = int(re.search(r"kMaxTaskNameChars = (\d+);", f.read()).group(1))
        self.assertEqual(common.MAX_TASK_NAME_CHARS, limit)

    def test_a_name_the_cli_refuses_is_one_value_error_and_nothing_is_written(self):
        for name, why in (("a" * 129, "has 129 characters; a task name has at most 128"),
                          ("b" * 200, "has 200 characters"), ("c" * 300, "has 300 characters"),
                          ("1abc", "is not a C identifier"), ("a-b", "is not a C identifier"),
                          ("caf\u00e9", "is not a C identifier")):
            with self.subTest(name=name[:12]):
                with self.assertRaisesRegex(ValueError, "^name: .*" + why):
                    self.export(name)
                self.assertFalse(os.path.exists(self.out))

    def test_the_longest_name_is_one_the_cli_takes(self):
        task_json = self.export("n" * 128)
        rc, out, err = run("cache", "hash", "--task", task_json, "--json")
        self.assertEqual(rc, 0, err)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: trust_boundary_test.py KERNELEVO [unittest args]")
    KERNELEVO = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
