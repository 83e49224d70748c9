"""A problem before it is traced: how get_inputs() draws its tensors (Recorder), its sizes shrunk for
a CPU machine (--max-numel), the model and its inputs built as KernelBench builds them, and tensor
factories on the meta device (shapes only, free)."""
import contextlib
import re

import torch
from torch import nn

from .common import Refused, ShrinkRefused, one_line


# ---- recording how get_inputs() draws its tensors -------------------------------------------------

class Recorder:
    """Wraps torch's generators while get_inputs() runs and remembers which tensor came from which
    (made on `device` when one is given and the call names none)."""

    def __init__(self, device=None):
        self.made = {}  # id(tensor) -> (tensor, init)
        self.device = device

    def _wrap(self, name, init_of):
        orig = getattr(torch, name)

        def fn(*args, **kwargs):
            if self.device is not None and kwargs.get("device") is None and not name.endswith("_like"):
                kwargs["device"] = self.device
            t = orig(*args, **kwargs)
            if isinstance(t, torch.Tensor):
                try:
                    init = init_of(args, kwargs)
                except Exception:
                    init = None
                if init is not None:
                    self.made[id(t)] = (t, init)
            return t
        return orig, fn

    @contextlib.contextmanager
    def active(self):
        def rand(a, k):
            return {"kind": "rand", "low": 0, "high": 1}

        def randn(a, k):
            return {"kind": "randn", "mean": 0, "std": 1}

        def randint(a, k):
            ints = [x for x in a if isinstance(x, int) and not isinstance(x, bool)]
            low = k.get("low", ints[0] if len(ints) >= 2 else 0)
            high = k.get("high", ints[1] if len(ints) >= 2 else ints[0])
            return {"kind": "randint", "low": int(low), "high": int(high)}

        def const(kind):
            return lambda a, k: {"kind": kind}

        table = {"rand": rand, "randn": randn, "randint": randint, "rand_like": rand, "randn_like": randn,
                 "ones": const("ones"), "zeros": const("zeros"), "ones_like": const("ones"),
                 "zeros_like": const("zeros")}
        saved = {}
        for name, init_of in table.items():
            orig, fn = self._wrap(name, init_of)
            saved[name] = orig
            setattr(torch, name, fn)
        # Moves and casts keep the distribution: torch.rand(...).cuda(), .to(dtype), .float(), ...
        methods = {}
        for name in ("cuda", "to", "float", "double", "half", "bfloat16", "contiguous", "clone"):
            orig = getattr(torch.Tensor, name)
            methods[name] = orig

            def keep(t, *a, __orig=orig, **k):
                out = __orig(t, *a, **k)
                hit = self.made.get(id(t))
                if isinstance(out, torch.Tensor) and hit is not None and hit[0] is t:
                    self.made[id(out)] = (out, hit[1])
                return out
            setattr(torch.Tensor, name, keep)
        try:
            yield self
        finally:
            for name, orig in saved.items():
                setattr(torch, name, orig)
            for name, orig in methods.items():
                setattr(torch.Tensor, name, orig)

    def init_of(self, t):
        hit = self.made.get(id(t))
        return hit[1] if hit is not None and hit[0] is t else None


# ---- shrinking (CPU machines: --max-numel) ------------------------------------------------------------

NOT_A_SIZE = re.compile(r"kernel|stride|pad|dilation|group|head|axis|^k$|scale|factor|eps|momentum|seed", re.I)
# The order sizes shrink in (issue 40): the batch first (down to BATCH_FLOOR, so a kernel that ignores
# the batch index still fails), then spatial and sequence sizes, then the sizes tied to the model's
# structure and what it reduces over (features, channels, a softmax's row `dim`; divisibility by
# groups, bias and norm shapes), which are kept as long as possible.
BATCH = re.compile(r"batch|^bs$", re.I)
STRUCTURAL = re.compile(r"channel|feature|hidden|embed|_shape$|_size$|^C$|^num_|^dim$|_dim$|^d_?model$", re.I)
BATCH_FLOOR = 2
SIZE_FLOOR = 16  # other sizes: only values >= 16 are halved


def input_numel(mod):
    """Elements of get_inputs() without allocating them (meta tensors)."""
    return sum(x.numel() for x in _meta_inputs(mod))


def parameter_numel(mod):
    """Elements of the model's parameters and buffers without allocating them (the model built on the
    meta device); 0 where it cannot be built there (then only the inputs bound the shrinking)."""
    try:
        with on_meta():
            model = mod.Model(*mod.get_init_inputs())
        if not isinstance(model, nn.Module):
            return 0
        return sum(t.numel() for t in list(model.parameters()) + list(model.buffers()))
    except Exception:
        return 0


def shrunk_numel(mod, limit):
    """import.json's `shrunk_numel` beside `shrunk`: the elements of the inputs and of the model's
    parameters and buffers at the shrunk sizes, and the limit they were shrunk to (--max-numel, or
    16x and 256x it on a retry), which they exceed only where nothing was left to halve."""
    try:
        inputs = input_numel(mod)
    except Exception:
        inputs = 0
    return {"inputs": inputs, "parameters": parameter_numel(mod), "limit": limit}


def size_tier(name):
    """0: batch, 1: spatial and sequence sizes, 2: channels, features, reduced dims; None: not a size."""
    if name.startswith("_") or NOT_A_SIZE.search(name):
        return None
    if BATCH.search(name):
        return 0
    return 2 if STRUCTURAL.search(name) else 1


def halvable_in(tier):
    return (lambda e: e // 2 >= BATCH_FLOOR) if tier == 0 else (lambda e: e >= SIZE_FLOOR)


def shrink(mod, max_numel, joint=False):
    """Halves the module's size constants until the inputs and the model's parameters and buffers
    together hold <= max_numel elements (issue 51: a Linear's features made its weight 4 GB), tier
    by tier (size_tier: the batch, then spatial and sequence sizes, then channels and features); within a
    tier the largest value first, everywhere it appears in that tier (integers and tuples of
    integers), so sizes that were equal stay equal. `joint`: everywhere it appears in any tier (the
    retry for a problem whose batch must equal another size, as HingeLoss's broadcast of
    (batch, *input_shape) by (batch,) needs). Returns {name: (old, new)}."""
    changed = {}

    def candidates(tier=None):
        for k, v in vars(mod).items():
            if size_tier(k) is None or (tier is not None and size_tier(k) != tier):
                continue
            if isinstance(v, int) and not isinstance(v, bool):
                yield k, v, [v]
            elif isinstance(v, (tuple, list)) and v and all(isinstance(e, int) and not isinstance(e, bool) for e in v):
                yield k, v, list(v)

    tier = 0
    for _ in range(400):
        try:
            if input_numel(mod) + parameter_numel(mod) <= max_numel:
                break
        except Exception:
            pass  # meta tensors unsupported by this get_inputs(): shrink until nothing is left to shrink
        values = [e for _, _, elems in candidates(tier) for e in elems if halvable_in(tier)(e)]
        if not values:
            if tier == 2:
                break
            tier += 1
            continue
        big = max(values)
        for k, v, elems in list(candidates(None if joint else tier)):
            if big not in elems or not halvable_in(size_tier(k))(big):
                continue
            new = v // 2 if isinstance(v, int) else type(v)(e // 2 if e == big else e for e in v)
            setattr(mod, k, new)
            changed[k] = (changed.get(k, (v,))[0], new)
    return changed


# ---- the meta device, the model and its inputs as KernelBench makes them -----------------------------

META_FACTORIES = ("empty", "zeros", "ones", "rand", "randn", "randint", "full", "tensor", "arange", "eye",
                  "empty_like", "zeros_like", "ones_like", "rand_like", "randn_like", "randint_like", "linspace")


@contextlib.contextmanager
def on_meta():
    """Tensor factories make meta tensors (shapes only): the model and get_inputs() at any size, free."""
    saved = {}
    for name in META_FACTORIES:
        orig = getattr(torch, name, None)
        if orig is None:
            continue
        saved[name] = orig

        def meta(*a, __orig=orig, **k):
            k["device"] = "meta"
            return __orig(*a, **k)
        setattr(torch, name, meta)
    try:
        yield
    finally:
        for name, orig in saved.items():
            setattr(torch, name, orig)


def _meta_inputs(mod):
    with on_meta():
        return [x for x in mod.get_inputs() if isinstance(x, torch.Tensor)]


def build_model(mod, shrunk_note=""):
    """The model, exactly as KernelBench builds it: seed 42, get_init_inputs(), seed 42, Model(*init)
    on the CPU."""
    try:
        torch.manual_seed(42)
        init = mod.get_init_inputs()
        torch.manual_seed(42)
        model = mod.Model(*init)
    except Exception as e:
        raise (ShrinkRefused if shrunk_note else Refused)("constructing the model failed%s: %s: %s" % (shrunk_note, type(e).__name__, one_line(e)))
    if not isinstance(model, nn.Module):
        raise Refused("Model(...) is not an nn.Module")
    return model


def draw_inputs(mod, args, seed, shrunk_note=""):
    """get_inputs() after torch.manual_seed(seed), recorded (Recorder): (inputs, recorder). On the GPU
    it draws there directly (drawing multi-GiB inputs on the CPU and copying them took most of an
    import); the values differ from KernelBench's CPU draws, the distribution does not, and an input
    stored as a file is the tensor that was used."""
    device = torch.device(args.device)
    for where in ([device, None] if args.device_kind == "cuda" else [None]):
        rec = Recorder(where)
        torch.manual_seed(seed)
        with rec.active():
            try:
                return list(mod.get_inputs()), rec
            except Exception as e:
                # Drawn on the GPU, a tensor may meet one made on the CPU (torch.arange): on the CPU then.
                failure = e
    e = failure
    raise (ShrinkRefused if shrunk_note else Refused)("get_inputs() failed%s: %s: %s" % (shrunk_note, type(e).__name__, one_line(e)))
