"""The labels an argmax did not see: those the host's small steps summed away before the device's run.

A ground state on a GPU contracts the plan's small steps over leaves on the host first (:func:`._shared.split`),
as the energy does, and backtracks the shorter network on the device: its assignment names every label a
piece the host made still carries, not those the pieces summed inside themselves (56 of a 32 x 32 lattice's
1024 spins). Those are independent given the rest: a label summed inside one piece appears in no other, so
with every assigned label fixed the network falls apart into the pieces' own small remainders, and the best
of each completes a best configuration of the whole (the pieces' values are those remainders' maxima).

>>> import numpy as np
>>> labels = [(0, 1), (1, 2), (2,)]
>>> tensors = [np.array([[0.0, 1.0], [1.0, 0.0]]), np.array([[0.0, 2.0], [2.0, 0.0]]), np.array([0.0, 3.0])]
>>> complete_argmax(labels, tensors, {0: 0, 2: 1})   # label 1 summed away on the host: its best given 0 and 2
{0: 0, 2: 1, 1: 0}
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import numpy as np

from .einsum import network_argmax

Label = Hashable


def complete_argmax(
    labels: Sequence[Sequence[Label]],
    tensors: Sequence[np.ndarray],
    assignment: Mapping[Label, int],
    semiring: str = "maxplus",
) -> dict[Label, int]:
    """``assignment`` with every label of the host network (``labels``, NumPy ``tensors``) it lacks set to
    a best value given it: the network conditioned on ``assignment``, its argmax taken on the host."""
    out = dict(assignment)
    rest_labels: list[tuple[Label, ...]] = []
    rest: list[np.ndarray] = []
    for lab, t in zip(labels, tensors):
        free = tuple(x for x in lab if x not in out)
        if free:
            rest_labels.append(free)
            rest.append(np.asarray(t)[tuple(out[x] if x in out else slice(None) for x in lab)])
    if rest:
        _, found = network_argmax(rest_labels, (), rest, semiring=semiring, optimize="greedy")
        out.update(found)
    return out
