""":class:`Executor`: a plan run step by step with the sliced labels fixed, the steps no slice changes reused, small
steps' argmax kept; a segment recomputed for the backtracking. :class:`Progress` logs a long run.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Sequence

from .._contract import Algebra, Choice, Term, contract, fix, reduce
from .inputs import Label
from .operands import Node, Operands
from .paths import tally
from .plan import ContractionPlan

log = logging.getLogger("lazykern")

NONE = -1  # run(keep=NONE): keep no argmax


class Executor(Operands):
    """The steps of a run (:class:`.network.Network`'s): the products and reductions, recorded as
    :class:`.operands.Node` for the backtracking."""

    def run(
        self,
        plan: ContractionPlan,
        values: dict[Label, int],
        keep: float,
        cache: dict[int, Term] | None = None,
        progress: Progress | None = None,
        save: frozenset[int] = frozenset(),
    ) -> Term:
        """Contract with the sliced labels fixed to ``values``; returns the root term. Keeps the
        argmax of the steps whose results have at most ``keep`` entries (``NONE``: none), and the
        values of the steps in ``save`` (:meth:`checkpoints`) in :attr:`saved`.

        ``cache`` (a dict kept across the slices of one plan): steps whose operands carry no
        sliced label give the same result in every slice; they run once, and only the last
        such step of each chain keeps its result for the later slices."""
        self.nodes, self.saved = {}, {}
        live = [(i, fix(self.be, t, values)) for i, t in enumerate(self.leaves)]
        fixed = set(values)
        origin: list[int | None] = [None if fixed.intersection(t.labels) else -1 for t in self.leaves]
        uses = Counter(x for _, t in live for x in t.labels)  # live terms carrying each label
        owned = [False] * len(live)  # whose arrays a step may overwrite: results nothing else holds
        output = set(self.output)
        progress = progress or Progress(1)
        for n, step in enumerate(plan.path):
            progress.step(n, len(plan.path))
            picked = [live[i] for i in step]
            sources = [origin[i] for i in step]  # None: depends on the slice; -1: a leaf; else a step
            mine = [owned[i] for i in step]
            for i in sorted(step, reverse=True):
                tally(uses, live.pop(i)[1].labels, -1)
                origin.pop(i)
                owned.pop(i)
            same = cache is not None and None not in sources
            if same and n in cache:
                node_id, term = -1, cache[n]  # cached steps run only where nothing is kept
            else:
                node_id, term = self._step(picked, uses, output, keep, mine)
                if n in save:
                    self.saved[node_id] = term
                if same:
                    cache[n] = term
                    for m in sources:
                        if m >= 0:  # superseded by step n: later slices skip it (its labels stay)
                            cache[m] = Term((), cache[m].labels)
            live.append((node_id, term))
            origin.append(n if same else None)
            owned.append(not same and n not in save)
            tally(uses, term.labels, 1)
        if len(live) != 1:
            raise ValueError(f"the contraction path leaves {len(live)} operands; it must contract all of them")
        self.root, term = self._reduce(*live[0], set(self.output), keep)
        if term is live[0][1] and not plan.path:  # one operand, no product ran ('i->i', 'ii->i'): NaN never wins
            term = self._without_nan(term)
        return term

    def _without_nan(self, term: Term) -> Term:
        """``term`` with its NaN values as the semiring zero (and count 0), as every product leaves them."""
        plain = type(self.alg) is Algebra or (self.alg.counting and self.alg.nparts == 2)  # (values, counts)
        if not plain or self.be.dtype(term.parts[0]).kind != "f":
            return term
        xp, values = self.be.xp, term.parts[0]
        nan = xp.isnan(values)
        if not bool(nan.any()):
            return term
        zero = math.inf if self.alg.semiring == "minplus" else -math.inf
        parts = (xp.where(nan, zero, values), *(xp.where(nan, 0, p) for p in term.parts[1:]))
        return Term(parts, term.labels)

    def shared_step(self, terms: Sequence[Term], uses: Counter[Label], owned: Sequence[bool]) -> Term:
        """One step of a plan outside :meth:`run`, as run's own step contracts it (:mod:`.._shared`: the steps
        every pass of a count shares): ``uses`` counts the labels of the live terms once ``terms`` are taken
        out; ``owned``: whose arrays the step may write over. No argmax is kept."""
        _, term = self._step([(-1, t) for t in terms], uses, set(self.output), NONE, owned)
        return term

    def _step(
        self,
        picked: list[tuple[int, Term]],
        uses: Counter[Label],
        output: set[Label],
        keep: float,
        owned: Sequence[bool] = (),
    ) -> tuple[int, Term]:
        """Contract the picked terms left to right, first summing out what only one of them carries.
        ``owned``: per picked term, whether its arrays may be overwritten (:func:`.._contract.contract`)."""
        mine = list(owned) or [False] * len(picked)
        (node_id, term), others = picked[0], picked[1:]
        needed = {x for x in term.labels if uses[x] > 0 or x in output} | _labels(others)
        reduced_id, term = self._reduce(node_id, term, needed, keep)
        ours = mine[0] or reduced_id != node_id  # a reduction's result is new
        node_id = reduced_id
        for j, (other_id, other) in enumerate(others):
            later = _labels(others[j + 1 :])
            needed = {x for x in term.labels + other.labels if uses[x] > 0 or x in output or x in later}
            node_id, term = self._pair(node_id, term, other_id, other, needed, keep, (ours, mine[j + 1]))
            ours = True
        return node_id, term

    def _add(self, kind: str, children: tuple[int, ...], term: Term, choice: Choice, keep: float) -> tuple[int, Term]:
        if choice.index is not None and math.prod(int(n) for n in term.parts[0].shape) > keep:
            choice = choice._replace(index=None)  # recomputed by the backtracking instead
        node_id = len(self.leaves) + len(self.nodes)
        self.nodes[node_id] = Node(kind, children, term.labels, choice)
        return node_id, term

    def _reduce(self, node_id: int, term: Term, needed: set[Label], keep: float) -> tuple[int, Term]:
        own = [x for x in term.labels if x not in needed]
        if not own:
            return node_id, term
        out, choice = reduce(self.alg, term, own, self._kept(term.labels, needed, keep))
        return self._add("reduce", (node_id,), out, choice, keep)

    def _pair(
        self,
        a_id: int,
        A: Term,
        b_id: int,
        B: Term,
        needed: set[Label],
        keep: float,
        owned: tuple[bool, bool] = (False, False),
    ) -> tuple[int, Term]:
        reduced_id, B = self._reduce(b_id, B, needed | set(A.labels), keep)
        owned = (owned[0], owned[1] or reduced_id != b_id)
        kept = self._kept(A.labels + B.labels, needed, keep)
        out, choice = contract(self.alg, A, B, needed, kept, owned)
        return self._add("pair", (a_id, reduced_id), out, choice, keep)

    def _kept(self, labels: tuple[Label, ...], needed: set[Label], keep: float) -> bool:
        """Whether a step over ``labels`` keeping ``needed`` keeps its argmax: only then is it asked for,
        since a product with argmax writes index and value into one buffer of twice the bytes."""
        return keep >= 0 and math.prod(self.sizes[x] for x in set(labels) & needed) <= keep

    def recompute(
        self, top: int, values: dict[Label, int], found: dict[int, tuple[tuple[Label, ...], Choice, int]], budget: float
    ) -> None:
        """Redo the subtree under node ``top`` (recorded by :meth:`run`) with ``values`` fixed, down to
        the leaves and the checkpoints (:attr:`saved`), and put in ``found`` the argmax of ``top`` and
        of the nodes below it whose choice was not kept, smallest first while ``found`` holds at most
        ``budget`` bytes (node -> labels of its fixed result, choice, bytes). The labels chosen so far
        are fixed, so the steps near ``top`` are small (the walk reads them next) and those far below
        are as large as in the run (left to a later segment, nearer its checkpoint); each
        intermediate is dropped at its use."""
        wanted = self._segment(top, values, budget - sum(entry[2] for entry in found.values()))
        terms: dict[int, Term] = {}
        stack = [(top, False)]
        while stack:  # post-order without recursion: a row sweep's tree is thousands of nodes deep
            node_id, ready = stack.pop()
            if node_id < len(self.leaves) or (node_id != top and node_id in self.saved):
                source = self.leaves[node_id] if node_id < len(self.leaves) else self.saved[node_id]
                terms[node_id] = fix(self.be, source, values)
                continue
            node = self.nodes[node_id]
            if not ready:
                stack.append((node_id, True))
                stack.extend((c, False) for c in node.children)
                continue
            kids = [terms.pop(c) for c in node.children]
            argmax = node_id in wanted
            if node.kind == "reduce":
                out, choice = reduce(self.alg, kids[0], [x for x in kids[0].labels if x not in node.labels], argmax)
            else:
                out, choice = contract(self.alg, kids[0], kids[1], set(node.labels), argmax)
            if argmax:
                found[node_id] = (out.labels, choice, wanted[node_id])
            terms[node_id] = out

    def _segment(self, top: int, values: dict[Label, int], budget: float) -> dict[int, int]:
        """The nodes of :meth:`recompute`'s segment under ``top`` whose argmax it keeps, with the bytes
        of each (its fixed result's entries, int32 index and value): ``top``, then the others whose
        choice was not kept, smallest first, while their sum stays within ``budget``."""
        costs: dict[int, int] = {}
        stack = [top]
        while stack:
            node_id = stack.pop()
            if node_id < len(self.leaves) or (node_id != top and node_id in self.saved):
                continue
            node = self.nodes[node_id]
            if node.choice is not None and node.choice.index is None:
                entries = math.prod(self.sizes[x] for x in node.labels if x not in values)
                costs[node_id] = entries * (4 + self.entry_bytes)
            stack.extend(node.children)
        wanted = {top: costs.pop(top)}
        spent = 0
        for node_id, cost in sorted(costs.items(), key=lambda item: item[1]):
            if spent + cost > budget:
                break
            wanted[node_id] = cost
            spent += cost
        return wanted


class Progress:
    """INFO log lines for a contraction that runs long: slices and steps done and a time left, at most
    one every ``PROGRESS_EVERY`` seconds and none for one that ends sooner (the library never prints:
    the CLI and notebooks show the ``lazykern`` logger). On a GPU the steps are those queued, which
    run ahead of the device by up to its launch queue, so the time left is a lower bound."""

    def __init__(self, slices: int) -> None:
        self.start = self.last = time.monotonic()
        self.slices = slices
        self.done = 0

    def slice_done(self) -> None:
        self.done += 1

    def step(self, n: int, steps: int) -> None:
        now = time.monotonic()
        if now - self.last < PROGRESS_EVERY:
            return
        self.last = now
        fraction = (self.done + n / max(steps, 1)) / max(self.slices, 1)
        left = (now - self.start) * (1 - fraction) / max(fraction, 1e-9)
        log.info(
            "contraction: slice %d of %d, step %d of %d queued, %.0f%% after %.1f s, about %.1f s left",
            self.done + 1, self.slices, n, steps, 100 * fraction, now - self.start, left,
        )  # fmt: skip


PROGRESS_EVERY = 5.0  # seconds between progress lines


def _labels(terms: Sequence[tuple[int, Term]]) -> set[Label]:
    return {x for _, t in terms for x in t.labels}
