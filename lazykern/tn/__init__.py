"""Tropical tensor networks: einsum over a semiring, contraction plans, exact counting, spin glasses.

Built on the semiring products of :mod:`lazykern.tropical` (each contraction step is one batched
tropical product), this package plans and runs whole networks:

* :mod:`.einsum`: :func:`einsum` / :func:`argmax_einsum` with orders from opt_einsum, cotengra or
  the network's geometry, sliced so a contraction's predicted peak fits the device
  (:func:`contraction_plan` says what an order costs, in seconds and bytes: :mod:`._cost`);
* :mod:`.counting`: (optimum, count) numbers, counts exact as Python integers (residues and the
  Chinese remainder theorem, :mod:`._crt`);
* :mod:`.networks`: Ising spin glasses from a user's own edge list (checked by :mod:`._instance`):
  ground-state energies, configurations, degeneracies;
* :mod:`.orders`: contraction orders read off the graph, whatever its numbering;
* :func:`solve` (:mod:`.solver`): GenericTensorNetworks' properties (:mod:`.properties`) of the
  combinatorial problems of :mod:`.problems`, each in its algebra (:mod:`.algebras`);
* ``keep_workers()``: with ``devices=``, a call's worker processes (one per other GPU) end with the call;
  inside ``with lazykern.tn.keep_workers():`` they are kept for the next one.

The documented paths ``lazykern.tropical.einsum``, ``.counting``, ``.networks`` and ``.orders`` are these
very modules, and ``lazykern.tropical.einsum`` & co. these functions.
"""

from __future__ import annotations

from typing import Any

from .. import tropical  # noqa: F401  (first: tropical's __init__ imports .einsum back for its re-exports)
from .einsum import ContractionPlan, argmax_einsum, contraction_plan, einsum

__all__ = [
    "ContractionPlan", "argmax_einsum", "contraction_plan", "einsum", "keep_workers", "problems", "properties", "solve",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    """``solve``, ``problems`` and ``properties`` are imported on first use (``import lazykern.tn`` stays
    as light as it was)."""
    if name == "solve":
        from .solver import solve

        return solve
    if name == "keep_workers":  # devices=: keep the worker processes of other GPUs between calls
        from ._procs import keep_warm

        return keep_warm
    if name in ("problems", "properties"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
