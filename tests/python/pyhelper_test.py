"""The Python helper (python/kernelevo, issue 30 deliverable 2): export_task() on a user's module and
load_op() back, with the built kernelevo program. Usage: pyhelper_test.py KERNELEVO [unittest args].
Exits 77 (ctest: skipped) when this Python has no PyTorch. The GPU test runs only where CUDA is
present: it validates tests/python/linear_gelu.cu with `kernelevo cache add` and loads it as an op
(this test runs it on the GPU host)."""
import hashlib
import json
import os
import re
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
from kernelevo import op as kop  # noqa: E402
from kernelevo.torch_task import _load_json, _read_bytes, _read_text  # noqa: E402

KERNELEVO = None


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 32)
        self.act = nn.GELU()

    def forward(self, x):
        return self.act(self.fc(x))


def trained_block():
    """Weights that are not PyTorch's default initialisation (a few SGD steps)."""
    torch.manual_seed(7)
    m = Block()
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    for _ in range(3):
        loss = (m(torch.randn(16, 64)) - 1).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return m


def read_bin(path, dtype, shape):
    return torch.frombuffer(bytearray(_read_bytes(path)), dtype=dtype).reshape(shape)


class Export(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kevo-pyhelper-")
        self.model = trained_block()
        self.before = {k: v.clone() for k, v in self.model.state_dict().items()}
        torch.manual_seed(1)
        self.x = torch.randn(8, 64) * 3 + 2  # not standard: the task's randn takes mean/std from it
        self.task_json = kernelevo.export_task(self.model, (self.x,), self.dir, name="block", device="cpu", quiet=True)
        self.task_dir = os.path.dirname(self.task_json)

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_task_json_names_inputs_weights_and_outputs(self):
        self.assertEqual(self.task_json, os.path.join(self.dir, "block", "task.json"))
        task = _load_json(self.task_json)
        self.assertEqual(task["name"], "block")
        self.assertEqual([i["name"] for i in task["inputs"]], ["x", "fc_weight", "fc_bias"])
        # Dimensions are literal sizes or named ones (newer PyTorch lets the importer name them;
        # then the first shape set gives their sizes).
        sizes = lambda shape: [d if isinstance(d, int) else task["shapes"][0][d] for d in shape]
        self.assertEqual(sizes(task["inputs"][0]["shape"]), [8, 64])
        init = task["inputs"][0]["init"]
        self.assertEqual(init["kind"], "randn")
        self.assertAlmostEqual(init["mean"], float(self.x.mean()), delta=0.01)
        self.assertAlmostEqual(init["std"], float(self.x.std()), delta=0.02)
        for w in task["inputs"][1:]:
            # nn.Parameters: the judge varies their values after each set's first trial.
            self.assertEqual(w["init"], {"kind": "file", "path": w["name"] + ".bin", "parameter": True})
        self.assertEqual([(o["name"], o["dtype"], sizes(o["shape"])) for o in task["outputs"]], [("out", "float32", [8, 32])])
        self.assertEqual(task["reference"]["arg"], "model.pt")
        self.assertTrue(os.path.isfile(os.path.join(self.task_dir, task["reference"]["source"])))
        for f in ("model.pt", "graph.py", "problem.py", "pytorch.json"):
            self.assertTrue(os.path.isfile(os.path.join(self.task_dir, f)), f)
        self.assertIn("class Block", _read_text(os.path.join(self.task_dir, "problem.py")))
        side = _load_json(os.path.join(self.task_dir, "pytorch.json"))
        self.assertEqual((side["inputs"], side["weights"]), (["x"], ["fc_weight", "fc_bias"]))

    def test_weight_files_are_the_modules_own_and_the_module_is_untouched(self):
        self.assertTrue(torch.equal(read_bin(os.path.join(self.task_dir, "fc_weight.bin"), torch.float32, [32, 64]),
                                    self.model.fc.weight.detach()))
        self.assertTrue(torch.equal(read_bin(os.path.join(self.task_dir, "fc_bias.bin"), torch.float32, [32]),
                                    self.model.fc.bias.detach()))
        torch.manual_seed(7)
        self.assertFalse(torch.equal(Block().fc.weight, self.model.fc.weight))  # trained, not the default init
        for k, v in self.model.state_dict().items():
            self.assertTrue(torch.equal(v, self.before[k]), k)
        self.assertTrue(self.model.training)

    def test_kernelevo_loads_the_task(self):
        p = subprocess.run([KERNELEVO, "cache", "hash", "--task", self.task_json, "--json"], capture_output=True,
                           text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["function"], "block")

    def test_load_op_without_a_cache_is_the_reference(self):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            op = kernelevo.load_op(self.task_dir, kernelevo=KERNELEVO)
        self.assertIsNone(op.kernel)
        self.assertTrue(any("running the reference" in str(w.message) for w in caught))
        x = torch.randn(8, 64)
        with torch.no_grad():
            self.assertTrue(torch.allclose(op(x), self.model(x), atol=1e-6, rtol=1e-6))
        # The reference is differentiable (training code keeps working).
        xg = x.clone().requires_grad_()
        op(xg).sum().backward()
        xe = x.clone().requires_grad_()
        self.model(xe).sum().backward()
        self.assertTrue(torch.allclose(xg.grad, xe.grad, atol=1e-5))

    def test_a_cache_entry_is_used_only_when_validated_unedited_and_for_this_task(self):
        cache = os.path.join(self.dir, "kernels")
        os.makedirs(os.path.join(cache, "block"))
        cu = os.path.join(cache, "block", "sm_90.cu")
        shutil.copyfile(os.path.join(HERE, "linear_gelu.cu"), cu)
        hashes = json.loads(subprocess.run([KERNELEVO, "cache", "hash", "--task", self.task_json, "--json"],
                                           capture_output=True, text=True, check=True).stdout)
        meta = {"function": "block", "arch": "sm_90", "task_hash": hashes["task_hash"],
                "reference_hash": hashes["reference_hash"], "validated": True,
                "source_hash": hashlib.sha256(_read_bytes(cu)).hexdigest()}

        def entry(**change):
            with open(cu[:-3] + ".json", "w") as f:
                json.dump(dict(meta, **change), f)
            return kop._usable_entry(self.task_json, "block", cache, "sm_90", KERNELEVO)[:2]  # (kernel, why)
        self.assertEqual(entry(), (cu, None))
        self.assertIn("unvalidated", entry(validated=False)[1])
        self.assertIn("edited", entry(source_hash="0" * 64)[1])
        self.assertIn("stale", entry(task_hash="0" * 64)[1])
        self.assertIn("stale", entry(reference_hash="0" * 64)[1])
        self.assertIn("no kernel cached for sm_80", kop._usable_entry(self.task_json, "block", cache, "sm_80",
                                                                      KERNELEVO)[1])

    def test_examples_mode_stores_the_examples(self):
        out = kernelevo.export_task(self.model, self.x, self.dir, name="block_ex", inputs="examples", device="cpu",
                                    quiet=True)
        task = _load_json(out)
        self.assertEqual(task["inputs"][0]["init"], {"kind": "file", "path": "x.bin"})
        self.assertTrue(torch.equal(read_bin(os.path.join(self.dir, "block_ex", "x.bin"), torch.float32, [8, 64]),
                                    self.x))


class Functions(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kevo-pyhelper-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_a_function_with_integer_and_unit_inputs(self):
        def scaled_gather(x, idx, scale):
            return x[idx] * scale
        x = torch.rand(10, 4)
        idx = torch.tensor([0, 3, 9, 2], dtype=torch.int64)
        out = kernelevo.export_task(scaled_gather, (x, idx, 2.5), self.dir, device="cpu", quiet=True)
        task = _load_json(out)
        self.assertEqual(task["name"], "scaled_gather")
        self.assertEqual([i["name"] for i in task["inputs"]], ["x", "idx"])  # the function's parameters
        self.assertEqual(task["inputs"][0]["init"], {"kind": "rand", "low": 0, "high": 1})
        self.assertEqual(task["inputs"][1]["init"], {"kind": "randint", "low": 0, "high": 10})
        self.assertEqual(len(task["inputs"]), 2)  # the float is a constant of the trace
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            op = kernelevo.load_op(os.path.dirname(out))
        self.assertTrue(torch.equal(op(x, idx, 2.5), scaled_gather(x, idx, 2.5)))
        with self.assertRaisesRegex(ValueError, "exported as the constant 2.5"):
            op(x, idx, 3.0)  # the trace holds 2.5: another value is refused, not computed wrongly
        with self.assertRaises(TypeError):
            op(x, idx)

    def test_data_dependent_control_flow_in_the_users_code_is_refused(self):
        class Branchy(nn.Module):
            def forward(self, x):
                return x * 2 if x.sum() > 0 else x - 1
        with self.assertRaisesRegex(kernelevo.ExportError, "data-dependent control flow"):
            kernelevo.export_task(Branchy(), torch.randn(4, 4), self.dir, device="cpu", quiet=True)

    def test_two_outputs_come_back_as_a_tuple(self):
        def split(x):
            return x.relu(), x.sum(dim=1)
        out = kernelevo.export_task(split, torch.randn(5, 3), self.dir, device="cpu", quiet=True)
        self.assertEqual([o["name"] for o in _load_json(out)["outputs"]], ["out0", "out1"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            op = kernelevo.load_op(out)
        x = torch.randn(5, 3)
        a, b = op(x)
        self.assertTrue(torch.equal(a, x.relu()) and torch.allclose(b, x.sum(dim=1)))

    def test_training_mode_dropout_is_refused_with_the_reason(self):
        m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
        with self.assertRaisesRegex(kernelevo.ExportError, "Dropout"):
            kernelevo.export_task(m, torch.randn(2, 4), self.dir, name="drop", device="cpu", quiet=True)
        out = kernelevo.export_task(m.eval(), torch.randn(2, 4), self.dir, name="drop", device="cpu", quiet=True)
        self.assertTrue(os.path.isfile(out))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "drop.tmp")))


@unittest.skipUnless(torch.cuda.is_available(), "no CUDA device")
class Gpu(unittest.TestCase):
    """Export on the GPU, validate a hand-written kernel into a cache, load it as torch.ops.kernelevo.block."""

    def test_cached_kernel_runs_as_an_op(self):
        d = tempfile.mkdtemp(prefix="kevo-pyhelper-gpu-")
        model = trained_block().eval().cuda()
        x = torch.randn(8, 64, device="cuda")
        task_json = kernelevo.export_task(model, (x,), d, name="block", quiet=True)
        major, minor = torch.cuda.get_device_capability()
        arch = "sm_%d%d" % (major, minor)
        p = subprocess.run([KERNELEVO, "cache", "add", "--task", task_json, "--kernel", os.path.join(HERE, "linear_gelu.cu"),
                            "--arch", arch, "--cache-dir", os.path.join(d, "kernels"), "-q"], capture_output=True, text=True)
        print("cache add rc=%d: %s %s" % (p.returncode, p.stdout.strip()[-400:], p.stderr.strip()[-400:]))
        self.assertEqual(p.returncode, 0)
        op = kernelevo.load_op(os.path.dirname(task_json), kernelevo=KERNELEVO, verbose=False)
        self.assertIsNotNone(op.kernel, op.reason)
        print("INFO kernel loaded: %s" % op.kernel)
        weights = op._weights_on(x.device)
        with torch.no_grad():
            y = op(x)
            ref = model(x)
            direct = torch.ops.kernelevo.block(x, *weights)  # the typed schema: one tensor per input
            kernel_out = [torch.empty(8, 32, device="cuda")]
            op._op([x] + weights, kernel_out)  # the compiled kernel itself
        diff = (y - ref).abs().max().item()
        print("op vs module: max |diff| %.3g" % diff)
        print("INFO operator %s (%s)" % (torch.ops.kernelevo.block.default._schema, op.operator))
        self.assertEqual(str(torch.ops.kernelevo.block.default._schema),
                         "kernelevo::block(Tensor x, Tensor fc_weight, Tensor fc_bias) -> Tensor")
        self.assertTrue(torch.equal(y, direct) and torch.equal(y, kernel_out[0]))  # the op ran the kernel
        self.assertEqual(op.kernel_calls, 2)
        self.assertTrue(torch.allclose(y, ref, atol=1e-4, rtol=1e-4))
        # Calls the kernel was not validated for take the reference: another shape, the CPU.
        x2 = torch.randn(3, 64, device="cuda")
        self.assertTrue(torch.allclose(op(x2), model(x2), atol=1e-5))
        self.assertTrue(torch.allclose(op(x.cpu()), model.cpu()(x.cpu()), atol=1e-5))
        model.cuda()
        self.assertEqual(op.kernel_calls, 2)
        # Autograd: the forward is the kernel's where the operator has a backward (custom_op: the
        # reference's vector-Jacobian product), else the reference's; the gradient is the module's.
        xg = x.clone().requires_grad_()
        op(xg).sum().backward()
        xe = x.clone().requires_grad_()
        model(xe).sum().backward()
        self.assertTrue(torch.allclose(xg.grad, xe.grad, atol=1e-4, rtol=1e-4))
        if op.operator == "torch.library.custom_op" and hasattr(torch, "compile"):
            self._compiled(op, model, x, weights)
        shutil.rmtree(d, ignore_errors=True)

    def _compiled(self, op, model, x, weights):
        """torch.compile(fullgraph=True) traces the operator through its fake kernel (one graph, no
        break) and runs the kernel at run time."""
        torch._dynamo.reset()
        before = op.kernel_calls
        f = torch.compile(lambda t: torch.ops.kernelevo.block(t, *weights) * 2, fullgraph=True)
        m = torch.compile(op, fullgraph=True)
        with torch.no_grad():
            y, z = f(x), m(x)
        self.assertEqual(op.kernel_calls, before + 2)
        self.assertTrue(torch.allclose(y, model(x) * 2, atol=2e-4, rtol=1e-4))
        self.assertTrue(torch.allclose(z, model(x), atol=1e-4, rtol=1e-4))
        print("INFO torch.compile(fullgraph=True): the kernel ran (%d calls)" % (op.kernel_calls - before))


class Precision(unittest.TestCase):
    """export_task's precision policy (task.json "precision", issue 35): read from this process's TF32
    flags unless given, the default left out, names from tool/task/precision.h, and the tolerance
    widened to admit the policy's own error on the problem (measured: bf16 on the CPU)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kevo-pyhelper-")
        self.saved = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
        self.model = nn.Sequential(nn.Linear(64, 48), nn.GELU()).eval()
        self.x = torch.randn(16, 64)

    def tearDown(self):
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = self.saved
        shutil.rmtree(self.dir, ignore_errors=True)

    def export(self, name, **kw):
        path = kernelevo.export_task(self.model, (self.x,), self.dir, name=name, device="cpu", quiet=True, **kw)
        return _load_json(path)

    def test_pytorchs_defaults_are_the_default_policy_left_out(self):
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = True, False
        self.assertNotIn("precision", self.export("plain"))
        # The flags are the user's again afterwards (the import itself runs strict fp32).
        self.assertEqual((torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32), (True, False))

    def test_the_live_flags_are_read(self):
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = False, True
        task = self.export("live")
        self.assertEqual(task["precision"], {"policy": "pytorch", "cudnn_tf32": False, "matmul_tf32": True})
        self.assertEqual((torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32), (False, True))
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = True, False
        if hasattr(torch, "set_float32_matmul_precision"):
            before = torch.get_float32_matmul_precision()
            try:
                torch.set_float32_matmul_precision("high")
                self.assertEqual(self.export("high")["precision"], {"policy": "pytorch", "cudnn_tf32": True, "matmul_tf32": True})
            finally:
                torch.set_float32_matmul_precision(before)

    def test_a_given_policy_wins_and_an_unknown_one_lists_the_names(self):
        torch.backends.cuda.matmul.allow_tf32 = True
        self.assertEqual(self.export("strict", precision="strict")["precision"], "strict")
        with self.assertRaisesRegex(ValueError, "unknown precision policy 'fp16' \\(expected one of: pytorch, strict, tf32, bf16\\)"):
            self.export("bad", precision="fp16")
        with self.assertRaisesRegex(ValueError, "only the pytorch policy records"):
            self.export("bad", precision={"policy": "strict", "matmul_tf32": True})

    def test_bf16_widens_the_tolerance_to_its_own_measured_error(self):
        strict = self.export("strict_t", precision="strict")["tolerance"]
        bf16 = self.export("bf16_t", precision="bf16")
        self.assertEqual(bf16["precision"], "bf16")
        self.assertGreater(bf16["tolerance"]["atol"], strict["atol"])
        self.assertLess(bf16["tolerance"]["atol"], 0.5)
        self.assertIn("for precision bf16: 3x its own error against strict fp32", bf16["tolerance"]["policy"])


GELU_BIAS = {"name": "gelu_bias", "inputs": [{"name": "x", "dtype": "float32", "shape": ["M", "N"]},
                                            {"name": "bias", "dtype": "float32", "shape": ["N"]}],
             "outputs": [{"name": "y", "dtype": "float32", "shape": ["M", "N"]},
                         {"name": "s", "dtype": "float32", "shape": ["M", 1]},
                         {"name": "k", "dtype": "float32", "shape": ["K"]}],
             "shapes": [{"M": 64, "N": 32, "K": 5}, {"M": 33, "N": 1001, "K": 7}]}


class Operator(unittest.TestCase):
    """torch.ops.kernelevo.NAME (issue 40): a typed schema from task.json, defined on any PyTorch with
    torch.library (here maybe a CPU-only one), running the reference where no kernel is loaded, a fake
    (meta) kernel of the outputs' shapes, and a backward where the PyTorch has custom_op."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kevo-pyhelper-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def load(self, path):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return kernelevo.load_op(path, kernelevo=KERNELEVO)

    def meta(self, *tensors):
        """The operator on meta tensors (its fake kernel); PyTorch < 2.4 has no autograd kernel for
        meta tensors, so outside autograd there."""
        args = [t.to("meta") for t in tensors]
        with torch.inference_mode():
            return torch.ops.kernelevo.__getattr__(self.name)(*args)

    def test_typed_schema_reference_on_cpu_and_fake(self):
        model = trained_block().eval()
        self.name = "typed_block"
        out = kernelevo.export_task(model, torch.randn(8, 64), self.dir, name=self.name, device="cpu", quiet=True)
        op = self.load(os.path.dirname(out))
        print("INFO operator %s through %s" % (op.schema, op.operator))
        self.assertIn(op.operator, ("torch.library.custom_op", "torch.library.Library"))
        self.assertEqual(str(torch.ops.kernelevo.typed_block.default._schema),
                         "kernelevo::typed_block(Tensor x, Tensor fc_weight, Tensor fc_bias) -> Tensor")
        x = torch.randn(8, 64)
        w, b = op._weights_on("cpu")
        with torch.no_grad():
            self.assertTrue(torch.allclose(torch.ops.kernelevo.typed_block(x, w, b), model(x), atol=1e-6))
        self.assertEqual(op.kernel_calls, 0)
        y = self.meta(x, w, b)
        self.assertEqual((y.device.type, list(y.shape), y.dtype), ("meta", [8, 32], torch.float32))
        # Another batch size: derivable where the importer named the batch dimension (newer PyTorch),
        # refused with the reason where task.json has literal sizes.
        task = _load_json(out)
        if isinstance(task["inputs"][0]["shape"][0], str) and task["inputs"][0]["shape"][0] == task["outputs"][0]["shape"][0]:
            self.assertEqual(list(self.meta(torch.randn(3, 64), w, b).shape), [3, 32])
        else:
            with self.assertRaisesRegex(RuntimeError, "not derivable from task.json"):
                self.meta(torch.randn(3, 64), w, b)

    def test_two_outputs_are_a_tuple_in_the_schema(self):
        self.name = "split2"
        out = kernelevo.export_task(lambda x: (x.relu(), x.sum(dim=1)), torch.randn(5, 3), self.dir, name="split2",
                                    device="cpu", quiet=True)
        self.load(out)
        self.assertEqual(str(torch.ops.kernelevo.split2.default._schema),
                         "kernelevo::split2(Tensor x) -> (Tensor, Tensor)")
        a, b = self.meta(torch.randn(5, 3))
        self.assertEqual((list(a.shape), list(b.shape)), ([5, 3], [5]))

    def test_the_gradient_is_the_references(self):
        model = trained_block().eval()
        out = kernelevo.export_task(model, torch.randn(8, 64), self.dir, name="grad_block", device="cpu", quiet=True)
        op = self.load(out)
        xg, xe = torch.randn(8, 64).requires_grad_(), None
        xe = xg.detach().clone().requires_grad_()
        op(xg).pow(2).sum().backward()
        model(xe).pow(2).sum().backward()
        self.assertTrue(torch.allclose(xg.grad, xe.grad, atol=1e-5))

    def test_a_name_taken_by_another_schema_is_refused(self):
        kernelevo.export_task(lambda x: x * 2, torch.randn(4), self.dir, name="clash", device="cpu", quiet=True)
        self.load(os.path.join(self.dir, "clash"))
        other = os.path.join(self.dir, "other")
        kernelevo.export_task(lambda x, y: x + y, (torch.randn(4), torch.randn(4)), other, name="clash", device="cpu",
                              quiet=True)
        with self.assertRaisesRegex(RuntimeError, "already defined in this process as clash\\(Tensor x\\)"):
            self.load(os.path.join(other, "clash"))

    def test_output_shapes_follow_task_json(self):
        from kernelevo.library import output_shapes
        self.assertEqual(output_shapes(GELU_BIAS, [[33, 1001], [1001]]), (1, [[33, 1001], [33, 1], [7]]))
        # Not a shape set: named dimensions the inputs bind give the outputs' sizes ...
        self.assertEqual(output_shapes(GELU_BIAS, [[10, 32], [32]])[0], None)
        self.assertEqual(output_shapes(GELU_BIAS, [[10, 32], [32]])[1], None)  # K is no input's dimension
        no_k = dict(GELU_BIAS, outputs=GELU_BIAS["outputs"][:2])
        self.assertEqual(output_shapes(no_k, [[10, 32], [32]]), (None, [[10, 32], [10, 1]]))
        # ... unless they contradict each other or the ranks differ.
        self.assertEqual(output_shapes(no_k, [[10, 32], [31]]), (None, None))
        self.assertEqual(output_shapes(no_k, [[10, 32, 1], [32]]), (None, None))


class ExportRefusals(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kevo-pyhelper-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_an_existing_task_is_not_overwritten_unless_asked(self):
        m = nn.Linear(4, 3).eval()
        out = kernelevo.export_task(m, torch.randn(2, 4), self.dir, name="lin", device="cpu", quiet=True)
        before = _read_bytes(os.path.join(self.dir, "lin", "weight.bin"))
        with torch.no_grad():
            m.weight.add_(1)
        with self.assertRaisesRegex(FileExistsError, "lin exists already .*pass overwrite=True"):
            kernelevo.export_task(m, torch.randn(2, 4), self.dir, name="lin", device="cpu", quiet=True)
        self.assertEqual(_read_bytes(os.path.join(self.dir, "lin", "weight.bin")), before)
        self.assertEqual(kernelevo.export_task(m, torch.randn(2, 4), self.dir, name="lin", device="cpu", quiet=True,
                                               overwrite=True), out)
        self.assertNotEqual(_read_bytes(os.path.join(self.dir, "lin", "weight.bin")), before)

    def test_batchnorm_in_training_mode_says_call_eval(self):
        m = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
        with self.assertRaisesRegex(kernelevo.ExportError, "layer '1': BatchNorm1d is in training mode.*call model.eval\\(\\)"):
            kernelevo.export_task(m, torch.randn(8, 4), self.dir, name="bn", device="cpu", quiet=True)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "bn")))
        self.assertTrue(os.path.isfile(kernelevo.export_task(m.eval(), torch.randn(8, 4), self.dir, name="bn",
                                                             device="cpu", quiet=True)))


class Install(unittest.TestCase):
    """`pip install ./python` (issue 40): a real pip installs the package into a fresh environment (a
    venv with the system's site-packages, where this Python is not itself a venv; else --target), and a
    Python started elsewhere, without the checkout on its path, exports a task and loads it as an
    operator: the importer, its precision table and abi.h come with the package."""

    @staticmethod
    def checkout_copy(d):
        """A copy of what the package's build reads (python/ and the source tree's files setup.py
        copies), so that concurrent test runs do not share python/build."""
        root, dest = os.path.join(HERE, "..", ".."), os.path.join(d, "src")
        skip = shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "_share")
        for folder in ("python", "tool/kernelbench", "tool/task", "runtime/include"):
            shutil.copytree(os.path.join(root, folder), os.path.join(dest, folder), ignore=skip)
        shutil.copyfile(os.path.join(root, "CMakeLists.txt"), os.path.join(dest, "CMakeLists.txt"))
        return os.path.join(dest, "python")

    def test_the_version_is_the_projects(self):
        """Issue 51 item 4g: kernelevo.__version__ is CMakeLists.txt's project version and kernelevo's."""
        with open(os.path.join(HERE, "..", "..", "CMakeLists.txt"), encoding="utf-8") as f:
            project = re.search(r"project\(KernelEvo\s+VERSION\s+([0-9.]+)", f.read()).group(1)
        tool = subprocess.run([KERNELEVO, "--version"], capture_output=True, text=True).stdout.split()[1]
        self.assertEqual((kernelevo.__version__, tool), (project, project))

    def test_pip_install_of_the_package_works(self):
        for mod in ("pip", "setuptools", "wheel"):
            if subprocess.run([sys.executable, "-c", "import " + mod], capture_output=True).returncode != 0:
                self.skipTest("this Python has no %s (pip install --no-build-isolation needs it)" % mod)
        d = tempfile.mkdtemp(prefix="kevo-pip-")
        self.addCleanup(shutil.rmtree, d, True)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KERNELEVO_KERNELBENCH_DIR",
                                                                 "KERNELEVO_INCLUDE_DIR")}
        env["PIP_NO_INPUT"] = "1"
        package = self.checkout_copy(d)
        if sys.prefix == sys.base_prefix:
            if subprocess.run([sys.executable, "-c", "import ensurepip, venv"], capture_output=True).returncode != 0:
                self.skipTest("this Python cannot make a venv (no ensurepip: Debian's python3-venv)")
            py = os.path.join(d, "venv", "bin", "python")
            p = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", os.path.join(d, "venv")],
                               capture_output=True, text=True, env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
            install = [py, "-m", "pip", "install", "--no-index", "--no-build-isolation", package]
        else:  # a venv's --system-site-packages would not see this venv's PyTorch
            py = sys.executable
            env["PYTHONPATH"] = os.path.join(d, "site")
            install = [py, "-m", "pip", "install", "--no-index", "--no-build-isolation", "--no-deps", "--target",
                       env["PYTHONPATH"], package]
        before = sorted(os.listdir(package))
        p = subprocess.run(install, capture_output=True, text=True, env=env)
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-2000:])
        # Issue 51 item 4h: the build writes nothing into the source tree (no build/, no egg-info).
        self.assertEqual(sorted(os.listdir(package)), before)
        script = """if True:
            import os, sys, warnings, torch, kernelevo
            from kernelevo import torch_task, op
            print("FILE", kernelevo.__file__)
            print("VERSION", kernelevo.__version__)
            print("SHARE", torch_task._kernelbench_dir(), op._include_dir())
            out = kernelevo.export_task(torch.nn.Linear(6, 2).eval(), torch.randn(3, 6), "tasks", name="pip_lin", device="cpu", quiet=True)
            warnings.simplefilter("ignore")
            m = kernelevo.load_op(os.path.dirname(out), kernelevo=sys.argv[1])
            x = torch.randn(3, 6)
            print("OP", m.schema, torch.ops.kernelevo.pip_lin(x, *m._weights_on("cpu")).shape)
        """
        p = subprocess.run([py, "-c", script, KERNELEVO], capture_output=True, text=True, env=env, cwd=d)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        lines = dict(l.split(" ", 1) for l in p.stdout.splitlines() if " " in l)
        installed = os.path.dirname(lines["FILE"])
        self.assertTrue(installed.startswith(os.path.realpath(d)) or installed.startswith(d), lines["FILE"])
        self.assertNotIn(os.path.join("src", "python"), installed)  # the installed package, not the sources
        self.assertEqual(lines["VERSION"], kernelevo.__version__)
        self.assertEqual(lines["SHARE"].split(), [os.path.join(installed, "_share", "kernelbench"),
                                                  os.path.join(installed, "_share", "include")])
        self.assertEqual(lines["OP"], "kernelevo::pip_lin(Tensor input, Tensor weight, Tensor bias) -> Tensor torch.Size([3, 2])")


class Doctor(unittest.TestCase):
    """`kernelevo doctor` names the Python, its PyTorch (version, CUDA or not), Triton and ncu (issue 40)."""

    def test_doctor_reports_python_pytorch_triton_and_ncu(self):
        p = subprocess.run([KERNELEVO, "doctor", "--json", "--python", sys.executable], capture_output=True, text=True)
        self.assertIn(p.returncode, (0, 1), p.stderr)
        j = json.loads(p.stdout)
        py = j["python"]
        self.assertEqual((py["python"], py["torch"], py["cuda_available"], py["torch_cuda"]),
                         (sys.version.split()[0], torch.__version__, torch.cuda.is_available(), torch.version.cuda))
        try:
            import triton
            self.assertEqual(py["triton"], triton.__version__)
        except ImportError:
            self.assertIn("triton_missing", py)
        self.assertTrue("path" in j["ncu"] or "missing" in j["ncu"], j["ncu"])
        text = subprocess.run([KERNELEVO, "doctor", "--python", sys.executable], capture_output=True, text=True).stdout
        cuda = "CUDA %s" % torch.version.cuda if torch.version.cuda else "CPU-only build"
        self.assertIn("\npytorch   %s, %s, GPU %s\n" % (torch.__version__, cuda, "visible" if torch.cuda.is_available()
                                                        else "not visible"), text)
        for word in ("python    %s (" % sys.version.split()[0], "\ntriton    ", "\nncu       "):
            self.assertIn(word, text)
        missing = subprocess.run([KERNELEVO, "doctor", "--json", "--python", "/nonexistent/python3"], capture_output=True,
                                 text=True)
        self.assertIn("cannot run /nonexistent/python3", json.loads(missing.stdout)["python"]["missing"])


class Lines(unittest.TextTestResult):
    """Also one line per test on stdout: PASS/FAIL/SKIP Class.test (what a GPU host's log shows)."""

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
        sys.exit("usage: pyhelper_test.py KERNELEVO [unittest args]")
    KERNELEVO = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2, testRunner=unittest.TextTestRunner(resultclass=Lines, verbosity=2))
