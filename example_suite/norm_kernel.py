"""A hand-written Triton kernel for ``test_fused_norm.py``: the residual add fused with RMSNorm,
as a decoder layer runs it between attention and MLP.  Imported on a GPU machine only (Triton
comes with PyTorch's CUDA builds)."""

import triton
import triton.language as tl


@triton.jit
def add_rmsnorm_kernel(x_ptr, residual_ptr, weight_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    """One row a program: residual += x, then out = residual / rms(residual) * weight."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    h = tl.load(x_ptr + row * n + cols, mask=mask, other=0.0).to(tl.float32) \
        + tl.load(residual_ptr + row * n + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(residual_ptr + row * n + cols, h.to(residual_ptr.dtype.element_ty), mask=mask)
    rstd = tl.rsqrt(tl.sum(h * h, axis=0) / n + eps)
    w = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * n + cols, (h * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def add_rmsnorm(x, residual, weight, out, eps=1e-6, max_registers=None):
    """``residual += x; out = rmsnorm(residual) * weight`` over the rows of 2-D contiguous
    tensors; ``max_registers`` caps the registers a thread may use (Triton's ``maxnreg``)."""
    rows, n = x.shape
    cap = {} if max_registers is None else {"maxnreg": max_registers}
    add_rmsnorm_kernel[(rows,)](x, residual, weight, out, n, eps, BLOCK=triton.next_power_of_2(n), num_warps=16, **cap)
    return out
