# Failure fixture (gelu_bias task): the launch description forgets the parameter N and passes a
# string to the constexpr BLOCK: a compile_error that says what to write, before any Triton runs.
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, bias_ptr, y_ptr, n_elements, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n_elements), mask=offs < n_elements)


KEVO_LAUNCH = {"kernel": "k", "args": {"x_ptr": "x", "bias_ptr": "bias", "y_ptr": "y", "n_elements": "M * N", "BLOCK": 1024},
               "grid": ("cdiv(M * N, BLOCK)",), "num_warps": 4}
