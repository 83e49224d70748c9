# A Triton candidate for tests/data/gelu_bias/task.json: y = gelu(x + bias), exact (erf) GELU.
import triton
import triton.language as tl


@triton.jit
def gelu_bias_kernel(x_ptr, bias_ptr, y_ptr, n_elements, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(bias_ptr + offs % N, mask=mask)
    v = x + b
    y = 0.5 * v * (1.0 + tl.math.erf(v * 0.7071067811865476))
    tl.store(y_ptr + offs, y, mask=mask)


KEVO_LAUNCH = {
    "kernel": "gelu_bias_kernel",
    "args": {
        "x_ptr": "x",            # task tensors: their data pointers
        "bias_ptr": "bias",
        "y_ptr": "y",
        "n_elements": "M * N",   # expressions of the task's dimensions (i32)
        "N": "N",
        "BLOCK": 1024,           # tl.constexpr
    },
    "hints": {"x_ptr": 16, "bias_ptr": 16, "y_ptr": 16, "n_elements": 16},
    "grid": ("cdiv(M * N, BLOCK)",),
    "num_warps": 4,
    "num_stages": 1,
}
