# Cheat fixture (gelu_bias task): launches one program whatever the size: only the first 1024
# elements are right (passes a tiny shape set only): mismatch.
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, bias_ptr, y_ptr, n_elements, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n_elements
    v = tl.load(x_ptr + offs, mask=mask) + tl.load(bias_ptr + offs % N, mask=mask)
    tl.store(y_ptr + offs, 0.5 * v * (1.0 + tl.math.erf(v * 0.7071067811865476)), mask=mask)


KEVO_LAUNCH = {"kernel": "k", "args": {"x_ptr": "x", "bias_ptr": "bias", "y_ptr": "y", "n_elements": "M * N", "N": "N", "BLOCK": 1024},
               "grid": (1,), "num_warps": 4}
