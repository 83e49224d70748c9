"""load_op(): the kernel a search cached for this GPU as the operator torch.ops.kernelevo.NAME, or
the task's reference (its traced model) wherever the kernel cannot be trusted to give the right result."""
import hashlib
import json
import os
import shutil
import subprocess
import warnings

import torch
from torch import nn

from . import library
from .kernelbench.common import DTYPES
from .files import load_json_file, open_regular, read_regular
from .torch_task import SIDECAR, _read_bytes

_LOADED = {}  # (NAME, ARCH, digest) -> the compiled kernel's forward(inputs, outputs), once per process


def _torch_dtype(name):
    """The torch dtype of a task-file dtype name, from the importer's table (its DTYPES)."""
    return {n: t for t, (n, _) in DTYPES.items()}[name]


def _read_raw(path, dtype, shape):
    """A task's "file" input: raw little-endian row-major bytes (write_raw of the importer): a regular
    file of exactly the bytes its shape and dtype declare (never a FIFO or a device, never read past that)."""
    numel = 1
    for d in shape:
        numel *= d
    data = bytearray(read_regular(path, "a %s%s weight file" % (str(dtype).replace("torch.", ""), list(shape)),
                                  exact=numel * torch.empty((), dtype=dtype).element_size()))
    if dtype == torch.bfloat16:
        return torch.frombuffer(data, dtype=torch.int16).view(torch.bfloat16).reshape(shape).clone()
    return torch.frombuffer(data, dtype=dtype).reshape(shape).clone() if data else torch.empty(shape, dtype=dtype)


def _shape(spec, task):
    """A shape of task.json: numbers, or dimension names bound in task["shapes"][0]."""
    bound = (task.get("shapes") or [{}])[0]
    return [int(d) if not isinstance(d, str) else int(bound[d]) for d in spec["shape"]]


class KernelEvoOp(nn.Module):
    """forward(*inputs) -> the task's outputs (one tensor, or a tuple), through the operator
    torch.ops.kernelevo.NAME (library.py: typed schema, fake kernel, backward) where this PyTorch has
    torch.library. The operator runs the cached kernel when one was loaded (`kernel` names it) and the
    call is one it was validated for: CUDA tensors of one of the task's shape sets and its dtypes;
    every other call runs the reference, the traced model (`reason` says why no kernel was loaded).
    `speedup`: the kernel's speedup over its reference recorded in its cache entry (None: none measured).
    `kernel_calls` counts the calls the kernel ran."""

    def __init__(self, task_dir, task, side, reference, weights, op=None, kernel=None, reason="", speedup=None):
        super().__init__()
        self.task_dir, self.task, self.kernel, self.reason, self.speedup = task_dir, task, kernel, reason, speedup
        self.reference = reference
        self.kernel_calls = 0
        self._weights = weights
        self._op = op  # the compiled kernel: op(inputs, outputs), outputs allocated by the caller
        self._args = side.get("args") if side else None
        self._dtypes = [_torch_dtype(s["dtype"]) for s in task["inputs"]]
        self._out_dtypes = [_torch_dtype(s["dtype"]) for s in task["outputs"]]
        self.schema = "kernelevo::%s%s" % (task["name"], library.schema_of(task))
        self.operator = None  # "torch.library.custom_op", "torch.library.Library", or None (no operator)
        self._name = task["name"]
        self._through_op = False  # forward calls torch.ops.kernelevo.NAME (this module runs it now)
        self._op_autograd = False  # the operator has a backward (custom_op)

    def _weights_on(self, device):
        key = str(device)
        if key not in self._weights:
            self._weights[key] = [w.to(device) for w in self._weights["cpu"]]
        return self._weights[key]

    def _tensors(self, args):
        """The tensors among the arguments; the plain numbers of the examples are constants of the
        trace, so a call must pass the same values (anything else would be computed wrongly)."""
        if self._args is None:
            return list(args)
        if len(args) != len(self._args):
            raise TypeError("%s takes %d argument(s) (as the exported forward), got %d" % (
                self.task["name"], len(self._args), len(args)))
        for k, (a, spec) in enumerate(zip(args, self._args)):
            if "tensor" in spec and not isinstance(a, torch.Tensor):
                raise TypeError("argument %d (%s) must be a tensor" % (k, spec["tensor"]))
            if "constant" in spec and not (not isinstance(a, torch.Tensor) and a == spec["constant"]):
                raise ValueError("argument %d was exported as the constant %r (fixed in the trace), got %r" % (
                    k, spec["constant"], a))
        return [a for a in args if isinstance(a, torch.Tensor)]

    def _kernel_outputs(self, tensors):
        """The output shapes when the kernel may run this call (validated for it), else None."""
        if self._op is None or not tensors:
            return None
        k, shapes = library.output_shapes(self.task, [t.shape for t in tensors])
        dev = tensors[0].device
        if k is None or dev.type != "cuda" or any(t.device != dev or t.dtype != d for t, d in zip(tensors, self._dtypes)):
            return None
        return shapes

    def _reference(self, tensors):
        outs = self.reference(*tensors)
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        # An operator's outputs never alias its inputs (custom_op checks): a reference that returns
        # an input (or a view of one) gives a copy.
        ptrs = {t.data_ptr() for t in tensors if t.numel()}
        return [o.clone() if o.numel() and (o._base is not None or o.data_ptr() in ptrs) else o for o in outs]

    def _run(self, tensors):
        """The operator's implementation (inputs then weights, as its schema)."""
        tensors = list(tensors)
        shapes = self._kernel_outputs(tensors)
        if shapes is None:
            outs = self._reference(tensors)
        else:
            outs = [torch.empty(s, dtype=d, device=tensors[0].device) for s, d in zip(shapes, self._out_dtypes)]
            self._op([t.contiguous() for t in tensors], outs)
            self.kernel_calls += 1
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _fake(self, tensors):
        """The operator's fake (meta) kernel: empty tensors of the output shapes task.json gives."""
        _, shapes = library.output_shapes(self.task, [t.shape for t in tensors])
        if shapes is None:
            raise RuntimeError("kernelevo::%s: the output shapes for inputs of shapes %s are not derivable from task.json "
                               "(its inputs: %s; its shape sets: %s; output shapes follow other input sizes only through the "
                               "dimension names inputs and outputs share)" % (
                                   self.task["name"], [list(t.shape) for t in tensors],
                                   [s["shape"] for s in self.task["inputs"]], self.task.get("shapes") or "none, literal sizes"))
        device = tensors[0].device if tensors else torch.device("meta")
        outs = [torch.empty(s, dtype=d, device=device) for s, d in zip(shapes, self._out_dtypes)]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def forward(self, *args):
        tensors = self._tensors(args)
        device = tensors[0].device if tensors else torch.device("cpu")
        return self.call(tensors, self._weights_on(device))

    def call(self, inputs, weights):
        """forward on the task's input tensors with the given weights in the task's order in place of
        its own files' (load_model passes the live model's, so a fine-tuned model uses its own)."""
        full = list(inputs) + list(weights)
        grad = torch.is_grad_enabled() and any([t.requires_grad for t in full])
        # Plain attributes (library.register sets them), so that torch.compile guards on them.
        if self._through_op and (self._op_autograd or not grad):
            return getattr(torch.ops.kernelevo, self._name)(*full)
        if grad:  # no backward through the operator (PyTorch < 2.4) or the kernel: the reference
            outs = self._reference(full)
            return outs[0] if len(outs) == 1 else tuple(outs)
        return self._run(full)


def _find_kernelevo(given):
    """The kernelevo program: given, $KERNELEVO, PATH, or the installed prefix/bin of this package."""
    here = os.path.dirname(os.path.abspath(__file__))
    for c in (given, os.environ.get("KERNELEVO"), shutil.which("kernelevo"),
              os.path.join(here, "..", "..", "..", "..", "bin", "kernelevo")):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.abspath(c)
    return None


def _include_dir():
    """runtime/include (kernelevo/abi.h): installed prefix/include, the copy `pip install` put in the
    package (kernelevo/_share/include), else the source tree's."""
    here = os.path.dirname(os.path.abspath(__file__))
    for c in (os.environ.get("KERNELEVO_INCLUDE_DIR", ""), os.path.join(here, "..", "..", "..", "..", "include"),
              os.path.join(here, "_share", "include"), os.path.join(here, "..", "..", "runtime", "include")):
        if c and os.path.isfile(os.path.join(c, "kernelevo", "abi.h")):
            return os.path.abspath(c)
    return None


def _usable_entry(task_json, name, cache_dir, arch, kernelevo):
    """(path of NAME/ARCH.cu, None, its speedup) when the entry is one load_op may run, else (None, why, None).
    The entry is read by one reader for every language: the C++ lookup() (tool/cache/cache.cpp; the CMake module's
    _kevo_lookup is its twin), through `kernelevo cache status`: metadata of the right types naming this function
    and architecture, this task's hashes, the .cu unedited. Then load_op's own policy (_entry_policy). The speedup
    is the one over its reference that the entry recorded when it was validated; None where none was measured (0)."""
    cu = os.path.join(cache_dir, name, arch + ".cu")
    if not (os.path.lexists(cu) or os.path.lexists(cu[:-3] + ".json")):
        return None, "no kernel cached for %s in %s" % (arch, os.path.join(cache_dir, name)), None
    exe = _find_kernelevo(kernelevo)
    if exe is None:
        return None, "the kernelevo program was not found (PATH, $KERNELEVO or kernelevo=...) to check the entry", None
    p = subprocess.run([exe, "cache", "status", "--cache-dir", cache_dir, "--task", task_json, "--json"],
                       capture_output=True, text=True)
    try:  # exit 1: some entry of the cache is not valid (this one's row says whether it is)
        rows = json.loads(p.stdout)["entries"] if p.returncode in (0, 1) else None
    except (ValueError, KeyError, TypeError):
        rows = None
    if rows is None:
        said = " ".join((p.stderr.strip() or p.stdout.strip()).split())[:400]
        return None, "kernelevo cache status failed: %s" % said, None
    row = next((r for r in rows if isinstance(r, dict) and r.get("function") == name and r.get("arch") == arch), None)
    why = _entry_policy(row, arch, os.path.join(cache_dir, name))
    if why:
        return None, why, None
    return cu, None, (row["speedup"] if row["speedup"] > 0 else None)


def _entry_policy(row, arch, folder):
    """Why load_op does not run the entry the C++ reader judged (its `cache status` row), or None. On top of
    lookup()'s state: the entry was validated (`cache add --unvalidated` stores one that was not). The reader
    makes an entry whose speedup is not a figure the tool writes (> 0 measured, 0 none; negative, NaN,
    infinite or not a number: tool/cache/cache.cpp EntryMeta::from_json) invalid, so that min_speedup cannot
    be passed by a negative one."""
    if row is None or row.get("state") == "missing":
        return "no kernel cached for %s in %s" % (arch, folder)
    if row.get("state") == "stale":
        return "the cached %s kernel is stale: %s" % (arch, row.get("reason"))
    if row.get("state") != "valid":
        return "the cached %s kernel's entry is %s: %s" % (arch, row.get("state"), row.get("reason"))
    if row.get("validated") is not True:
        return "the cached %s kernel was stored unvalidated" % arch
    return None


# The binding of every task's kernel (the same text for all: the entry point's name comes from -D):
# forward(inputs, outputs) calls the cached kernel through the kernel ABI
# (runtime/include/kernelevo/abi.h) on torch's current stream; Python allocates the outputs of the
# shapes task.json gives (library.output_shapes) and checks the call is one the kernel was validated for.
_BINDING = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include "kernelevo/abi.h"
#include "kernelevo/cublas_host.h"

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t stream);

namespace {
int32_t dtype_of(at::ScalarType s) {
    switch (s) {
#define KEVO_DTYPE_OF_(e, v, n, sz, fl, aten) case at::ScalarType::aten: return KEVO_##e;
        KEVO_DTYPE_LIST(KEVO_DTYPE_OF_)
#undef KEVO_DTYPE_OF_
        default: return -1;
    }
}

kevo_tensor view_of(const at::Tensor& a) {
    TORCH_CHECK(a.is_cuda() && a.dim() <= KEVO_MAX_DIMS && dtype_of(a.scalar_type()) >= 0,
                "kernelevo: a CUDA tensor of a kernel ABI dtype with at most KEVO_MAX_DIMS dimensions expected");
    kevo_tensor t{};
    t.data = const_cast<void*>(a.data_ptr());
    t.ndim = static_cast<int32_t>(a.dim());
    t.dtype = dtype_of(a.scalar_type());
    for (int64_t k = 0; k < a.dim(); ++k) t.sizes[k] = a.size(k), t.strides[k] = a.stride(k);
    return t;
}

void run(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs) {
    TORCH_CHECK(!inputs.empty(), "kernelevo: no inputs");
    const c10::cuda::CUDAGuard guard(inputs[0].device());
    std::vector<kevo_tensor> in, out;
    for (const auto& a : inputs) in.push_back(view_of(a));
    for (const auto& o : outputs) out.push_back(view_of(o));
    const int rc = kevo_forward(in.data(), static_cast<int>(in.size()), out.data(), static_cast<int>(out.size()),
                                at::cuda::getCurrentCUDAStream().stream());
    TORCH_CHECK(rc == 0, "kernelevo: the kernel returned ", rc);
}
}  // namespace

// The kernel ABI's cuBLAS handles and workspace (version 2), from the cuBLAS this module links.
KEVO_CUBLAS_HOST_DEFINE_ENTRY_POINTS(kevo_cublas::linked_api())

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("forward", &run, "the cached kernel: forward(inputs, outputs)"); }
"""

# As the validator compiles a kernel (tool/compile/compile.cpp: -O3, no fast math; the C++ standard torch picks), minus
# what torch.utils.cpp_extension adds for its own sources: the half/bfloat16 operators it disables
# are what kernels use.
_NVCC_FLAGS = ["-O3", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
               "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "-U__CUDA_NO_HALF2_OPERATORS__"]

# The toolkit libraries a kernel may call, as the validator links them (tool/compile/source_rules.h
# kCandidateLinkLibraries); the binding above gives the kernel their handles (kernelevo/cublas_host.h).
_LINK_LIBRARIES = ["-lcublas", "-lcublasLt"]


def _link_flags(cuda_home):
    """The libraries, and the toolkit's library folder as the run path (the folder holding them), so
    that the module finds the cuBLAS it was linked with whatever the loader's path says."""
    flags = list(_LINK_LIBRARIES)
    for sub in ("lib64", "lib"):
        d = os.path.join(cuda_home or "", sub)
        if cuda_home and os.path.isfile(os.path.join(d, "libcublas.so")):
            return flags + ["-L" + d, "-Wl,-rpath," + os.path.realpath(d)]
    return flags


def _build_root():
    """torch's documented extension folder: $TORCH_EXTENSIONS_DIR, else ~/.cache/torch_extensions."""
    return os.environ.get("TORCH_EXTENSIONS_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "torch_extensions")


def _compile(task, cu, arch, build_root, verbose):
    """Builds and loads the binding + kernel (once per kernel and process); returns its forward(inputs, outputs)."""
    from torch.utils import cpp_extension
    name = task["name"]
    digest = hashlib.sha256(_read_bytes(cu) + _BINDING.encode()).hexdigest()[:12]
    key = (name, arch, digest)
    if key in _LOADED:
        return _LOADED[key]
    include = _include_dir()
    if include is None:
        raise RuntimeError("kernelevo/abi.h not found (set KERNELEVO_INCLUDE_DIR)")
    # Not in the cache folder (users commit it; `kernelevo cache` refuses what it did not write).
    build = os.path.abspath(os.path.join(build_root or _build_root(), "kevo_op_%s_%s_%s" % (name, arch, digest)))
    os.makedirs(build, exist_ok=True)
    binding = os.path.join(build, "binding.cpp")
    kernel = os.path.join(build, "kernel.cu")
    with open(binding, "w") as f:
        f.write(_BINDING)
    shutil.copyfile(cu, kernel)
    # The kernel's entry point gets a name of its own (as kernelevo_optimize() does), so that two
    # tasks' kernels can live in one process.
    entry = ["-Dkevo_forward=kevo_forward_%s_%s" % (name, digest)]
    num = arch.replace("sm_", "")
    module = cpp_extension.load(name="kevo_op_%s_%s" % (name, digest), sources=[binding, kernel], build_directory=build,
                                extra_include_paths=[include], extra_cflags=["-O2"] + entry,
                                extra_cuda_cflags=_NVCC_FLAGS + ["-gencode=arch=compute_%s,code=[sm_%s,compute_%s]" % (
                                    num, num, num)] + entry,
                                extra_ldflags=_link_flags(cpp_extension.CUDA_HOME),
                                is_python_module=True, verbose=verbose)
    _LOADED[key] = module.forward
    return module.forward


def load_op(task_dir, cache_dir=None, arch=None, kernelevo=None, build_dir=None, verbose=False):
    """The task's function as a callable module (KernelEvoOp): op(*inputs) as the exported forward
    took them (tensors; the weights are the task's own files).

    task_dir: a folder with task.json (export_task's OUT_DIR/NAME) or the task.json itself.
    cache_dir: the kernel cache (`kernelevo search --out`); default OUT_DIR/kernels beside the task.
    arch: the entry to load (default: the running GPU's, sm_XY). Another architecture's entry is
        loaded only when asked, with a warning (validated there, not here; its PTX is kept for newer GPUs).
    kernelevo: the kernelevo program, whose reader of cache entries judges the entry against this very
        task (`kernelevo cache status --task`, _usable_entry); default $KERNELEVO, PATH, the installed bin/.

    The cached NAME/ARCH.cu is compiled (nvcc, through torch.utils.cpp_extension, once per kernel:
    build_dir, default $TORCH_EXTENSIONS_DIR or ~/.cache/torch_extensions) with a generated binding.
    The task becomes the operator torch.ops.kernelevo.NAME with a typed schema made from task.json
    (one Tensor per task input by name, the caller's inputs then the weights; a Tensor or a tuple as
    the task has outputs: see the module's `schema`), defined on every PyTorch that has
    torch.library, with or without CUDA (library.py: custom_op with a fake kernel and a backward from
    PyTorch 2.4, torch.library.Library before). The operator runs the kernel only for calls it was
    validated for (CUDA tensors of a task shape set and its dtypes); every other call, and every case
    without a usable kernel (no CUDA, no entry for the GPU, unvalidated, edited, stale, a build
    failure: a warning says which), runs the reference (model.pt, the traced model): never a kernel
    that was not validated for this task on this architecture.
    """
    task_json = task_dir if task_dir.endswith(".json") else os.path.join(task_dir, "task.json")
    task_dir = os.path.dirname(os.path.abspath(task_json))
    task = load_json_file(task_json, "a task file")
    side_path = os.path.join(task_dir, SIDECAR)
    side = load_json_file(side_path, "the task's pytorch.json") if os.path.lexists(side_path) else None
    name = task["name"]
    # Where it was traced (a model traced on the GPU may name its device); on the CPU without CUDA.
    with open_regular(os.path.join(task_dir, "model.pt"), "a TorchScript model (model.pt)") as f:
        reference = torch.jit.load(f, map_location=None if torch.cuda.is_available() else "cpu")
    n_in = len(side["inputs"]) if side else len(task["inputs"])
    weights = {"cpu": [_read_raw(os.path.join(task_dir, s["init"]["path"]), _torch_dtype(s["dtype"]), _shape(s, task))
                       for s in task["inputs"][n_in:]]}
    cache_dir = cache_dir or os.path.join(os.path.dirname(task_dir), "kernels")
    op, kernel, reason, speedup = None, None, "", None
    if not torch.cuda.is_available():
        reason = "no CUDA device in this PyTorch"
    else:
        major, minor = torch.cuda.get_device_capability()
        here = "sm_%d%d" % (major, minor)
        if arch is None:
            arch = here
        elif arch.rstrip("a") != here:
            warnings.warn("kernelevo.load_op(%s): loading the %s entry on a %s GPU: it was validated there, not here"
                          % (name, arch, here), stacklevel=2)
        kernel, reason, speedup = _usable_entry(task_json, name, cache_dir, arch, kernelevo)
        if kernel:
            try:
                op = _compile(task, kernel, arch, build_dir, verbose)
            except Exception as e:  # a kernel that does not build here is not used
                op, kernel, speedup, reason = None, None, None, "the cached %s kernel did not build: %s" % (
                    arch, " ".join(str(e).split())[:400])
    if op is None:
        warnings.warn("kernelevo.load_op(%s): running the reference (the traced model): %s" % (name, reason),
                      stacklevel=2)
    module = KernelEvoOp(task_dir, task, side, reference, weights, op=op, kernel=kernel, reason=reason or "",
                         speedup=speedup)
    entry = library.register(module)
    module.operator = entry["api"] if entry else None
    return module
