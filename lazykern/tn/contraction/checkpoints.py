""":class:`Checkpoints`: an argmax run's split of the free memory between kept argmax, checkpoints and a recomputed
segment, by the seconds each split is predicted to cost.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import math
from collections.abc import Callable

from .. import _cost, _recompute
from .executor import NONE
from .operands import Operands
from .plan import ContractionPlan

log = logging.getLogger("lazykern")


class Checkpoints(Operands):
    """An argmax run's split of the free memory (:class:`.network.Network`'s): kept choices,
    checkpoints and a segment's choices, each priced by :mod:`lazykern.tn._recompute`."""

    def keep_that_fits(self, plan: ContractionPlan, free: int | None = None) -> float:
        """The largest ``keep`` (result entries whose argmax is kept) whose peak fits the free device
        memory (``free``, read from the device when None): every argmax on the host, none where even
        the smallest does not fit."""
        free = self.be.free_bytes() if free is None else free
        if free is None:
            return math.inf
        budget = free / _cost.POOL_MARGIN
        if self.argmax_peak(plan, math.inf)(()) <= budget:
            return math.inf
        sizes = sorted({s.result for s in self.priced(plan)[0]})
        fits = bisect.bisect_left(sizes, True, key=lambda size: self.argmax_peak(plan, size)(()) > budget)  # grows
        keep: float = sizes[fits - 1] if fits else NONE
        log.info("argmax: keeping the choices of steps up to %s entries; the larger ones are recomputed", keep)
        return keep

    def checkpoints(self, plan: ContractionPlan, keep: float, free: int | None) -> frozenset[int]:
        """Steps whose values an argmax run keeps for the backtracking. Between two checkpoints the
        backtracking recomputes a segment once (:meth:`recompute`) instead of every step from the leaves.
        With the device's free memory known (``free``), the set the search of :func:`.._recompute.place`
        predicts to recompute least that fits beside the run and the kept choices; on the host (None),
        about the square root of the number of steps whose argmax is not kept, at even shares of the
        run's predicted time (so the segments between them cost alike)."""
        steps, tree = self.priced(plan)
        rates = _cost.rates_for(self.be.on_host, self.be.dtype(self.leaves[0].parts[0]).itemsize)
        elapsed = list(itertools.accumulate(_cost.step_seconds(s, self.entry_bytes, rates) for s in steps))
        peak = self.argmax_peak(plan, keep)
        spare = math.inf if free is None else free / _cost.POOL_MARGIN - peak(())
        # Only values that fit beside the run alone: on a 32 x 32 lattice the 16 GiB boundaries of the
        # middle never do, the growing and shrinking ones around them do.
        candidates = [
            n for n, s in enumerate(steps[:-1]) if s.result > keep and 1 < s.result * self.entry_bytes <= spare
        ]
        if free is not None:
            room = free / _cost.POOL_MARGIN
            sides = tree.sides(keep)  # small: a segment then redoes the boundary's steps alone
            start = sides if peak(sides) <= room else frozenset()
            seconds = self.redo_seconds(plan)
            save = _recompute.place(tree, keep, candidates, elapsed, peak, room, seconds, self.entry_bytes, start)
            log.info("argmax: %d checkpoints among %d recomputed steps", len(save - start), len(candidates))
            return save
        times = [elapsed[n] for n in candidates]
        count = math.isqrt(len(candidates))
        marks = [elapsed[-1] * (i + 1) / (count + 1) for i in range(count)]
        return frozenset(candidates[min(bisect.bisect_left(times, m), len(candidates) - 1)] for m in marks)

    def backtracking(self, plan: ContractionPlan, free: int | None) -> tuple[float, frozenset[int], float]:
        """``checkpoint=None``'s split of the free memory between kept choices, checkpoints and a
        segment's choices: (keep, checkpoints, segment bytes) of the recomputation predicted quickest
        (:meth:`redo_seconds` of :meth:`.._recompute.Tree.redone`) among keeping every choice that fits and
        keeping fewer. Keeping
        fewer adds segments and only pays by the memory it frees: a smaller ``keep`` that frees less
        than a hundredth of the free memory beside the last one priced is not priced."""
        most = self.keep_that_fits(plan, free)
        if free is None or most == math.inf:
            return most, frozenset(), math.inf
        steps, tree = self.priced(plan)
        sizes = sorted({s.result for s in steps if s.result <= most})
        options = [*sizes[:: -max(1, len(sizes) // 4)], NONE]  # a few, from the most kept to none
        best: tuple[float, float, frozenset[int], float] | None = None
        held = math.inf
        for keep in options:
            kept = self.argmax_peak(plan, keep)(())
            if held - kept < free / 100:
                continue
            held = kept
            save = self.checkpoints(plan, keep, free)
            budget = self.segment_bytes(plan, keep, save, free)
            _, flops, runs = tree.redone(keep, save, budget, self.entry_bytes)
            cost = self.redo_seconds(plan)(flops, runs)
            if best is None or cost < best[0]:
                best = (cost, keep, save, budget)
        assert best is not None  # the first option is always priced
        log.info("argmax: keeping choices up to %s entries and %d checkpoints", best[1], len(best[2]))
        return best[1], best[2], best[3]

    def redo_seconds(self, plan: ContractionPlan) -> Callable[[int, int], float]:
        """Predicted seconds of a backtracking that redoes ``flops`` multiply-adds in ``runs`` steps: the
        multiply-adds at the rate the plan's own run is predicted to have (:func:`.._cost.seconds`), and
        each step's fixed cost through the executor (``step`` and ``overhead`` of :mod:`.._cost`'s rates)."""
        steps, _ = self.priced(plan)
        rates = _cost.rates_for(self.be.on_host, self.be.dtype(self.leaves[0].parts[0]).itemsize)
        work = sum(s.flops for s in steps)
        per_flop = (_cost.seconds(steps, 1, self.entry_bytes, rates) - len(steps) * rates.step) / max(work, 1)
        per_step = rates.step + rates.overhead
        return lambda flops, runs: flops * per_flop + runs * per_step

    def segment_bytes(self, plan: ContractionPlan, keep: float, save: frozenset[int], free: int | None) -> float:
        """Bytes the argmax of one recomputed segment may hold: what the free device memory leaves
        beside the run's and the backtracking's own peak (:meth:`argmax_peak`); no bound on the host."""
        if free is None:
            return math.inf
        return max(0.0, free / _cost.POOL_MARGIN - self.argmax_peak(plan, keep)(save))

    def argmax_peak(self, plan: ContractionPlan, keep: float) -> _cost.ArgmaxPeak:
        """Predicted peak of an argmax run of ``plan`` keeping the argmax up to ``keep`` entries and
        its backtracking, as a function of the checkpoints (:class:`.._cost.ArgmaxPeak`)."""
        steps, _ = self.priced(plan)
        if self.bare is None or self.bare[0] is not plan:
            leaves = sum(math.prod(int(n) for n in t.parts[0].shape) for t in self.leaves)
            self.bare = (plan, leaves, _cost.peak_profile(steps, leaves, self.entry_bytes, NONE))
        _, leaves, bare = self.bare
        return _cost.ArgmaxPeak(steps, leaves, self.entry_bytes, keep, host=self.be.host_ram, bare=bare)
