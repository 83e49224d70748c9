"""benchmarks/studies/model_proof.sh's Python half: for one KernelBench level-3 problem and its imported model folder,
builds the model as KernelBench (and the importer) builds it (seed 42, get_init_inputs()), moves it to the
GPU (the CPU where there is none), loads the folder's kernels with kernelevo.load_model (the end-to-end check on fresh inputs included),
checks the loaded model's outputs against the original on other fresh inputs, and times both with
compare_model (PyTorch eager, torch.compile, the loaded model; each region that runs as a kernel).
Prints the report and one JSON line 'RESULT {...}'. Usage: model_proof.py PROBLEM.py MODEL_DIR"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import kernelevo  # noqa: E402
from kernelevo.kernelbench.common import load_problem  # noqa: E402
from kernelevo.kernelbench.problem import build_model  # noqa: E402


def build(problem):
    """The problem module and its model, built as the importer builds it (kernelevo.kernelbench)."""
    _, mod = load_problem(problem)
    return mod, build_model(mod)


def main():
    problem, out_dir = sys.argv[1], sys.argv[2]
    mod, model = build(problem)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = model.to(device)
    # min_speedup=0: the replayed kernels are fixed files, not searched to beat PyTorch; this proves that
    # they load and give the model's outputs (by default load_model keeps a kernel measured slower than
    # its reference in PyTorch: AlexNet's fc1 and the ResNet block's add_ were, on the H100).
    loaded = kernelevo.load_model(out_dir, model, verbose=False, min_speedup=0)
    print(loaded.report())
    kernels = [name for name, status, _ in loaded.regions if status == "kernel"]
    # Fresh inputs (seed 7, not the export's nor the check's), on the GPU: the original and the loaded model.
    torch.manual_seed(7)
    xs = [x.to(device) if torch.is_tensor(x) else x for x in mod.get_inputs()]
    with torch.no_grad():
        want = model(*xs)
        got = loaded(*xs)
    want_l = list(want) if isinstance(want, (tuple, list)) else [want]
    got_l = list(got) if isinstance(got, (tuple, list)) else [got]
    diffs = []
    for w, g in zip(want_l, got_l):
        scale = max(float(w.abs().max()), 1e-30)
        diffs.append({"max_abs": float((w - g).abs().max()), "max_abs_over_scale": float((w - g).abs().max()) / scale,
                      "allclose_1e-4": bool(torch.allclose(g, w, atol=1e-4, rtol=1e-4)),
                      "allclose_1e-2": bool(torch.allclose(g, w, atol=1e-2, rtol=1e-2))})
    cmp = kernelevo.compare_model(model, loaded, inputs=tuple(xs), reps=20, verbose=True)
    print("RESULT " + json.dumps({"problem": os.path.basename(problem), "kernels": kernels,
                                  "regions": {name: status for name, status, _ in loaded.regions},
                                  "outputs": diffs, "end_to_end": cmp["end_to_end"],
                                  "per_region": cmp["regions"], "precision": cmp["precision"],
                                  "device": cmp["device"], "torch": cmp["torch"]}))


if __name__ == "__main__":
    main()
