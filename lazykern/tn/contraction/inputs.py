"""What a caller gives a contraction, checked: subscripts parsed into labels (:func:`parse`), label sizes, the
semiring, one dtype. ``Label``: any hashable axis name.
"""

from __future__ import annotations

import numbers
from collections.abc import Hashable, Sequence

import numpy as np

from ...tropical import reference
from .._backend import Backend
from .._contract import Algebra, Term

Label = Hashable


# Any character labels an axis except these, as in opt_einsum (whose get_symbol(i) gives
# non-letters such as '×' past a few hundred axes): NumPy's letters-only rule would refuse them.
_NOT_LABELS = frozenset(",->.")


def parse(subscripts: str, count: int) -> tuple[list[tuple[str, ...]], tuple[str, ...]]:
    """NumPy einsum subscripts -> (labels per operand, output labels); implicit output as NumPy's."""
    if not isinstance(subscripts, str):
        raise TypeError(f"subscripts must be a str such as 'ij,jk->ik', got {type(subscripts).__name__}")
    text = subscripts.replace(" ", "")
    if "." in text:
        raise ValueError(f"tropical.einsum does not support ellipsis ('...'): {subscripts!r}; name every axis")
    lhs, arrow, rhs = text.partition("->")
    inputs = [tuple(t) for t in lhs.split(",")] if lhs or count else []
    if len(inputs) != count:
        raise ValueError(f"subscripts {subscripts!r} name {len(inputs)} operands but {count} were given")
    for t in inputs + [tuple(rhs)]:
        for c in t:
            if c in _NOT_LABELS or c.isspace():
                raise ValueError(
                    f"subscripts {subscripts!r}: {c!r} cannot be an axis label; use letters, or "
                    "opt_einsum.get_symbol(i) for more than 52 axes"
                )
    if arrow:
        output = tuple(rhs)
        if len(set(output)) != len(output):
            raise ValueError(f"subscripts {subscripts!r}: an output label repeats")
        missing = set(output) - {c for t in inputs for c in t}
        if missing:
            raise ValueError(f"subscripts {subscripts!r}: output labels {sorted(missing)} are in no operand")
    else:
        counts: dict[str, int] = {}
        for t in inputs:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        output = tuple(sorted(c for c, n in counts.items() if n == 1))
    return inputs, output


def check_sizes(inputs: Sequence[Sequence[Label]], output: Sequence[Label], sizes: dict[Label, int]) -> None:
    """Every label of ``inputs`` has a size, a positive int; every output label is in an input."""
    labels = {x for t in inputs for x in t}
    for lab in sorted(labels | set(output), key=str):
        if lab not in labels:
            raise ValueError(f"output label {lab!r} is in no input")
        size = sizes.get(lab)
        if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 0:
            raise ValueError(f"label {lab!r} needs a size, a non-negative int, in sizes; got {size!r}")


def check_semiring(semiring: str, algebra: type[Algebra]) -> str:
    if algebra.counting:
        if semiring not in ("maxplus", "minplus"):
            raise ValueError(f"counting supports semiring 'maxplus' or 'minplus', got {semiring!r}")
        return semiring
    return reference.check_semiring(semiring)


def check_dtypes(be: Backend, leaves: list[Term], also: tuple[np.dtype, ...] = ()) -> None:
    """One value dtype, the products' own (or Python ints on the host, or one of the algebra's ``also``)."""
    dtypes = {be.dtype(t.parts[0]) for t in leaves}
    if len(dtypes) > 1:
        raise TypeError(f"operands have dtypes {sorted(map(str, dtypes))}; convert them to one dtype")
    if be.on_host and any(d.kind == "O" for d in dtypes):  # Python ints: exact sums past int64 (tn/_exact.py)
        return
    if dtypes <= set(also):
        return
    reference.check_dtype(dtypes.pop(), "operands")
