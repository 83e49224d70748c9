"""load_model() and compare_model() (issue 38 item 3) on model folders export_model writes, with the built
kernelevo program. Usage: model_load_test.py KERNELEVO [unittest args]. Exits 77 (ctest: skipped) without
PyTorch. Without a GPU no cached kernel can be loaded, so the tests that need a region to run as a kernel
use a test double for load_op: the real KernelEvoOp of the region's task marked usable, computing the
region through its operator (the task's reference with the live weights), or computing it wrongly.
The GPU test (run where PyTorch sees CUDA) validates tests/python/mlp_gelu.cu into the folder's
cache for the MLP's Linear + GELU region of a small transformer block and loads it for real."""
import inspect
import json
import math
import os
import shutil
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
from kernelevo import model_load  # noqa: E402
from kernelevo.torch_task import _load_json  # noqa: E402

sys.path.insert(0, HERE)
from model_export_test import RandomState, Unrolled, stack  # noqa: E402 (models the export test partitions)

KERNELEVO = None
REAL_LOAD_OP = model_load.load_op


class Tiny(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.fc1 = nn.Linear(16, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, 8)

    def forward(self, x):
        return torch.softmax(self.fc2(self.act(self.fc1(x))), -1)


class WithConstant(Tiny):
    """A plain tensor attribute (not a parameter or buffer): the op using it is refused at export."""

    def __init__(self):
        super().__init__()
        self.mask = torch.linspace(0.5, 1.5, 8)

    def forward(self, x):
        return torch.softmax(self.fc2(self.act(self.fc1(x))) * self.mask, -1)


class WithDropout(Tiny):
    """A Dropout kept in training mode: its region is refused at export (random output)."""

    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return torch.softmax(self.fc2(self.drop(self.act(self.fc1(x)))), -1)


def tiny(cls=Tiny, **kw):
    torch.manual_seed(3)
    return cls(**kw).eval()


def usable(wrong=(), noise=(), calls=None):
    """A load_op double: the real op of the task, marked as having a usable kernel. Regions whose task
    name ends with one of `wrong` compute 1.1 * y + 0.01; those in `noise` add a relative error of 8e-5
    per element (within a 1e-4 task tolerance on their own)."""
    def load(task_dir, **kw):
        op = REAL_LOAD_OP(task_dir, **kw)
        op.kernel = "test-double"
        base, name = op.call, os.path.basename(task_dir)

        def call(inputs, weights):
            if calls is not None:
                calls[name] = calls.get(name, 0) + 1
            y = base(inputs, weights)
            if name.endswith(tuple(wrong)):
                return y * 1.1 + 0.01
            if name.endswith(tuple(noise)):
                sign = torch.sign(torch.sin(torch.arange(y.numel(), dtype=y.dtype))).reshape(y.shape)
                return y + 8e-5 * y.abs() * sign
            return y
        op.call = call
        return op
    return load


def stale(task_dir, **kw):
    """A load_op double whose kernel keeps a copy of the first weights it is given (a pre-packed matrix
    made once) and computes with it ever after."""
    op = REAL_LOAD_OP(task_dir, **kw)
    op.kernel, base, kept = "test-double", op.call, []

    def call(inputs, weights):
        if not kept:
            kept.extend(w.detach().clone() for w in weights)
        return base(inputs, kept)
    op.call = call
    return op


class ModelLoad(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kevo-model-load-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.addCleanup(setattr, model_load, "load_op", REAL_LOAD_OP)
        self.x = torch.randn(4, 16)

    def export(self, model, name="tiny", x=None, model_name=None):
        out = os.path.join(self.dir, name)
        kernelevo.export_model(model, (self.x if x is None else x,), out, device="cpu", quiet=True, threshold=0.0,
                               name=model_name)
        return out

    def load(self, out, model, **kw):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loaded = kernelevo.load_model(out, model, kernelevo=KERNELEVO, **kw)
        return loaded, [str(w.message) for w in caught if "load_model" in str(w.message)]

    def same(self, loaded, model, x=None):
        x = self.x if x is None else x
        with torch.no_grad():
            return torch.equal(loaded(x), model(x))

    def test_without_cache_entries_every_region_stays_in_pytorch(self):
        model = tiny()
        out = self.export(model)
        loaded, warned = self.load(out, model)
        self.assertIsInstance(loaded, kernelevo.KernelEvoModel)
        plan = _load_json(os.path.join(out, "plan.json"))
        self.assertEqual([r[0] for r in loaded.regions], [r["name"] for r in plan["regions"]])
        self.assertEqual(len(loaded.regions), 3)
        for name, status, reason in loaded.regions:
            self.assertEqual(status, "pytorch", name)
            self.assertTrue(reason, name)  # CPU: "no CUDA device in this PyTorch"; a GPU: no kernel cached
        self.assertEqual(warned, [])
        self.assertTrue(self.same(loaded, model))
        self.assertIs(loaded.model, model)  # held, not copied: its parameters are the model's
        self.assertEqual({id(p) for p in loaded.parameters()}, {id(p) for p in model.parameters()})
        text = loaded.report()
        for name, _, reason in loaded.regions:
            self.assertIn(name, text)
            self.assertIn(reason, text)
        self.assertIn("0 of 3 region(s) run as kernels", text)

    def test_another_model_warns_and_runs_unchanged(self):
        out = self.export(tiny())
        other = tiny(hidden=48)
        loaded, warned = self.load(out, other)
        self.assertEqual(len(warned), 1)
        self.assertIn("the plan was made from another model", warned[0])
        self.assertIn("fc1.weight: shape [32, 16] in the plan's task, [48, 16] in this model", warned[0])
        self.assertTrue(all(status == "pytorch" for _, status, _ in loaded.regions))
        self.assertTrue(self.same(loaded, other))
        self.assertIn("the plan does not fit this model", loaded.report())

    def test_a_usable_region_runs_with_the_live_weights(self):
        model = tiny()
        out = self.export(model)
        calls = {}
        model_load.load_op = usable(calls=calls)
        loaded, warned = self.load(out, model)
        self.assertEqual(warned, [])
        self.assertEqual([s for _, s, _ in loaded.regions], ["kernel"] * 3)
        self.assertIn("passed on fresh random inputs", loaded.check)
        self.assertIn("the largest atol/rtol of the 3 replaced region(s)' task.json", loaded.check)
        self.assertTrue(calls and all(n >= 1 for n in calls.values()), calls)  # the check ran each region's op
        with torch.no_grad():
            self.assertTrue(torch.allclose(loaded(self.x), model(self.x), atol=1e-6, rtol=1e-6))
            model.fc1.weight.mul_(2)  # fine-tuning after the export: the regions take the live weights
            self.assertTrue(torch.allclose(loaded(self.x), model(self.x), atol=1e-6, rtol=1e-6))
            model.fc2.weight = nn.Parameter(torch.randn(8, 32))  # a new parameter object, too
            self.assertTrue(torch.allclose(loaded(self.x), model(self.x), atol=1e-6, rtol=1e-6))
            self.assertTrue(torch.allclose(loaded(x=self.x), model(self.x), atol=1e-6, rtol=1e-6))  # by name
        self.assertEqual(str(inspect.signature(loaded)), "(x)")  # the model's forward's
        if loaded._traced is not None:  # torch.jit.trace: the regions are operators in its graph
            graph = str(loaded._traced.graph)
            for r in _load_json(os.path.join(out, "plan.json"))["regions"]:
                self.assertIn("kernelevo::" + r["task_name"], graph)
            self.assertIn("torch.jit.trace", loaded.report())
        else:
            self.assertIn("interpreter", loaded.report())
        # Inputs of other shapes than the plan's run the original model.
        x7 = torch.randn(7, 16)
        self.assertTrue(self.same(loaded, model, x7))

    def test_a_kernel_measured_slower_than_its_reference_stays_in_pytorch(self):
        model = tiny()
        out = self.export(model)
        first = _load_json(os.path.join(out, "plan.json"))["regions"][0]["task_name"]

        def load(task_dir, **kw):  # usable doubles whose entries recorded 0.7x (the first region) or 1.3x
            op = usable()(task_dir, **kw)
            op.speedup = 0.7 if os.path.basename(task_dir) == first else 1.3
            return op
        model_load.load_op = load
        regions = self.load(out, model)[0].regions
        self.assertEqual(regions[0][1:], ("pytorch", "its kernel measured 0.7x over the LibTorch reference when validated, "
                                          "below min_speedup=1: slower, stays in PyTorch (load_model(..., min_speedup=0) runs it)"))
        self.assertEqual([s for _, s, _ in regions[1:]], ["kernel"] * 2)
        self.assertEqual([s for _, s, _ in self.load(out, model, min_speedup=0)[0].regions], ["kernel"] * 3)

    def test_a_kernel_that_keeps_the_first_weights_it_saw_is_caught(self):
        model = tiny()
        out = self.export(model)
        model_load.load_op = stale
        loaded, warned = self.load(out, model)
        status = {n: (s, why) for n, s, why in loaded.regions}
        for name in ("fc1", "fc2"):
            self.assertEqual(status[name][0], "pytorch", status[name])
            self.assertIn("the check with its parameters' values moved (as after fine-tuning or loading others)",
                          status[name][1])
            self.assertIn("the kernel does not compute with the weights it is given", status[name][1])
        self.assertEqual(status["softmax"][0], "kernel")  # no weights: nothing to keep
        self.assertEqual(len(warned), 1)
        with torch.no_grad():
            model.fc1.weight.mul_(2)  # what the check stands for: the model after fine-tuning
            self.assertTrue(torch.allclose(loaded(self.x), model(self.x), atol=1e-6, rtol=1e-6))

    def test_a_repeated_region_runs_its_first_instances_kernel(self):
        torch.manual_seed(0)
        model, x = Unrolled(n=64, h=64, steps=4).eval(), torch.randn(4, 8, 64)
        out = self.export(model, "rnn", x=x, model_name="rnn")
        calls = {}
        model_load.load_op = usable(calls=calls)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loaded = kernelevo.load_model(out, model, kernelevo=KERNELEVO)
        self.assertEqual([str(w.message) for w in caught if "load_model" in str(w.message)], [])
        status = {n: (s, why) for n, s, why in loaded.regions}
        self.assertEqual(status["i2h"][0], "kernel")
        for k in (2, 3, 4):
            self.assertEqual(status["i2h.%d" % k], ("kernel", "kernel test-double (region i2h's, repeated)"))
        self.assertIn("passed on fresh random inputs", loaded.check)
        calls.clear()
        with torch.enable_grad():  # the interpreter, which calls the double's Python (as in the test below)
            self.assertTrue(torch.allclose(loaded(x), model(x), atol=1e-5, rtol=1e-5))
            with torch.no_grad():
                model.i2h.weight.mul_(0.5)  # the live weights, in every step
            self.assertTrue(torch.allclose(loaded(x), model(x), atol=1e-5, rtol=1e-5))
        self.assertEqual(calls.get("rnn_i2h"), 8)  # one task, its operator at each of the 4 steps, twice
        # Without a kernel for the cell, its repeats stay in PyTorch and say why.
        model_load.load_op = REAL_LOAD_OP
        loaded, _ = self.load(out, model)
        why = {n: (s, r) for n, s, r in loaded.regions}["i2h.2"]
        self.assertEqual(why[0], "pytorch")
        self.assertTrue(why[1].startswith("a repeat of region i2h, which runs in PyTorch ("), why[1])

    def test_layers_of_one_shape_run_the_first_ones_kernel_on_their_own_weights(self):
        torch.manual_seed(0)
        model, x = stack(width=32).eval(), torch.randn(8, 32)
        out = self.export(model, "stack", x=x, model_name="st")
        calls = {}
        model_load.load_op = usable(calls=calls)
        loaded, warned = self.load(out, model)
        self.assertEqual(warned, [])
        self.assertEqual([s for _, s, _ in loaded.regions], ["kernel"] * 5)
        calls.clear()
        with torch.enable_grad():
            self.assertTrue(torch.allclose(loaded(x), model(x), atol=1e-5, rtol=1e-5))
            with torch.no_grad():
                model[4].weight.mul_(-1)  # one layer's live weights: its region runs on them
            self.assertTrue(torch.allclose(loaded(x), model(x), atol=1e-5, rtol=1e-5))
        self.assertEqual(calls, {"st_0": 8, "st_8": 2})
        res = kernelevo.compare_model(model, loaded, inputs=(x,), reps=2, verbose=False)  # each repeat timed too
        self.assertEqual([r["name"] for r in res["regions"]], ["0", "2", "4", "6", "8"])
        # A kernel that keeps the first weights it saw (right for the first layer only) is caught in
        # the layers whose weights differ, and in the first one with its weights moved.
        model_load.load_op = stale
        loaded, warned = self.load(out, model)
        status = {n: (s, why) for n, s, why in loaded.regions}
        for n in ("0", "8"):  # right on its own weights: caught with them moved
            self.assertEqual(status[n][0], "pytorch")
            self.assertIn("the kernel does not compute with the weights it is given", status[n][1])
        for n in ("2", "4", "6"):  # wrong on their own weights already
            self.assertEqual(status[n][0], "pytorch")
            self.assertIn("the check on fresh inputs: its output differs", status[n][1])
        self.assertEqual(len(warned), 1)
        self.assertIn("the check disabled region(s) 0 (", warned[0])
        # An edited plan: a repeat of no region, a repeat of a region with weights of other shapes.
        path = os.path.join(out, "plan.json")
        plan = _load_json(path)
        plan["regions"][1]["same_as"], plan["regions"][2]["same_as"] = "nope", "6"
        plan["regions"][4].update(status="repeat", same_as="0", task=None)
        with open(path, "w") as f:
            json.dump(plan, f)
        model_load.load_op = usable()
        loaded, _ = self.load(out, model)
        status = {n: (s, why) for n, s, why in loaded.regions}
        self.assertEqual(status["2"], ("pytorch", "a repeat of region nope, which is not a region before it in the plan"))
        self.assertEqual(status["4"], ("pytorch", "a repeat of region 6, which is not a region before it in the plan"))
        self.assertEqual(status["8"], ("pytorch", "8.weight: float32[10, 32], region 0's 0.weight: float32[32, 32]"))
        self.assertEqual((status["0"][0], status["6"][0]), ("kernel", "kernel"))

    def test_a_region_fed_by_random_draws_runs_as_a_kernel(self):
        torch.manual_seed(0)
        model, x = RandomState().eval(), torch.rand(4, 10, 8)
        out = self.export(model, "rs", x=x, model_name="rs")
        calls = {}
        model_load.load_op = usable(calls=calls)
        loaded, warned = self.load(out, model)
        self.assertEqual(warned, [])
        status = {n: s for n, s, _ in loaded.regions}
        self.assertEqual((status["lstm"], status["randn"]), ("kernel", "pytorch"))
        self.assertIn("passed on fresh random inputs", loaded.check)  # the draws seeded alike in both
        with torch.enable_grad():
            torch.manual_seed(3)
            got = loaded(x)
            torch.manual_seed(3)
            self.assertTrue(torch.allclose(got, model(x), atol=1e-5, rtol=1e-5))
        self.assertGreaterEqual(calls.get("rs_lstm", 0), 1)

    def test_calls_the_graph_was_not_traced_for_run_the_model(self):
        model = tiny()
        out = self.export(model)
        calls = {}
        model_load.load_op = usable(calls=calls)
        loaded, _ = self.load(out, model)
        calls.clear()
        with torch.enable_grad():  # autograd: the interpreter (the traced graph has no backward)
            self.assertTrue(torch.allclose(loaded(self.x), model(self.x), atol=1e-6, rtol=1e-6))
        self.assertEqual(sorted(calls), ["tiny_fc1", "tiny_fc2", "tiny_softmax"])
        calls.clear()
        x7 = torch.randn(7, 16)
        with torch.enable_grad():  # (without autograd the traced graph would not call the double's Python)
            loaded.train()  # another mode than the plan's trace: the model itself
            self.assertTrue(torch.equal(loaded(self.x), model(self.x)))
            loaded.eval()
            self.assertTrue(torch.equal(loaded(x7), model(x7)))  # another shape
        self.assertEqual(calls, {})

    def test_a_model_that_cannot_run_the_plans_inputs_runs_unchanged(self):
        out = self.export(tiny())
        other = tiny()
        other.fc1 = nn.Linear(20, 32)
        loaded, warned = self.load(out, other)
        self.assertEqual(len(warned), 1)
        self.assertIn("it cannot be traced on random inputs of the plan's shapes [[4, 16]] (", warned[0])
        self.assertIn("mat1 and mat2 shapes cannot be multiplied", warned[0])
        x = torch.randn(4, 20)
        self.assertTrue(self.same(loaded, other, x))

    def test_a_wrong_region_is_disabled_by_the_check_and_named(self):
        model = tiny()
        out = self.export(model)
        model_load.load_op = usable(wrong=("fc2",))
        loaded, warned = self.load(out, model)
        status = {n: (s, why) for n, s, why in loaded.regions}
        self.assertEqual(status["fc2"][0], "pytorch")
        self.assertIn("the check on fresh inputs: its output differs from the original's beyond its task's tolerance",
                      status["fc2"][1])
        self.assertEqual((status["fc1"][0], status["softmax"][0]), ("kernel", "kernel"))
        self.assertEqual(len(warned), 1)
        self.assertIn("the check disabled region(s) fc2 (", warned[0])
        with torch.no_grad():
            self.assertTrue(torch.allclose(loaded(self.x), model(self.x), atol=1e-6, rtol=1e-6))
        self.assertIn("fc2", loaded.report())

    def test_an_error_that_compounds_is_caught_end_to_end(self):
        model = tiny()
        with torch.no_grad():
            model.fc2.weight.mul_(300)  # large logits: the softmax amplifies a small error before it
        out = self.export(model)
        model_load.load_op = usable(noise=("fc1",))
        loaded, warned = self.load(out, model)
        status = {n: (s, why) for n, s, why in loaded.regions}
        self.assertEqual(status["fc1"][0], "pytorch", status["fc1"])
        self.assertIn("the end-to-end check on fresh inputs failed with it in", status["fc1"][1])
        self.assertEqual((status["fc2"][0], status["softmax"][0]), ("kernel", "kernel"))
        self.assertEqual(len(warned), 1)
        with torch.no_grad():
            self.assertTrue(torch.allclose(loaded(self.x), model(self.x), atol=1e-6, rtol=1e-6))

    def test_a_cached_kernel_left_unused_is_a_warning_that_says_why(self):
        # Seen on the H200: the search cached a kernel, load_model could not check it (no kernelevo
        # program) and the model ran in PyTorch, said only in report(). Now a warning names it.
        model = tiny()
        out = self.export(model)
        plan = _load_json(os.path.join(out, "plan.json"))
        fc1 = next(r for r in plan["regions"] if r["name"] == "fc1")
        entry = os.path.join(out, "cache", os.path.basename(fc1["task"]))
        os.makedirs(entry)
        with open(os.path.join(entry, "sm_90.cu"), "w") as f:
            f.write("// a kernel\n")
        loaded, warned = self.load(out, model)
        status = {n: (s, why) for n, s, why in loaded.regions}
        self.assertEqual(status["fc1"][0], "pytorch")
        self.assertEqual(len(warned), 1, warned)
        self.assertIn("1 region(s) have a cached kernel but run in PyTorch: fc1 (%s)" % status["fc1"][1], warned[0])
        self.assertNotIn("fc2", warned[0])  # no entry: nothing to warn about
        shutil.rmtree(entry)
        self.assertEqual(self.load(out, model)[1], [])

    def test_regions_the_plan_leaves_in_pytorch_stay_there(self):
        model = tiny(WithConstant)
        out = self.export(model)
        path = os.path.join(out, "plan.json")
        plan = _load_json(path)
        refused = [r for r in plan["regions"] if r["status"] == "refused"]
        self.assertEqual(len(refused), 1, plan["regions"])
        self.assertIn("neither a parameter nor a buffer", refused[0]["reason"])
        # A region below the threshold (its status as export_model writes it for a small share).
        low = next(r for r in plan["regions"] if r["name"] == "fc2")
        low.update(status="below_threshold", share=0.004, task=None)
        with open(path, "w") as f:
            json.dump(plan, f)
        model_load.load_op = usable()
        loaded, warned = self.load(out, model)
        status = {n: (s, why) for n, s, why in loaded.regions}
        self.assertEqual(status[refused[0]["name"]], ("pytorch", "refused at export: " + refused[0]["reason"]))
        self.assertEqual(status["fc2"], ("pytorch", "below the plan's threshold (share 0.4%): stays in PyTorch"))
        self.assertEqual((status["fc1"][0], status["softmax"][0]), ("kernel", "kernel"))
        with torch.no_grad():
            self.assertTrue(torch.allclose(loaded(self.x), model(self.x), atol=1e-6, rtol=1e-6))

    def test_a_model_with_a_random_region_loads_the_others(self):
        model = tiny(WithDropout).train()  # the Dropout draws: its region is refused, the rest is not
        out = self.export(model)
        model_load.load_op = usable()
        loaded, warned = self.load(out, model)
        self.assertEqual(warned, [])
        status = {n: (s, why) for n, s, why in loaded.regions}
        refused = [n for n, (s, why) in status.items() if why.startswith("refused at export: Dropout in training mode")]
        self.assertEqual(len(refused), 1, status)
        self.assertEqual(sorted(n for n, (s, _) in status.items() if s == "kernel"), ["fc1", "fc2", "softmax"])
        self.assertIn("passed on fresh random inputs", loaded.check)
        self.assertNotIn("gave other outputs", loaded.runner)  # the trace is compared with the same draws
        with torch.no_grad():
            y = loaded(self.x)
        self.assertEqual(y.shape, (4, 8))
        self.assertTrue(torch.allclose(y.sum(-1), torch.ones(4)))  # still a softmax, of randomly dropped values

    def test_a_folder_of_another_format_is_refused(self):
        out = self.export(tiny())
        path = os.path.join(out, "plan.json")
        plan = _load_json(path)
        plan["format"] = "kernelevo-model-plan/2"
        with open(path, "w") as f:
            json.dump(plan, f)
        with self.assertRaisesRegex(ValueError, "format 'kernelevo-model-plan/2', expected 'kernelevo-model-plan/1'"):
            kernelevo.load_model(out, tiny())
        with self.assertRaisesRegex(FileNotFoundError, "plan.json: no such file"):
            kernelevo.load_model(os.path.join(self.dir, "nothing"), tiny())

    def test_compare_model_labels_every_time(self):
        model = tiny()
        out = self.export(model)
        model_load.load_op = usable()
        loaded, _ = self.load(out, model)
        res = kernelevo.compare_model(model, loaded, reps=3, verbose=False)
        e = res["end_to_end"]
        for k in ("pytorch_eager_ms", "kernelevo_ms", "speedup_vs_pytorch_eager"):
            self.assertGreater(e[k], 0, k)
        if not (hasattr(torch, "compile") and torch.cuda.is_available()):
            self.assertIsNone(e["torch_compile_ms"])
            self.assertTrue(e["torch_compile"].startswith("not measured: "), e["torch_compile"])
        self.assertIn("matmul TF32", res["precision"])
        self.assertEqual([r["name"] for r in res["regions"]], [n for n, _, _ in loaded.regions])
        for r in res["regions"]:
            self.assertGreater(r["speedup_vs_pytorch_eager"], 0)
        text = kernelevo.model_compare.format_comparison(res)
        self.assertIn("vs PyTorch eager", text)
        self.assertIn("vs torch.compile", text)
        # Issue 51 item 4e: nothing replaced (no kernels): the times, no speedup, and why.
        model_load.load_op = REAL_LOAD_OP
        res = kernelevo.compare_model(model, self.load(out, model)[0], reps=3, verbose=False)
        e, text = res["end_to_end"], kernelevo.model_compare.format_comparison(res)
        self.assertEqual((e["kernel_regions"], e["speedup_vs_pytorch_eager"]), (0, None))
        self.assertIsNone(e["speedup_vs_torch_compile"])
        self.assertGreater(e["kernelevo_ms"], 0)
        self.assertIn("no region runs a kernel", text)
        self.assertNotIn("speedup of the loaded model", text)


class Attention(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.qkv, self.proj, self.heads = nn.Linear(c, 3 * c), nn.Linear(c, c), heads

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = [z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v)]
        att = torch.softmax((q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1))), dim=-1)
        return self.proj((att @ v).transpose(1, 2).contiguous().view(b, t, c))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.fc, self.act, self.proj = nn.Linear(c, 4 * c), nn.GELU(), nn.Linear(4 * c, c)

    def forward(self, x):
        return self.proj(self.act(self.fc(x)))


class TransformerBlock(nn.Module):
    """A small pre-norm GPT block; its region mlp.fc is Linear + GELU (tests/python/mlp_gelu.cu)."""

    def __init__(self, c=256, heads=4):
        super().__init__()
        self.ln1, self.attn, self.ln2, self.mlp = nn.LayerNorm(c), Attention(c, heads), nn.LayerNorm(c), MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


@unittest.skipUnless(torch.cuda.is_available(), "no CUDA device")
class Gpu(unittest.TestCase):
    """A transformer block exported on the GPU; tests/python/mlp_gelu.cu validated into DIR/cache by
    `kernelevo cache add` for its mlp.fc region; load_model runs it as torch.ops.kernelevo.NAME, the check
    passes, and compare_model times the block against eager and torch.compile."""

    def test_a_cached_kernel_runs_in_the_loaded_model(self):
        d = tempfile.mkdtemp(prefix="kevo-model-gpu-")
        torch.manual_seed(5)
        model = TransformerBlock().cuda().eval()
        x = torch.randn(8, 128, 256, device="cuda")
        kernelevo.export_model(model, (x,), d, quiet=True)
        plan = _load_json(os.path.join(d, "plan.json"))
        print(open(os.path.join(d, "plan.md")).read())
        fc = next(r for r in plan["regions"] if r["name"] == "mlp.fc")
        self.assertEqual((fc["kind"], fc["ops"], fc["status"]), ("gemm", ["aten::linear", "aten::gelu"], "task"))
        major, minor = torch.cuda.get_device_capability()
        p = subprocess.run([KERNELEVO, "cache", "add", "--task", os.path.join(d, fc["task"], "task.json"), "--kernel",
                            os.path.join(HERE, "mlp_gelu.cu"), "--arch", "sm_%d%d" % (major, minor), "--cache-dir",
                            os.path.join(d, "cache"), "-q"], capture_output=True, text=True)
        print("cache add rc=%d: %s %s" % (p.returncode, p.stdout.strip()[-400:], p.stderr.strip()[-400:]))
        self.assertEqual(p.returncode, 0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loaded = kernelevo.load_model(d, model, kernelevo=KERNELEVO, min_speedup=0)  # mlp_gelu.cu: not a fast GEMM
        print(loaded.report())
        self.assertEqual([str(w.message) for w in caught if "load_model" in str(w.message)], [])
        status = {n: s for n, s, _ in loaded.regions}
        self.assertEqual(status.pop("mlp.fc"), "kernel")
        self.assertTrue(all(s == "pytorch" for s in status.values()), status)
        self.assertTrue(loaded.check.startswith("passed on fresh random inputs"), loaded.check)
        op = loaded._kernels()[0].op
        before = op.kernel_calls
        with torch.no_grad():
            y, ref = loaded(x), model(x)
        self.assertEqual(op.kernel_calls, before + 1)  # the evolved kernel ran inside the loaded model
        t = kernelevo.model_load.needed_tolerance(y, ref)
        print("INFO kernel in the loaded model: %s; loaded vs model: tolerance needed %.3g (allowed %.3g)" % (
            op.kernel, t, loaded._kernels()[0].tolerance))
        self.assertLessEqual(t, loaded._kernels()[0].tolerance)
        res = kernelevo.compare_model(model, loaded, (x,), reps=50)
        e = res["end_to_end"]
        print("INFO e2e %s: eager %.4f ms, torch.compile %s, loaded %.4f ms (%s)" % (
            res["precision"], e["pytorch_eager_ms"], "%.4f ms" % e["torch_compile_ms"] if e["torch_compile_ms"]
            else e["torch_compile"], e["kernelevo_ms"], res["runner"]))
        self.assertGreater(e["kernelevo_ms"], 0)
        shutil.rmtree(d, ignore_errors=True)


class Lines(unittest.TextTestResult):
    """One line per test on stdout: PASS/FAIL/SKIP Class.test (what a GPU host's log shows)."""

    def _line(self, word, test, extra=""):
        print("%s %s.%s%s" % (word, type(test).__name__, test._testMethodName, extra), flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._line("PASS", test)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._line("FAIL", test)

    def addError(self, test, err):
        super().addError(test, err)
        self._line("FAIL", test, " (error)")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._line("SKIP", test, " (%s)" % reason)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: model_load_test.py KERNELEVO [unittest args]")
    KERNELEVO = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2, testRunner=unittest.TextTestRunner(resultclass=Lines, verbosity=2))
