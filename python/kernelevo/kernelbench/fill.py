"""The inputs the self-check makes on both sides: which inputs a formula can make (generated) and the
validator's filler (tool/device/fill.h, value()) in torch (filler_values, refcheck_values), bit for bit
as kernelevo-refcheck makes them in C++."""
import torch

GEN_DTYPES = {"float32", "float64", "int32", "int64", "bool", "int8", "uint8"}


def generated(init, dtype, k):
    """How refcheck and this script both make input k (its init kind, a formula), or None (a file)."""
    if init is None or dtype not in GEN_DTYPES or init["kind"] not in ("rand", "randn", "randint", "ones", "zeros"):
        return None
    a, b = {"rand": ("low", "high"), "randint": ("low", "high"), "randn": ("mean", "std")}.get(init["kind"], (None, None))
    return {"kind": init["kind"], "seed": k + 1, "a": float(init.get(a, 0)), "b": float(init.get(b, 1))}


# The validator's filler (tool/device/fill.h, value()) in torch, for refcheck_values: the same
# formula and the same IEEE operations one at a time (int64 arithmetic wraps as uint64 does; float64
# +, -, *, tensor / tensor, sqrt and floor are exactly rounded on the CPU and on CUDA alike; no
# division by a scalar, which CUDA turns into a product with its reciprocal), so its bits are
# refcheck's. tests/device (HostFillIsPythonsRefcheckValues) compares them.
U64 = 1 << 64


def _s64(c):
    """A uint64 constant as the int64 with its bits."""
    return c - U64 if c >= 1 << 63 else c


def _srl(x, k):
    """Logical right shift of int64 bits."""
    return (x >> k) & ((1 << (64 - k)) - 1)


def _mix64(x):
    """splitmix64's finalizer (fill.h mix64): of an int64 tensor, or of a Python int."""
    if isinstance(x, int):
        x = (x + 0x9E3779B97F4A7C15) % U64
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) % U64
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) % U64
        return x ^ (x >> 31)
    x = x + _s64(0x9E3779B97F4A7C15)
    x = (x ^ _srl(x, 30)) * _s64(0xBF58476D1CE4E5B9)
    x = (x ^ _srl(x, 27)) * _s64(0x94D049BB133111EB)
    return x ^ _srl(x, 31)


def _uniform01(seed, i, lane):
    """fill.h uniform01: (k + 1) 2^-53 of element i's hash, in (0, 1]."""
    h = _mix64((i * 2 + lane) ^ _s64(_mix64(seed % U64)))
    return (_srl(h, 11) + 1).double() * 2.0 ** -53


def _horner(x, coefficients):
    p = torch.full_like(x, float.fromhex(coefficients[0]))
    for c in coefficients[1:]:
        p = p * x + float.fromhex(c)
    return p


_LN_SERIES = ["0x1.8618618618618p-5", "0x1.af286bca1af28p-5", "0x1.e1e1e1e1e1e1ep-5", "0x1.1111111111111p-4",
              "0x1.3b13b13b13b14p-4", "0x1.745d1745d1746p-4", "0x1.c71c71c71c71cp-4", "0x1.2492492492492p-3",
              "0x1.999999999999ap-3", "0x1.5555555555555p-2"]
_COS_SERIES = ["-0x1.6827863b97d97p-53", "0x1.ae7f3e733b81fp-45", "-0x1.93974a8c07c9dp-37", "0x1.1eed8eff8d898p-29",
               "-0x1.27e4fb7789f5cp-22", "0x1.a01a01a01a01ap-16", "-0x1.6c16c16c16c17p-10", "0x1.5555555555555p-5",
               "-0x1.0p-1", "0x1.0p+0"]
_SIN_SERIES = ["0x1.952c77030ad4ap-49", "-0x1.ae7f3e733b81fp-41", "0x1.6124613a86d09p-33", "-0x1.ae64567f544e4p-26",
               "0x1.71de3a556c734p-19", "-0x1.a01a01a01a01ap-13", "0x1.1111111111111p-7", "-0x1.5555555555555p-3"]


def _ln_unit(x):
    """fill.h ln_unit: ln x through the exponent bits and the atanh series."""
    bits = x.view(torch.int64)
    e = (((bits >> 52) & 0x7FF) - 1023).double()
    m = ((bits & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000).view(torch.float64)
    big = m > float.fromhex("0x1.6a09e667f3bcdp+0")
    m = torch.where(big, m * 0.5, m)
    e = torch.where(big, e + 1.0, e)
    s = (m - 1.0) / (m + 1.0)
    z = s * s
    half_ln_m = s + s * (z * _horner(z, _LN_SERIES))
    return e * float.fromhex("0x1.62e42fee00000p-1") + (e * float.fromhex("0x1.a39ef35793c76p-33") + half_ln_m * 2.0)


def _cos_2pi(w):
    """fill.h cos_2pi: cos(2 pi w) by quadrant and Taylor polynomials on [0, pi/4]."""
    t = w * 4.0
    q = torch.floor(t)
    f = t - q
    swap = f > 0.5
    x = torch.where(swap, 1.0 - f, f) * float.fromhex("0x1.921fb54442d18p+0")
    x2 = x * x
    c = _horner(x2, _COS_SERIES)
    s = x + (x * x2) * _horner(x2, _SIN_SERIES)
    quadrant = q.to(torch.int64) & 3
    magnitude = torch.where((quadrant & 1).bool() != swap, s, c)
    return torch.where((quadrant == 1) | (quadrant == 2), -magnitude, magnitude)


def filler_values(kind, seed, a, b, i):
    """fill.h value(seed, i, kind, a, b) of the int64 indices i, as float64."""
    if kind == "randn":
        r = torch.sqrt(_ln_unit(_uniform01(seed, i, 0)) * -2.0)
        return (r * _cos_2pi(_uniform01(seed, i, 1))) * b + a
    if kind in ("rand", "randint"):
        v = (1.0 - _uniform01(seed, i, 0)) * (b - a) + a
        return v if kind == "rand" else torch.clamp(torch.floor(v), max=b - 1.0)
    return torch.full(i.shape, 1.0 if kind == "ones" else 0.0, dtype=torch.float64, device=i.device)


FILL_CHUNK = 1 << 22  # elements drawn at a time (a few dozen float64 temporaries each)


def refcheck_values(gen, shape, dtype, device):
    """The input refcheck.cpp makes for `gen` (see its make_values): the validator's filler."""
    n = 1
    for d in shape:
        n *= d
    out = torch.empty(n, dtype=dtype, device=device)
    for a in range(0, n, FILL_CHUNK):
        i = torch.arange(a, min(n, a + FILL_CHUNK), dtype=torch.int64, device=device)
        out[a:a + i.numel()] = filler_values(gen["kind"], gen["seed"], gen["a"], gen["b"], i).to(dtype)
    return out.reshape(shape)
