"""kernelevo.export_model and its graph (python/kernelevo/graph.py, partition.py, model_export.py; issue 38):
tiny models traced, partitioned into regions, the interpreter and each region module checked against
eager PyTorch, and the model folder checked against python/kernelevo/model_plan.md.
Usage: model_export_test.py [unittest args]. Exits 77 (ctest: skipped) without PyTorch. The GPU test
runs only where this PyTorch sees CUDA."""
import gc
import json
import math
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
try:
    import torch
    from torch import nn
    import torch.nn.functional as F
except ImportError:
    print("SKIP this Python has no PyTorch")
    sys.exit(77)
import kernelevo  # noqa: E402
from kernelevo.graph import ModelGraph, region_module  # noqa: E402


class Attention(nn.Module):
    def __init__(self, C, H, T):
        super().__init__()
        self.c_attn, self.c_proj, self.n_head = nn.Linear(C, 3 * C), nn.Linear(C, C), H
        self.register_buffer("bias", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = F.softmax(att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf")), dim=-1)
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, C, hidden):
        super().__init__()
        self.c_fc, self.act, self.c_proj = nn.Linear(C, hidden), nn.GELU(), nn.Linear(hidden, C)

    def forward(self, x):
        return self.c_proj(self.act(self.c_fc(x)))


class Block(nn.Module):
    """A GPT block: LayerNorms, causal attention (scale 1/sqrt(k.size(-1))), a GELU MLP, residuals."""

    def __init__(self, C=16, H=2, T=8, hidden=64):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(C), Attention(C, H, T)
        self.ln_2, self.mlp = nn.LayerNorm(C), MLP(C, hidden)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn, self.relu = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True)
        self.pool, self.fc = nn.MaxPool2d(2), nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.relu(self.bn(self.conv(x)))), 1))


class DropNet(nn.Module):
    """Left in training mode: its Dropout(p=0.5) is random."""

    def __init__(self, hidden=32):
        super().__init__()
        self.fc1, self.drop, self.fc2 = nn.Linear(16, hidden), nn.Dropout(0.5), nn.Linear(hidden, 8)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


class ValueDependent(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x) * float(x.max())  # the trace fixes x.max() of the example


class Recurrent(nn.Module):
    """Token ids -> embedding -> GRU -> nn.MultiheadAttention -> LayerNorm -> Linear."""

    def __init__(self):
        super().__init__()
        self.emb, self.gru = nn.Embedding(50, 16), nn.GRU(16, 16, batch_first=True)
        self.mha, self.ln, self.head = nn.MultiheadAttention(16, 2, batch_first=True), nn.LayerNorm(16), nn.Linear(16, 50)

    def forward(self, ids):
        x, _ = self.gru(self.emb(ids))
        a, _ = self.mha(x, x, x, need_weights=False)
        return self.head(self.ln(x + a))


class Unrolled(nn.Module):
    """A vanilla RNN as a Python loop over the steps (KernelBench's VanillaRNNHidden): the traced graph
    holds its cell once per step."""

    def __init__(self, n=256, h=256, steps=6):
        super().__init__()
        self.i2h, self.h2o, self.steps = nn.Linear(n + h, h), nn.Linear(h, 8), steps
        self.register_buffer("h0", torch.zeros(1, h))

    def forward(self, x):
        hidden, outs = self.h0.expand(x.size(1), -1), []
        for t in range(self.steps):
            hidden = torch.tanh(self.i2h(torch.cat((x[t], hidden), dim=1)))
            outs.append(self.h2o(hidden))
        return torch.stack(outs)


def stack(width=128, depth=4):
    """Layers of one shape with weights of their own (a deep narrow MLP, a transformer's block stack)."""
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 10))


class RandomState(nn.Module):
    """KernelBench's LSTM (35_LSTM): the initial state drawn with torch.randn inside forward."""

    def __init__(self):
        super().__init__()
        self.lstm, self.fc = nn.LSTM(8, 16, 2, batch_first=True), nn.Linear(16, 4)

    def forward(self, x):
        h0, c0 = torch.randn(2, x.size(0), 16), torch.randn(2, x.size(0), 16)
        out, _ = self.lstm(x, (h0, c0))
        return self.fc(out[:, -1, :])


class DataBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        if x.sum() > 0:  # every draw of rand inputs takes this branch: only the trace's provenance tells
            return self.fc(x)
        return -self.fc(x)


def block():
    torch.manual_seed(0)
    return Block().eval(), torch.randn(2, 8, 16)


def convnet():
    torch.manual_seed(0)
    m = ConvNet()
    with torch.no_grad():  # running statistics that are not the initial ones
        m.bn.running_mean.uniform_(-0.5, 0.5)
        m.bn.running_var.uniform_(0.5, 2.0)
    return m.eval(), torch.randn(2, 3, 8, 8)


def summary(regions):
    return [(r.name, r.kind, r.status) for r in regions]


class Partition(unittest.TestCase):
    def check_regions(self, model, x):
        """The interpreter equals eager; each region module reproduces the captured outputs; every
        region replaced by its module still equals eager (random ops draw the same numbers after the
        same seed)."""
        g = ModelGraph.trace(model, (x,))
        regions = g.partition(0.01)
        torch.manual_seed(5)
        with torch.no_grad():
            eager = model(x)
        torch.manual_seed(5)
        self.assertTrue(torch.allclose(g.run([x])[0], eager, rtol=1e-6, atol=1e-6))
        ins, outs = g.capture(regions, [x])
        self.assertEqual((regions[0].start, regions[-1].end), (0, len(g.nodes)))
        for a, b in zip(regions, regions[1:]):
            self.assertEqual(a.end, b.start)  # contiguous, in graph order, covering every node
        tasks = {}
        for k, r in enumerate(regions):
            if r.status != "task":
                continue
            m = region_module(g, r)
            got = m(*ins[k])
            got = [got] if isinstance(got, torch.Tensor) else list(got)
            self.assertEqual(len(got), len(outs[k]), r.name)
            for a, b in zip(got, outs[k]):
                self.assertTrue(torch.equal(a, b), r.name)
            for w in r.weights:
                self.assertIn(w.replace(".", "_"), dict(m.named_parameters()) | dict(m.named_buffers()))
            tasks[k] = lambda xs, m=m: m(*xs)
        torch.manual_seed(5)
        self.assertTrue(torch.allclose(g.run([x], replace=tasks)[0], eager, rtol=1e-6, atol=1e-6))
        return g, regions

    def test_transformer_block(self):
        g, regions = self.check_regions(*block())
        self.assertEqual(summary(regions), [
            ("ln_1", "reduction", "task"), ("attn.c_attn", "gemm", "task"), ("attn", "attention", "task"),
            ("attn.c_proj", "gemm", "task"), ("ln_2", "reduction", "task"), ("mlp.c_fc", "gemm", "task"),
            ("mlp.c_proj", "gemm", "task")])
        attn = regions[2]
        self.assertEqual([o for o in attn.ops if o in ("aten::matmul", "aten::softmax", "aten::masked_fill",
                                                       "aten::split")],
                         ["aten::split", "aten::matmul", "aten::masked_fill", "aten::softmax", "aten::matmul"])
        self.assertEqual(attn.weights, ["attn.bias"])  # the causal mask, a buffer
        # the qkv projection's output, one tensor: q, k, v are split and transposed in the attention
        self.assertEqual(regions[1].ops, ["aten::linear"])
        self.assertEqual(len(attn.inputs), 1)
        self.assertEqual(attn.inputs[0], regions[1].outputs[0])
        self.assertEqual(regions[5].ops, ["aten::linear", "aten::gelu"])
        self.assertEqual(regions[3].weights, ["attn.c_proj.weight", "attn.c_proj.bias"])
        self.assertEqual(len(regions[3].inputs), 2)  # the attention's output and the residual

    def test_conv_net(self):
        g, regions = self.check_regions(*convnet())
        self.assertEqual(summary(regions), [("conv", "conv", "task"), ("pool", "reduction", "task"),
                                            ("fc", "gemm", "task")])
        self.assertEqual(regions[0].ops, ["aten::_convolution", "aten::batch_norm", "aten::relu_"])

    def test_training_mode_dropout_is_a_refused_region(self):
        torch.manual_seed(0)
        g, regions = self.check_regions(DropNet(), torch.randn(4, 16))
        self.assertEqual(summary(regions), [("fc1", "gemm", "task"), ("drop", "pointwise", "refused"),
                                            ("fc2", "gemm", "task")])
        self.assertEqual(regions[1].reason, "Dropout in training mode (p = 0.5): random output; call model.eval() "
                                            "for inference")

    def test_embedding_rnn_and_multihead_attention(self):
        torch.manual_seed(0)
        g, regions = self.check_regions(Recurrent().eval(), torch.randint(0, 50, (2, 7)))
        self.assertEqual(summary(regions)[:2], [("emb", "pointwise", "task"), ("gru", "rnn", "task")])
        self.assertEqual(summary(regions)[-2:], [("ln", "reduction", "task"), ("head", "gemm", "task")])
        # PyTorch's fused MultiheadAttention op, or its matmul -> softmax -> matmul merged (by PyTorch version)
        # (mha.2 when its input projection, in the module's own forward, comes first as region mha)
        self.assertTrue([r for r in regions if r.kind == "attention" and r.name.startswith("mha")], summary(regions))

    def test_fingerprint_follows_weight_shapes(self):
        torch.manual_seed(0)
        x = torch.randn(4, 16)
        a, b, c = (ModelGraph.trace(DropNet(h).eval(), (x,)).fingerprint() for h in (32, 32, 24))
        self.assertEqual(a, b)
        self.assertNotEqual(a, c)
        self.assertNotEqual(a, ModelGraph.trace(DropNet(32).eval(), (torch.randn(5, 16),)).fingerprint())

    def test_a_value_dependent_trace_is_refused(self):
        torch.manual_seed(0)
        with self.assertRaisesRegex(kernelevo.ExportError, "data-dependent"):
            ModelGraph.trace(ValueDependent().eval(), (torch.randn(4, 8),))
        with self.assertRaisesRegex(kernelevo.ExportError, "data-dependent control flow at model_export_test.py:\\d+ "
                                    ".*__bool__"):
            ModelGraph.trace(DataBranch().eval(), (torch.rand(4, 8),))

    def test_the_live_model_is_not_modified(self):
        torch.manual_seed(0)
        m = ConvNet()  # training mode: BatchNorm updates its running statistics on each call
        before = {k: v.clone() for k, v in m.state_dict().items()}
        x = torch.randn(2, 3, 8, 8)
        g = ModelGraph.trace(m, (x,))
        regions = g.partition(0.01)
        # The BatchNorm's num_batches_tracked += 1 and its batch_norm: one refused region, named after it.
        bn = [r for r in regions if r.status == "refused"]
        self.assertEqual([(r.name, r.kind, r.ops) for r in bn], [("bn", "reduction", ["aten::batch_norm"])])
        self.assertEqual(bn[0].end - bn[0].start, 2)  # the free add_ on num_batches_tracked is in it
        self.assertTrue(bn[0].reason.startswith("BatchNorm in training mode"), bn[0].reason)
        g.profile(regions, [x], reps=2)
        g.capture(regions, [x])
        for k, v in m.state_dict().items():
            self.assertTrue(torch.equal(v, before[k]), k)
        with self.assertRaisesRegex(ValueError, "replace: region index 9 is not one of the 4 regions"):
            g.run([x], replace={9: lambda xs: xs})

    def test_the_example_run_is_not_kept(self):
        """The graph outlives the trace (load_model keeps it): only its static values stay, not the
        example inputs nor any activation of the example run (GiBs at real sizes)."""
        import weakref
        import kernelevo.graph as G
        made = []  # weak references to every tensor the interpreter computes while tracing

        def recording(step, env):
            real_exec_step(step, env)
            made.extend(weakref.ref(env[u]) for u in step[3] if isinstance(env[u], torch.Tensor) and env[u].numel() > 1)

        m, x = block()
        real_exec_step, G.exec_step = G.exec_step, recording
        try:
            g = ModelGraph.trace(m, (x,))
        finally:
            G.exec_step = real_exec_step
        example = weakref.ref(x)
        del x
        gc.collect()
        self.assertIsNone(example(), "the graph keeps the example input")
        self.assertGreater(len(made), 10)
        self.assertEqual([r() for r in made if r() is not None], [], "the graph keeps activations of the example run")
        regions = g.partition(0.0)  # and what it kept is enough: each region replaced still equals eager
        x = torch.randn(2, 8, 16)
        want = m(x)
        got = g.run([x], replace={k: (lambda r: lambda xs: region_module(g, r)(*xs))(r) for k, r in enumerate(regions)
                                  if r.status == "task"})
        self.assertTrue(torch.allclose(got[0], want, atol=1e-5), (got[0] - want).abs().max())


class Export(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kevo-model-export-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def export(self, model, x, sub, **kw):
        return kernelevo.export_model(model, (x,), os.path.join(self.dir, sub), quiet=True, device="cpu", **kw)

    def check_plan(self, path, model_name):
        with open(path) as f:
            plan = json.load(f)
        self.assertEqual(plan["format"], kernelevo.PLAN_FORMAT)
        self.assertEqual(plan["format"], "kernelevo-model-plan/1")
        self.assertEqual(plan["model"], model_name)
        self.assertEqual(plan["device"], "cpu")
        self.assertRegex(plan["fingerprint"], "^[0-9a-f]{64}$")
        for key in ("source", "precision", "inputs", "total_ms", "threshold", "regions"):
            self.assertIn(key, plan)
        names = [r["name"] for r in plan["regions"]]
        self.assertEqual(len(names), len(set(names)))
        self.assertAlmostEqual(sum(r["share"] for r in plan["regions"]), 1.0, places=3)
        self.assertAlmostEqual(sum(r["time_ms"] for r in plan["regions"]), plan["total_ms"], places=3)
        for r in plan["regions"]:
            for key in ("name", "task_name", "kind", "nodes", "ops", "time_ms", "share", "status", "reason", "task",
                        "weights"):
                self.assertIn(key, r)
            self.assertIn(r["kind"], ("gemm", "conv", "attention", "rnn", "pointwise", "reduction", "view"))
            self.assertIn(r["status"], ("task", "below_threshold", "refused", "failed", "view", "repeat"))
            self.assertTrue(r["task_name"].startswith(model_name.lower() + "_"))
            if r["status"] == "task":
                self.assertEqual(r["task"], "regions/" + r["task_name"])
                self.assertTrue(os.path.isfile(os.path.join(os.path.dirname(path), r["task"], "task.json")))
            else:
                self.assertIsNone(r["task"])
                self.assertFalse(os.path.exists(os.path.join(os.path.dirname(path), "regions", r["task_name"])))
        with open(os.path.join(os.path.dirname(path), "plan.md")) as f:
            table = f.read()
        for r in plan["regions"]:
            self.assertIn("| %s | %s |" % (r["name"], r["kind"]), table)
        self.assertIn("| | total |", table)
        # On the CPU torch.compile is not timed (nor where PyTorch is older than 2.0: 1.13 has none): the plan
        # says why, and the search budgets by eager time.
        self.assertIsNone(plan["compile_total_ms"])
        self.assertRegex(plan["compile"], "^not measured: (PyTorch .* has no torch.compile|the model is on cpu)")
        self.assertTrue(all(r["compile_ms"] is None and r["floor_ms"] is None for r in plan["regions"]))
        self.assertIn("torch.compile: " + plan["compile"], table)
        tasks = [r for r in plan["regions"] if r["status"] == "task"]
        self.assertIn("Of the model's time: %.1f%% in %d task region(s) a search works on" % (
            100 * sum(r["share"] for r in tasks), len(tasks)), table)
        for status in ("refused", "below_threshold"):
            n = sum(r["status"] == status for r in plan["regions"])
            self.assertEqual(n > 0, ("%s (%d region(s), stay in PyTorch)" % (
                "refused" if status == "refused" else "below the threshold", n)) in table, status)
        return plan

    def test_transformer_block_folder(self):
        m, x = block()
        before = {k: v.clone() for k, v in m.state_dict().items()}
        path = self.export(m, x, "block", threshold=0.0)
        self.assertEqual(path, os.path.join(self.dir, "block", "plan.json"))
        plan = self.check_plan(path, "Block")
        self.assertEqual(plan["inputs"], [{"name": "x", "dtype": "float32", "shape": [2, 8, 16]}])
        self.assertEqual(plan["source"], "export_model")
        self.assertEqual([(r["name"], r["status"]) for r in plan["regions"]], [
            (n, "task") for n in ("ln_1", "attn.c_attn", "attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj")])
        attn = plan["regions"][2]
        self.assertEqual(attn["task_name"], "block_attn")
        with open(os.path.join(self.dir, "block", attn["task"], "task.json")) as f:
            task = json.load(f)
        self.assertEqual(task["name"], "block_attn")
        self.assertEqual([i["name"] for i in task["inputs"]][-1], "attn_bias")
        for k, v in m.state_dict().items():
            self.assertTrue(torch.equal(v, before[k]), k)
        # What the LLM reads as the region's PyTorch code: which region it is, and the user's classes
        # its ops come from (mlp.c_fc's Linear and GELU are in MLP; torch.nn's own classes are not shown).
        with open(os.path.join(self.dir, "block", "regions", "block_mlp_c_fc", "problem.py")) as f:
            shown = f.read()
        self.assertIn("# Region `mlp.c_fc` (gemm) of Block: linear, gelu.", shown)
        self.assertIn("module mlp (MLP)", shown)
        self.assertIn("return self.c_proj(self.act(self.c_fc(x)))", shown)
        self.assertNotIn("source not available", shown)
        self.assertNotIn("class Linear", shown)

    def test_dropout_region_refused_and_the_rest_exported(self):
        torch.manual_seed(0)
        plan = self.check_plan(self.export(DropNet(), torch.randn(4, 16), "drop", threshold=0.0, name="drop_net"),
                               "drop_net")
        self.assertEqual([(r["name"], r["status"]) for r in plan["regions"]],
                         [("fc1", "task"), ("drop", "refused"), ("fc2", "task")])
        self.assertIn("Dropout in training mode (p = 0.5)", plan["regions"][1]["reason"])
        self.assertEqual(plan["regions"][0]["task_name"], "drop_net_fc1")

    def test_a_region_repeated_over_time_steps_is_one_task(self):
        torch.manual_seed(0)
        m, x = Unrolled().eval(), torch.randn(6, 64, 256)
        plan = self.check_plan(self.export(m, x, "rnn", threshold=0.0, name="rnn"), "rnn")
        cells = [r for r in plan["regions"] if r["name"].split(".")[0] == "i2h"]
        self.assertEqual([r["name"] for r in cells], ["i2h"] + ["i2h.%d" % k for k in range(2, 7)])
        first, rest = cells[0], cells[1:]
        self.assertEqual((first["status"], first["task"], first["repeats"]), ("task", "regions/rnn_i2h", 5))
        self.assertAlmostEqual(first["share_with_repeats"], sum(r["share"] for r in cells), places=4)
        for r in rest:
            self.assertEqual((r["status"], r["same_as"], r["task"]), ("repeat", "i2h", None))
            self.assertEqual(r["weights"], first["weights"])
            self.assertFalse(os.path.exists(os.path.join(self.dir, "rnn", "regions", r["task_name"])))
        # h2o's regions read the next step's slice x[t] (another constant each): not repeats of each other.
        self.assertFalse(any(r.get("same_as", "").startswith("h2o") for r in plan["regions"]))
        with open(os.path.join(self.dir, "rnn", "plan.md")) as f:
            self.assertIn("in 5 repeat(s) of a task region (each runs that region's kernel)", f.read())
        # Each step alone is below a threshold that the steps together pass: the cell is still a task.
        most = max(r["share"] for r in cells)
        self.assertLess(most, 0.3, [r["share"] for r in cells])
        self.assertGreater(first["share_with_repeats"], 0.3)
        plan = self.check_plan(self.export(m, x, "rnn30", threshold=0.3, name="rnn"), "rnn")
        self.assertEqual([r["status"] for r in plan["regions"] if r["name"].split(".")[0] == "i2h"],
                         ["task"] + ["repeat"] * 5)
        # A threshold above the steps together: all of them stay in PyTorch, saying so. The steps take
        # about 99% of the measured time (h2o's regions the rest; 99.3% on the loaded 2-core machine,
        # where a 99% threshold was below them and this failed); 99.9999% is above them unless the
        # other regions took less than a millionth of the time.
        plan = self.check_plan(self.export(m, x, "rnn99", threshold=0.999999, name="rnn"), "rnn")
        cell = [r for r in plan["regions"] if r["name"].split(".")[0] == "i2h"]
        self.assertEqual({r["status"] for r in cell}, {"below_threshold"}, [r["share"] for r in cell])
        self.assertIn("with its 5 repeat(s), below the threshold of 100.00%", cell[0]["reason"])
        self.assertTrue(cell[1]["reason"].startswith("a repeat of region i2h: "), cell[1]["reason"])

    def test_layers_of_one_shape_with_their_own_weights_are_repeats_of_the_first(self):
        torch.manual_seed(0)
        plan = self.check_plan(self.export(stack().eval(), torch.randn(32, 128), "stack", threshold=0.0, name="st"), "st")
        got = [(r["name"], r["status"], r.get("same_as")) for r in plan["regions"]]
        self.assertEqual(got, [("0", "task", None), ("2", "repeat", "0"), ("4", "repeat", "0"), ("6", "repeat", "0"),
                               ("8", "task", None)])
        self.assertEqual(plan["regions"][0]["repeats"], 3)
        self.assertEqual(plan["regions"][2]["weights"], ["4.weight", "4.bias"])  # its own
        self.assertIn("on weights of its own", plan["regions"][2]["reason"])

    def test_a_random_initial_state_stays_in_pytorch_and_the_lstm_is_a_task(self):
        plan = self.check_plan(self.export(RandomState(), torch.rand(4, 10, 8), "rand", threshold=0.0, name="rs"), "rs")
        status = {r["name"]: (r["status"], r["reason"]) for r in plan["regions"]}
        for name in ("randn", "randn.2"):
            self.assertEqual(status[name][0], "refused")
            self.assertIn("draws random numbers", status[name][1])
        # The draws are the LSTM region's inputs (activations), not values it recomputes from constants.
        self.assertEqual(status["lstm"], ("task", ""))
        lstm = next(r for r in plan["regions"] if r["name"] == "lstm")
        self.assertEqual(sorted(s["shape"] for s in lstm["inputs"]), [[2, 4, 16], [2, 4, 16], [4, 10, 8]])

    def test_threshold_leaves_small_regions_in_pytorch(self):
        m, x = convnet()
        plan = self.check_plan(self.export(m, x, "conv", threshold=0.99), "ConvNet")
        self.assertEqual({r["status"] for r in plan["regions"]}, {"below_threshold"})
        self.assertFalse(os.path.exists(os.path.join(self.dir, "conv", "regions", "convnet_conv")))

    def test_existing_plan_and_bad_arguments(self):
        m, x = convnet()
        self.export(m, x, "conv", threshold=0.99)
        with self.assertRaisesRegex(FileExistsError, "plan.json exists already.*overwrite=True"):
            self.export(m, x, "conv")
        plan = self.check_plan(self.export(m, x, "conv", threshold=0.0, overwrite=True), "ConvNet")
        # Weights are file inputs; only nn.Parameters are marked "parameter" (the judge varies them), the
        # BatchNorm's running statistics (buffers) keep the file's values.
        marks = {}
        for r in plan["regions"]:
            if r["status"] == "task":
                with open(os.path.join(self.dir, "conv", r["task"], "task.json")) as f:
                    for i in json.load(f)["inputs"]:
                        if i["init"]["kind"] == "file":
                            marks[i["name"]] = i["init"].get("parameter", False)
        self.assertTrue(marks["bn_running_var"] is False and marks["bn_weight"] and marks["conv_weight"], marks)
        self.assertEqual({n for n, p in marks.items() if not p}, {"bn_running_mean", "bn_running_var"}, marks)
        with self.assertRaisesRegex(ValueError, "threshold"):
            self.export(m, x, "t", threshold=1.5)
        with self.assertRaisesRegex(ValueError, "inputs"):
            self.export(m, x, "t", inputs="zeros")
        with self.assertRaisesRegex(ValueError, "name"):
            self.export(m, x, "t", name="1 model")
        with self.assertRaisesRegex(TypeError, "nn.Module"):
            kernelevo.export_model(lambda t: t, (x,), self.dir)
        with self.assertRaisesRegex(TypeError, "example_inputs\\[0\\]: a tensor"):
            kernelevo.export_model(m, (3,), self.dir)

    @unittest.skipUnless(torch.cuda.is_available(), "no CUDA device for this PyTorch")
    def test_on_the_gpu(self):
        m, x = block()
        path = kernelevo.export_model(m, (x,), os.path.join(self.dir, "gpu"), quiet=True, threshold=0.0)
        with open(path) as f:
            plan = json.load(f)
        self.assertTrue(plan["device"].endswith("(cuda)"), plan["device"])
        self.assertTrue(all(r["time_ms"] > 0 and r["status"] == "task" for r in plan["regions"]))
        if hasattr(torch, "compile"):  # what the search budgets by: each region's compiled time above its floor
            self.assertEqual(plan["compile"], "measured")
            self.assertGreater(plan["compile_total_ms"], 0)
            for r in plan["regions"]:
                self.assertGreater(r["compile_ms"], 0, r["name"])
                self.assertTrue(0 < r["floor_ms"] < r["time_ms"], r)
        self.assertEqual(next(p.device.type for p in m.parameters()), "cpu")  # a copy went to the GPU


if __name__ == "__main__":
    unittest.main(verbosity=2)
