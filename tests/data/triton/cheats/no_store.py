# Cheat fixture (gelu_bias task): computes but never stores, hoping the output buffer already
# holds the answer. The validator poisons outputs before each run: mismatch.
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, bias_ptr, y_ptr, n_elements, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    v = tl.load(x_ptr + offs, mask=mask) + tl.load(bias_ptr + offs % N, mask=mask)
    v = v * 0.5


KEVO_LAUNCH = {"kernel": "k", "args": {"x_ptr": "x", "bias_ptr": "bias", "y_ptr": "y", "n_elements": "M * N", "N": "N", "BLOCK": 1024},
               "grid": ("cdiv(M * N, BLOCK)",), "num_warps": 4}
