# Failure fixture (gelu_bias task): a Triton compile error (tl.exp2x does not exist); the error
# must come back from Triton's compiler as a compile_error for the repair loop.
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, bias_ptr, y_ptr, n_elements, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    v = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.exp2x(v), mask=mask)


KEVO_LAUNCH = {"kernel": "k", "args": {"x_ptr": "x", "bias_ptr": "bias", "y_ptr": "y", "n_elements": "M * N", "N": "N", "BLOCK": 1024},
               "grid": ("cdiv(M * N, BLOCK)",), "num_warps": 4}
