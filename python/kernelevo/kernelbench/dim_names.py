"""Names of a task's dimensions: by role (each module constant varied on the meta device), else by
value (a size that repeats across the tensors)."""
import re
import warnings

import torch

from .common import one_line
from .problem import on_meta
from .trace import flat_outputs, slots_of

def dims_with_names(shapes, mod):
    """Names for sizes that repeat across the tensors: the problem's constant of that value when
    there is one, else d<size>. Returns {size: name}."""
    count = {}
    for shape in shapes:
        for s in shape:
            count[s] = count.get(s, 0) + 1
    consts = {}
    for k, v in vars(mod).items():
        if isinstance(v, int) and not isinstance(v, bool) and not k.startswith("_") and re.match(r"^[A-Za-z_]\w*$", k):
            consts.setdefault(v, k)
    names, used = {}, set()
    for s, c in sorted(count.items()):
        if c < 2 or s <= 1:
            continue
        name = consts.get(s, "d%d" % s)
        if name in used:
            name = "d%d" % s
        used.add(name)
        names[s] = name
    return names


def meta_shapes(mod):
    """Shapes of the inputs, parameters and buffers, and outputs, in task order, built on meta."""
    with on_meta(), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mod.Model(*mod.get_init_inputs())
        raw = list(mod.get_inputs())
        ins = [x for x in raw if isinstance(x, torch.Tensor)]
        outs = flat_outputs(model(*raw))
    return [list(t.shape) for t in ins + [t for _, t in slots_of(model)] + outs]


def size_constants(mod):
    """(name, setter, value) of every module-level integer (and integer in a tuple) that may be a size."""
    out = []
    for k, v in list(vars(mod).items()):
        if k.startswith("_") or not re.match(r"^[A-Za-z_]\w*$", k):
            continue
        if isinstance(v, int) and not isinstance(v, bool) and v > 1:
            out.append((k, (lambda val, k=k: setattr(mod, k, val)), v))
        elif isinstance(v, (tuple, list)) and v and all(isinstance(e, int) and not isinstance(e, bool) for e in v):
            for i, e in enumerate(v):
                if e > 1:
                    def put(val, k=k, i=i, v=v):
                        new = list(v)
                        new[i] = val
                        setattr(mod, k, type(v)(new))
                    out.append(("%s_%d" % (k, i), put, e))
    return out[:48]


def role_names(mod, shapes):
    """Names each dimension after the problem's constant that it follows: a dimension of size v is
    named k when it equals constant k (= v) and doubles with it (checked on the meta device, one
    constant at a time); equal values of different roles stay apart. Dimensions that follow no
    constant alone stay literal. Returns ([[name or int per dim] per tensor], {name: value}, note)."""
    try:
        base = meta_shapes(mod)
    except Exception as e:
        return None, None, "shapes on the meta device failed (%s: %s)" % (type(e).__name__, one_line(e, 120))
    if base != [list(s) for s in shapes]:
        return None, None, "shapes on the meta device differ from the real ones"
    claims = {}  # (tensor, axis) -> [constant names]

    def vary(group, v):
        """The shapes with the constants of `group` (all equal to v) doubled, or None."""
        for _, put in group:
            put(v * 2)
        try:
            moved = meta_shapes(mod)
        except Exception:
            return None
        finally:
            for _, put in group:
                put(v)
        return moved if [len(s) for s in moved] == [len(s) for s in base] else None

    def claim(name, moved, v):
        for i, (a, b) in enumerate(zip(base, moved)):
            for j, (x, y) in enumerate(zip(a, b)):
                if x == v and y == 2 * v:
                    claims.setdefault((i, j), []).append(name)
    consts = size_constants(mod)
    failed = []
    for name, put, v in consts:
        moved = vary([(name, put)], v)
        if moved is None:
            failed.append((name, put, v))
        else:
            claim(name, moved, v)
    # Constants that must change together (out_channels and bias_shape = (out_channels, 1, 1)): each
    # failed one is varied with another failed one of the same value; the first in the file names them.
    for name, put, v in list(failed):
        for other, put2, v2 in failed:
            if other != name and v2 == v:
                moved = vary([(name, put), (other, put2)], v)
                if moved is not None:
                    claim(name, moved, v)
                    break
    failed = [n for n, _, _ in failed if not any(n in c for c in claims.values())]
    named = [[(claims[(i, j)][0] if (i, j) in claims and s > 1 else s) for j, s in enumerate(shape)]
             for i, shape in enumerate(base)]
    bound = {}
    for i, shape in enumerate(base):
        for j, s in enumerate(shape):
            if isinstance(named[i][j], str):
                bound[named[i][j]] = s
    note = "constants that could not be varied: " + ", ".join(failed) if failed else ""
    return named, bound, note
