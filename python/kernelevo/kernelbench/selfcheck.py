"""The import's self-check: the C++ generic reference (kernelevo-refcheck on the built reference
library) against the Python model. Inputs that a formula can make are made on both sides
(fill.refcheck_values; no multi-GiB files), the others are files; the Python outputs on those inputs
are compared at up to SAMPLE elements each."""
import json
import os
import shutil
import subprocess
import tempfile

import torch

from .common import DTYPES, one_line, write_raw
from .fill import generated, refcheck_values
from .trace import flat_outputs, swapped

SAMPLE = 1 << 24  # output elements the C++ check compares (evenly strided); all of smaller outputs


def scratch_dir(args, nbytes):
    """Where the verification tensors go: --scratch, else /dev/shm when it has room (no disk I/O for
    multi-GiB tensors), else the temp dir."""
    if args.scratch:
        return args.scratch
    try:
        st = os.statvfs("/dev/shm")
        if st.f_bavail * st.f_frsize > 2 * nbytes + (1 << 30):
            return "/dev/shm"
    except OSError:
        pass
    return None


def refcheck(args, task_dir, model, slots, call, specs, device, atol, verify):
    """Runs kernelevo-refcheck (args.refcheck) on the task written in `task_dir` against `model`:
    `call` is (the forward's arguments with None for each tensor, the tensor inputs' positions there),
    `specs` the task's inputs (the call's tensors, then `slots`, the parameters and buffers). Returns
    its result ({"ok", "max_abs_diff", "error"}); verify["compared"] says how many elements."""
    scratch = tempfile.mkdtemp(prefix="kb-verify-", dir=scratch_dir(args, 0))
    try:
        manifest = {"library": args.library, "arg": os.path.join(task_dir, "model.pt"), "device": args.device_kind,
                    "inputs": [], "outputs": []}
        check_args, slot_check = _check_inputs(manifest, scratch, task_dir, specs, call, device)
        with torch.no_grad(), swapped(model, list(zip([n for n, _ in slots], slot_check))):
            expect = flat_outputs(model(*check_args))
        del check_args, slot_check
        low = any(s["dtype"][0] in ("float16", "bfloat16") for s in specs) or \
            any(o.dtype in (torch.float16, torch.bfloat16) for o in expect)
        manifest["atol"] = manifest["rtol"] = 1e-2 if low else (atol or 1e-4)
        _expected_outputs(manifest, scratch, expect)
        verify["compared"] = ["%d of %d" % (-(-o.numel() // m["stride"]), o.numel())
                              for o, m in zip(expect, manifest["outputs"])]
        del expect
        if args.device_kind == "cuda":
            torch.cuda.empty_cache()
        return _run(args, scratch, manifest)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _check_inputs(manifest, scratch, task_dir, specs, call, device):
    """The manifest's inputs and the same values for the Python model: (its arguments, its slots)."""
    raw_values, tensor_pos = call
    check_args, slot_check = list(raw_values), []
    for k, s in enumerate(specs):
        entry = {"dtype": s["dtype"][1], "shape": list(s["tensor"].shape)}
        gen = generated(s["init"], s["dtype"][0], k)
        if gen is not None:
            entry["generate"] = gen
            value = refcheck_values(gen, list(s["tensor"].shape), s["tensor"].dtype, device)
        else:
            if s["init"]["kind"] == "file":
                entry["file"] = os.path.join(task_dir, s["init"]["path"])
            else:
                entry["file"] = os.path.join(scratch, "in%d.bin" % k)
                write_raw(s["tensor"], entry["file"])
            value = s["tensor"]
        manifest["inputs"].append(entry)
        if "slot" in s:
            slot_check.append(value.to(device))
        else:
            check_args[tensor_pos[k]] = value
    return check_args, slot_check


def _expected_outputs(manifest, scratch, expect):
    """The Python outputs as files, evenly strided to at most SAMPLE elements each."""
    for k, o in enumerate(expect):
        f = os.path.join(scratch, "out%d.bin" % k)
        stride = max(1, -(-o.numel() // SAMPLE))
        write_raw(o.reshape(-1)[::stride], f)
        manifest["outputs"].append({"file": f, "dtype": DTYPES[o.dtype][1], "shape": list(o.shape), "stride": stride})


def _run(args, scratch, manifest):
    mpath = os.path.join(scratch, "manifest.json")
    with open(mpath, "w") as f:
        json.dump(manifest, f)
    # Strict fp32 there too: NVIDIA's libraries read NVIDIA_TF32_OVERRIDE=0 (refcheck sets it as well).
    env = dict(os.environ, NVIDIA_TF32_OVERRIDE="0")
    p = subprocess.run([args.refcheck, mpath], capture_output=True, text=True, timeout=args.timeout, env=env)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except Exception:
        raise RuntimeError("kernelevo-refcheck gave no result (%s): %s" % (
            "exit code %d" % p.returncode if p.returncode >= 0 else "signal %d" % -p.returncode,
            one_line(p.stderr or p.stdout)))
