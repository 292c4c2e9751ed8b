""":class:`Operands`, the state every stage reads: a network's operands checked and prepared by the algebra
(:meth:`Operands.build`), the steps its last run recorded (:class:`Node`), the last plan's priced steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .. import _cost, _recompute
from .._backend import Backend, backend_of
from .._contract import Algebra, Choice, Term, diagonals, fix
from .inputs import Label, check_dtypes, check_semiring
from .paths import plan_steps
from .plan import ContractionPlan

_Built = TypeVar("_Built", bound="Operands")


@dataclass
class Node:
    """A step of a run: "pair" or "reduce", its children (ids below len(leaves) are
    leaves), the labels of its result, and what it chose (when kept)."""

    kind: str
    children: tuple[int, ...]
    labels: tuple[Label, ...]
    choice: Choice | None


@dataclass
class Operands:
    """The state every part of a network's contraction reads (:class:`.network.Network` adds the
    planning, the executor and the checkpoints): ``leaves`` (one term per operand, as the algebra
    prepared it), ``output`` and ``sizes`` (label -> size); ``nodes``, ``root`` and ``saved``, the
    last run's record; ``memo`` and ``bare``, what the last plan's pricing found."""

    be: Backend
    alg: Algebra
    leaves: list[Term]
    output: tuple[Label, ...]
    sizes: dict[Label, int]
    nodes: dict[int, Node] = field(default_factory=dict)
    root: int = 0
    saved: dict[int, Term] = field(default_factory=dict)  # node -> its values, the backtracking's checkpoints
    # The last plan's priced steps and tree: the argmax split prices one plan a hundred times.
    memo: tuple[ContractionPlan, list[_cost.Step], _recompute.Tree] | None = field(default=None, repr=False)
    # The last plan's peak profile keeping no argmax (:class:`.._cost.ArgmaxPeak`), with the leaves' entries.
    bare: tuple[ContractionPlan, int, tuple[list[int], list[int]]] | None = field(default=None, repr=False)
    # The last plan's predicted peaks by their arguments (a count asks for each width a pass might carry).
    peaks: dict[tuple[Any, ...], Any] = field(default_factory=dict, repr=False)

    @classmethod
    def build(
        cls: type[_Built],
        inputs: Sequence[Sequence[Label]],
        output: Sequence[Label],
        operands: Sequence[Any],
        semiring: str,
        algebra: type[Algebra],
        fixed: dict[Label, int] | None = None,
    ) -> _Built:
        semiring = check_semiring(semiring, algebra)
        if not operands:
            raise ValueError("einsum needs at least one operand")
        inputs = [tuple(t) for t in inputs]
        if len(inputs) != len(operands):
            raise ValueError(f"{len(inputs)} label lists for {len(operands)} operands")
        be, leaves, sizes, grad = None, [], {}, False
        for i, (labels, op) in enumerate(zip(inputs, operands)):
            parts = tuple(op) if algebra.nparts > 1 and isinstance(op, tuple) else (op,)
            wrapped = []
            for p in parts:
                b, arr = backend_of(p)
                if be is not None and b.name != be.name:
                    raise TypeError(f"operand {i} is a {b.name} array but operand 0 is {be.name}: use one library")
                be = be or b
                wrapped.append(arr)
            grad = grad or (be.name == "torch" and any(getattr(p, "requires_grad", False) for p in wrapped))
            shape = tuple(int(n) for n in wrapped[0].shape)
            if len(shape) != len(labels):
                raise ValueError(f"operand {i} has {len(shape)} axes but its subscripts name {len(labels)}")
            for lab, n in zip(labels, shape):
                if sizes.setdefault(lab, n) != n:
                    raise ValueError(f"label {lab!r} has size {sizes[lab]} in one operand and {n} in operand {i}")
            leaves.append(Term(algebra.prepare(be, tuple(wrapped), i), labels))
        check_dtypes(be, leaves, algebra.values_also)
        missing = set(output) - set(sizes)
        if missing:
            raise ValueError(f"output labels {sorted(map(str, missing))} are in no operand")
        for lab, v in (fixed or {}).items():
            if not 0 <= v < sizes[lab]:
                raise ValueError(f"at: position {v} of label {lab!r} is outside its size {sizes[lab]}")
        if fixed:
            leaves = [fix(be, t, fixed) for t in leaves]
            sizes = {k: v for k, v in sizes.items() if k not in fixed}
        alg = algebra(semiring, be, grad)
        alg.rank = {lab: i for i, lab in enumerate(sizes)}
        return cls(be, alg, [diagonals(be, t) for t in leaves], tuple(output), sizes)

    @property
    def entry_bytes(self) -> int:
        """Bytes per entry of every array of the run (value and count together when counting)."""
        return sum(self.be.dtype(p).itemsize for p in self.leaves[0].parts)

    @property
    def inplace(self) -> bool:
        """Whether the executor runs bit-addressed steps, some over their operand (:func:`.._contract.contract`)."""
        return hasattr(self.alg, "bits") and not self.be.on_host

    def priced(self, plan: ContractionPlan) -> tuple[list[_cost.Step], _recompute.Tree]:
        """``plan``'s steps as :mod:`.._cost` and :mod:`.._recompute` price them (the last plan's kept)."""
        if self.memo is None or self.memo[0] is not plan:
            inputs = [t.labels for t in self.leaves]
            steps = plan_steps(inputs, self.output, self.sizes, plan.path, plan.sliced)
            sized = {x: (1 if x in plan.sliced else n) for x, n in self.sizes.items()}
            self.memo = (plan, steps, _recompute.Tree(inputs, sized, plan.path))
            self.peaks = {}
        return self.memo[1], self.memo[2]
