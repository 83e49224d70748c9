# Cheat fixture (gelu_bias task): right output, but scribbles over its input x: rejected.
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, bias_ptr, y_ptr, n_elements, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    v = tl.load(x_ptr + offs, mask=mask) + tl.load(bias_ptr + offs % N, mask=mask)
    tl.store(y_ptr + offs, 0.5 * v * (1.0 + tl.math.erf(v * 0.7071067811865476)), mask=mask)
    tl.store(x_ptr + offs, v, mask=mask)


KEVO_LAUNCH = {"kernel": "k", "args": {"x_ptr": "x", "bias_ptr": "bias", "y_ptr": "y", "n_elements": "M * N", "N": "N", "BLOCK": 1024},
               "grid": ("cdiv(M * N, BLOCK)",), "num_warps": 4}
