# A Triton candidate for row_softmax_task.json: softmax over the last dimension, one program per
# row, an online max/sum pass and a normalizing pass over BLOCK-wide chunks (any row length).
import triton
import triton.language as tl


@triton.jit
def row_softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < n_cols, other=float("-inf"))
        m_new = tl.maximum(m, x)
        alive = m_new != float("-inf")
        s = tl.where(alive, s * tl.exp(m - m_new) + tl.exp(x - m_new), 0.0)
        m = m_new
    row_max = tl.max(m, 0)
    row_sum = tl.sum(tl.where(m != float("-inf"), s * tl.exp(m - row_max), 0.0), 0)
    inv = 1.0 / row_sum
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=float("-inf"))
        tl.store(y_row + offs, tl.exp(x - row_max) * inv, mask=mask)


KEVO_LAUNCH = {
    "kernel": "row_softmax_kernel",
    "args": {"x_ptr": "x", "y_ptr": "y", "n_cols": "N", "BLOCK": 1024},
    "hints": {"x_ptr": 16, "y_ptr": 16, "n_cols": 16},
    "grid": ("M",),
    "num_warps": 8,
    "num_stages": 2,
}
