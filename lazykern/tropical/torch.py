"""PyTorch autograd for tropical products: ``matmul(A, B, semiring)``.

The forward pass keeps the argmax (only when a gradient is wanted) and the
backward pass runs lazykern's backward kernels on it (no torch scatter). CUDA
tensors run on torch's current stream; CPU tensors go through the NumPy
reference. Import this module only where torch is installed.

Gradients: for max-plus and min-plus, dC[i,j]/dA[i,k] is 1 at the winning k
(``argmax[i,j] == k``) and 0 elsewhere, likewise for B. For max-times it is the
other factor: B[k,j] for A and A[i,k] for B, so the incoming gradient is first
multiplied by the winning factor (a torch gather) and then routed the same way.
"""

from __future__ import annotations

from typing import Any

import torch

from . import api

__all__ = ["matmul", "TropicalMatmul"]


class TropicalMatmul(torch.autograd.Function):  # type: ignore[misc]  # torch is Any to mypy (not followed)
    """C = A (x) B in a tropical semiring; 2-D x 2-D, or batched when either is 3-D."""

    @staticmethod
    def forward(ctx: Any, A: torch.Tensor, B: torch.Tensor, semiring: str) -> torch.Tensor:
        product = api.bmm if (A.dim() == 3 or B.dim() == 3) else api.matmul
        ctx.shapes = (tuple(A.shape), tuple(B.shape))
        ctx.semiring = semiring
        if not (ctx.needs_input_grad[0] or ctx.needs_input_grad[1]):
            return product(A.detach(), B.detach(), semiring)
        C, K = product(A.detach(), B.detach(), semiring, argmax=True)
        ctx.mark_non_differentiable(K)
        if semiring == "maxmul":
            ctx.save_for_backward(K, A.detach(), B.detach())
        else:
            ctx.save_for_backward(K)
        return C

    @staticmethod
    def backward(ctx: Any, grad_C: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:
        K, *operands = ctx.saved_tensors
        grad_C = grad_C.contiguous()
        if ctx.semiring != "maxmul":
            gA, gB = api.matmul_backward(grad_C, K, *ctx.shapes)
        else:
            A, B = operands
            gA = gB = None
            if ctx.needs_input_grad[0]:  # dC/dA[i,k] = B[k,j] at the winner
                gA = api.matmul_backward((grad_C * _winning(B, K, rows=True)).contiguous(), K, *ctx.shapes)[0]
            if ctx.needs_input_grad[1]:  # dC/dB[k,j] = A[i,k] at the winner
                gB = api.matmul_backward((grad_C * _winning(A, K, rows=False)).contiguous(), K, *ctx.shapes)[1]
        return (gA if ctx.needs_input_grad[0] else None, gB if ctx.needs_input_grad[1] else None, None)


def _winning(X: torch.Tensor, K: torch.Tensor, *, rows: bool) -> torch.Tensor:
    """The factor of X each C[.., i, j] took: B[k*, j] (``rows``) or A[i, k*], with k* = K[.., i, j]."""
    index = K.long().clamp_min(0)
    batched = K.dim() == 3
    if X.dim() == 2 and batched:
        X = X.expand(K.shape[0], *X.shape)
    if not batched:
        X, index = X.unsqueeze(0), index.unsqueeze(0)
    out = torch.gather(X, 1 if rows else 2, index)
    return out if batched else out.squeeze(0)


def matmul(A: torch.Tensor, B: torch.Tensor, semiring: str = "maxplus") -> torch.Tensor:
    """Differentiable tropical product (float tensors; integers have no gradient)."""
    return TropicalMatmul.apply(A, B, semiring)
