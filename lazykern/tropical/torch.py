"""PyTorch autograd for tropical products: ``matmul(A, B, semiring)``.

The forward pass keeps the argmax (only when a gradient is wanted) and the
backward pass runs lazykern's backward kernels on it (no torch scatter). CUDA
tensors run on torch's current stream; CPU tensors go through the NumPy
reference. Import this module only where torch is installed.
"""

from __future__ import annotations

import torch

from . import api

__all__ = ["matmul", "TropicalMatmul"]


class TropicalMatmul(torch.autograd.Function):
    """C = A (x) B in a tropical semiring; 2-D x 2-D, or batched when either is 3-D."""

    @staticmethod
    def forward(ctx, A: torch.Tensor, B: torch.Tensor, semiring: str) -> torch.Tensor:
        product = api.bmm if (A.dim() == 3 or B.dim() == 3) else api.matmul
        ctx.shapes = (tuple(A.shape), tuple(B.shape))
        if not (ctx.needs_input_grad[0] or ctx.needs_input_grad[1]):
            return product(A.detach(), B.detach(), semiring)
        C, K = product(A.detach(), B.detach(), semiring, argmax=True)
        ctx.save_for_backward(K)
        ctx.mark_non_differentiable(K)
        return C

    @staticmethod
    def backward(ctx, grad_C: torch.Tensor):
        (K,) = ctx.saved_tensors
        gA, gB = api.matmul_backward(grad_C.contiguous(), K, *ctx.shapes)
        return (gA if ctx.needs_input_grad[0] else None, gB if ctx.needs_input_grad[1] else None, None)


def matmul(A: torch.Tensor, B: torch.Tensor, semiring: str = "maxplus") -> torch.Tensor:
    """Differentiable tropical product (float tensors; integers have no gradient)."""
    return TropicalMatmul.apply(A, B, semiring)
