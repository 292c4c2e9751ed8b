"""A network sent to a worker process as host arrays and rebuilt there (:func:`ship`, :func:`unship`), for a spread of
slices over devices (:mod:`lazykern.tn._spread`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from .._backend import backend_of
from .._contract import Algebra, Term
from .network import Network


def ship(net: Network) -> dict[str, Any] | None:
    """``net`` as a worker process rebuilds it (:func:`unship`): its leaves as host arrays (as the algebra
    prepared them), labels, sizes, output, semiring and algebra. None for an algebra another process cannot
    name (a class made at run time other than a counting ring): such a spread keeps its threads."""
    alg = type(net.alg)
    recipe: Any
    moduli = tuple(getattr(alg, "moduli", ()))
    if getattr(alg, "counting", False) and moduli:
        recipe = ("counting", moduli)
    elif getattr(importlib.import_module(alg.__module__), alg.__qualname__, None) is alg:
        recipe = alg
    else:
        return None
    return {
        "semiring": net.alg.semiring,
        "algebra": recipe,
        "leaves": [(tuple(net.be.to_host(p) for p in t.parts), t.labels) for t in net.leaves],
        "output": net.output,
        "sizes": net.sizes,
    }


def unship(shipped: dict[str, Any], to_module: Callable[[Any], Any], algebra: type[Algebra]) -> Network:
    """The network :func:`ship` described, its leaves made arrays of this process by ``to_module``, in
    ``algebra`` (the class ``shipped["algebra"]`` names: the caller resolves a counting ring's recipe)."""
    leaves = [Term(tuple(to_module(p) for p in parts), labels) for parts, labels in shipped["leaves"]]
    be, _ = backend_of(leaves[0].parts[0])
    alg = algebra(shipped["semiring"], be, False)
    alg.rank = {lab: i for i, lab in enumerate(shipped["sizes"])}
    return Network(be, alg, leaves, tuple(shipped["output"]), dict(shipped["sizes"]))
