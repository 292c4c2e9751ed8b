"""A contraction path walked without running it: whether it contracts the network (:func:`check_path`), its largest
intermediate and multiply-adds (:func:`costs`), its steps as :mod:`lazykern.tn._cost` prices them
(:func:`plan_steps`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from typing import Any

from .. import _contract, _cost, _strided
from .inputs import Label


def check_path(path: Any, operands: int) -> list[tuple[int, ...]]:
    """``path`` (opt_einsum's positions: each step takes operands out of the list of those left and appends
    its result) as tuples, if it contracts ``operands`` operands into one; else a ValueError naming the
    step (a position out of range or repeated, a step of nothing, one left over)."""
    if isinstance(path, (str, bytes)) or not isinstance(path, (list, tuple)):
        raise ValueError(f"a contraction path is a list of tuples of operand positions, got {path!r}")
    out, live = [], operands
    for i, step in enumerate(path):
        try:
            positions = tuple(int(p) for p in step)
        except (TypeError, ValueError):
            raise ValueError(f"path step {i} is {step!r}: a tuple of operand positions") from None
        if not positions or len(set(positions)) != len(positions) or not all(0 <= p < live for p in positions):
            raise ValueError(
                f"path step {i} is {step!r}: positions must be distinct and below {live} (the operands left)"
            )
        out.append(positions)
        live -= len(positions) - 1
    if live != 1 and operands:
        raise ValueError(f"the path leaves {live} operands of {operands}, not one: it was made for another network")
    return out


def sub(sizes: dict[Label, int], labels: Sequence[Label]) -> dict[Label, int]:
    return {lab: sizes[lab] for lab in labels}


def costs(
    inputs: Sequence[Sequence[Label]],
    output: Collection[Label],
    sizes: dict[Label, int],
    path: Sequence[tuple[int, ...]],
    sliced: dict[Label, int],
) -> tuple[int, int]:
    """(entries of the largest intermediate, multiply-adds) of ``path``, as :meth:`Network.run` runs it
    (what :func:`plan_steps` gives in full, in one lean walk: candidates' costs are compared often)."""
    size = {k: (1 if k in sliced else v) for k, v in sizes.items()}
    nslices = math.prod(sliced.values())
    largest = flops = 0
    for _, union, kept, depends in walk(inputs, output, sliced, path):
        flops += math.prod(size[x] for x in union) * (nslices if depends else 1)
        largest = max(largest, math.prod(size[x] for x in kept))
    return largest, flops


def walk(
    inputs: Sequence[Sequence[Label]],
    output: Collection[Label],
    sliced: Collection[Label],
    path: Sequence[tuple[int, ...]],
) -> Iterator[tuple[list[set[Label]], set[Label], set[Label], bool]]:
    """Each step of ``path`` as :meth:`Network.run` takes it: its operands' labels, their union, the
    labels its result keeps, and whether it depends on the ``sliced`` labels."""
    output = set(output)
    terms = [(set(t), bool(set(sliced) & set(t))) for t in inputs]  # (labels, depends on the slice)
    uses = Counter(x for t, _ in terms for x in t)  # live terms carrying each label
    for step in path:
        picked = [terms[i] for i in step]
        for i in sorted(step, reverse=True):
            tally(uses, terms.pop(i)[0], -1)
        union = set().union(*(t for t, _ in picked))
        kept = {x for x in union if x in output or uses[x] > 0}
        depends = any(d for _, d in picked)
        yield [t for t, _ in picked], union, kept, depends
        terms.append((kept, depends))
        tally(uses, kept, 1)


def plan_steps(
    inputs: Sequence[Sequence[Label]],
    output: Collection[Label],
    sizes: dict[Label, int],
    path: Sequence[tuple[int, ...]],
    sliced: dict[Label, int],
) -> list[_cost.Step]:
    """The steps of ``path`` as :mod:`.._cost` prices them (entries per slice: sliced labels count 1).
    The last few plans' steps are kept: the solvers price one plan several times (a 32 x 32 energy
    chose its sweep by them, then guarded its memory; a count guards each of its passes), and a 3000-step
    walk costs a quarter of a second. The list returned is shared: callers copy, never change it."""
    key = (
        tuple(map(tuple, inputs)),
        tuple(output),
        frozenset(sizes.items()),
        tuple(path),
        frozenset(sliced.items()),
        _contract.STRIDED_MIN,  # which steps the executor runs bit-addressed
    )
    found = _steps_kept.get(key)
    if found is None:
        found = _plan_steps(inputs, output, sizes, path, sliced)
        if len(_steps_kept) >= _STEPS_KEPT:
            _steps_kept.pop(next(iter(_steps_kept)))  # the oldest
        _steps_kept[key] = found
    return found


_steps_kept: dict[tuple[Any, ...], list[_cost.Step]] = {}
_STEPS_KEPT = 8


def _plan_steps(
    inputs: Sequence[Sequence[Label]],
    output: Collection[Label],
    sizes: dict[Label, int],
    path: Sequence[tuple[int, ...]],
    sliced: dict[Label, int],
) -> list[_cost.Step]:
    size = {k: (1 if k in sliced else v) for k, v in sizes.items()}
    output = set(output)
    # (labels, depends on the slice, the step that made it: -1 for a leaf)
    terms = [(set(t), bool(sliced.keys() & set(t)), -1) for t in inputs]
    uses = Counter(x for t, _, _ in terms for x in t)  # live terms carrying each label
    steps: list[_cost.Step] = []
    for step in path:
        picked = [terms[i] for i in step]
        for i in sorted(step, reverse=True):
            tally(uses, terms.pop(i)[0], -1)
        union = set().union(*(t for t, _, _ in picked))
        kept = {x for x in union if x in output or uses[x] > 0}
        depends = any(d for _, d, _ in picked)
        operands = tuple(math.prod(size[x] for x in t) for t, _, _ in picked)
        # A sliced run caches the slice-independent operands of a slice-dependent step (Network.run).
        pinned = sum(n for n, (_, d, origin) in zip(operands, picked) if sliced and depends and not d and origin >= 0)
        result = math.prod(size[x] for x in kept)
        bits, tile = 0, (0, 0)
        if len(picked) == 2:  # bit-addressed; in place only over an intermediate of its own (no leaf, no cache)
            big, small = sorted(range(2), key=lambda i: -operands[i])
            labels, d, origin = picked[big]
            if operands[big] >= _contract.STRIDED_MIN:  # sliced labels are fixed in the run: no axis
                unsliced = [x for x in labels if x not in sliced], [x for x in picked[small][0] if x not in sliced]
                found = _strided.bits_tile(*unsliced, kept, sizes)
                if found is not None:
                    bits, tile = (2 if found[0] == found[1] else 1), found
            own = origin >= 0 and (not sliced or d)
            if bits == 2 and not (own and operands[big] == result):
                bits = 1
        steps.append(
            _cost.Step(
                math.prod(size[x] for x in union),
                operands,
                result,
                depends,
                pinned,
                tuple(origin < 0 for _, _, origin in picked),
                bits,
                tuple(origin for _, _, origin in picked),
                tile,
            )
        )
        terms.append((kept, depends, len(steps) - 1))
        tally(uses, kept, 1)
    return steps


def tally(uses: Counter[Label], labels: Any, by: int) -> None:
    """Counter.update / subtract for a few labels, without their per-call type checks (a tenth of a
    second over the steps of a 32 x 32 lattice)."""
    for x in labels:
        uses[x] += by
