""":class:`Network`: operands, executor and checkpoints in one, planned for the memory it runs in, its peak guarded,
its boundary held in one buffer where that pays, its result in the output's order.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from ...errors import DeviceMemoryError
from .. import _arena, _cost
from .._backend import WHOLE_BYTES
from .._contract import Term
from .checkpoints import Checkpoints
from .executor import Executor
from .fit import check_slicing, fit_in_place, fit_to_memory, memory_message
from .inputs import Label
from .paths import check_path
from .plan import ContractionPlan, contraction_plan

log = logging.getLogger("lazykern")


class Network(Executor, Checkpoints):
    """A network's operands with everything that plans, guards and runs its contraction (built by
    :meth:`.operands.Operands.build`)."""

    def plan(
        self,
        optimize: Any,
        slices: Sequence[Label],
        memory_limit: int | None,
        max_time: float | None,
        initial: Sequence[Sequence[int]] | None = None,
    ) -> ContractionPlan:
        """The plan ``optimize`` makes of this network, fitted to ``memory_limit`` (else the free memory);
        ``initial``: a path a search starts from and keeps when it finds nothing better."""
        if not isinstance(optimize, ContractionPlan):
            inputs = [t.labels for t in self.leaves]

            def make(limit: int) -> ContractionPlan:
                return contraction_plan(
                    inputs,
                    self.output,
                    self.sizes,
                    optimize=optimize,
                    slices=slices,
                    memory_limit=limit,
                    max_time=max_time,
                    rank="flops" if self.be.on_host else self.alg.plan_rank,
                    initial=initial,
                )

            if memory_limit is not None:
                return make(memory_limit)
            fit = fit_in_place if self.inplace else fit_to_memory
            return fit(make, self.be.memory_limit(self.entry_bytes), self.peak, self.be.budget_bytes())
        if slices:
            raise ValueError("optimize= is a ContractionPlan: give its slices to contraction_plan, not slices=")
        unknown = [x for x in optimize.sliced if x not in self.sizes]
        if unknown:
            raise ValueError(f"the plan slices labels {unknown} that no operand carries")
        other = {x: n for x, n in optimize.sliced.items() if self.sizes[x] != n or x in self.output}
        if other:
            raise ValueError(
                f"the plan slices {other}, which this network holds as { ({x: self.sizes[x] for x in other}) } "
                f"(output labels {list(self.output)}): it was made for another network; plan this one"
            )
        check_path(optimize.path, len(self.leaves))
        return optimize

    def fits(self, plan: ContractionPlan, keep: float, cached: bool) -> bool:
        """Whether ``plan``'s predicted peak fits the free device memory (the available RAM on the host)."""
        free = self.be.budget_bytes()
        return free is None or self.peak(plan, keep, cached) * self.margin(plan) <= free

    def margin(self, plan: ContractionPlan, entry_bytes: int | None = None) -> float:
        """The factor on ``plan``'s predicted peak that the free memory must hold: the pool's margin, or
        _cost.WHOLE_MARGIN where every array of WHOLE_BYTES or more is a bit-addressed step's result
        (or written over in place) and CuPy allocates those outside its pool, as the peak counts them.
        Not for a sliced plan: the results it keeps for later slices are the pool's, however many."""
        if not self.inplace or self.be.name != "cupy" or plan.nslices > 1:
            return _cost.POOL_MARGIN
        width = self.entry_bytes if entry_bytes is None else entry_bytes
        steps, _ = self.priced(plan)
        if any(not s.bits and max(s.result, *s.operands) * width >= WHOLE_BYTES for s in steps):
            return _cost.POOL_MARGIN  # a large array of another step: the pool's
        return _cost.WHOLE_MARGIN

    def peak(
        self,
        plan: ContractionPlan,
        keep: float = 0,
        cached: bool = True,
        save: frozenset[int] = frozenset(),
        entry_bytes: int | None = None,
    ) -> int:
        """Predicted bytes at the worst moment of ``plan``'s run on this network (:func:`.._cost.peak_bytes`);
        ``entry_bytes``: another width than the leaves' (a counting pass carrying more residues)."""
        steps, _ = self.priced(plan)
        width = self.entry_bytes if entry_bytes is None else entry_bytes
        arena = self.alg.arena
        key = ("peak", keep, cached, save, width, None if arena is None else arena.bits)
        if key not in self.peaks:
            leaves = sum(math.prod(int(n) for n in t.parts[0].shape) for t in self.leaves)
            if not cached:  # a run without the slices' cache keeps nothing beyond a step's use
                steps = [s._replace(pinned=0) for s in steps]
            if arena is not None:  # a run holding its boundary in one buffer
                self.peaks[key] = _cost.arena_peak(steps, leaves, width, 1 << arena.bits)
            else:
                self.peaks[key] = _cost.peak_bytes(
                    steps, leaves, width, keep, save, self.inplace, host=self.be.host_ram
                )
        return int(self.peaks[key])

    def arena_run(
        self, plan: ContractionPlan, entry_bytes: int | None = None
    ) -> tuple[int, int, frozenset[int]] | None:
        """(address bits, predicted peak, steps it holds) of ``plan``'s run with its boundary in one buffer
        (:func:`.._cost.arena_run`; ``entry_bytes``: another width than the leaves'), or None where no arena
        can take the run: a sliced plan, another algebra than the energy's or the counts', autograd, values
        that no arena kernel adds, or no figure for the free memory."""
        alg = self.alg
        if plan.nslices > 1 or (alg.nparts != 1 and not alg.counting) or alg.grad or not alg.strided:
            return None
        if not _arena.capable(alg.semiring, self.be.dtype(self.leaves[0].parts[0]), self.be, alg.counting):
            return None
        if self.be.budget_bytes() is None:
            return None
        steps, _ = self.priced(plan)
        width = self.entry_bytes if entry_bytes is None else entry_bytes
        key = ("arena", width)
        if key not in self.peaks:
            bits = max((s.result for s in steps), default=1).bit_length() - 1
            leaves = sum(math.prod(int(n) for n in t.parts[0].shape) for t in self.leaves)
            self.peaks[key] = (bits, *_cost.arena_run(steps, leaves, width, 1 << bits))
        found: tuple[int, int, frozenset[int]] = self.peaks[key]
        return found

    def use_arena(self, plan: ContractionPlan) -> None:
        """Keep the boundary of ``plan``'s run in one buffer (:mod:`.._arena`): an unsliced max-plus / min-plus
        contraction of float values on CuPy (an energy, or a count: its count arrays held beside the values,
        :meth:`arena_run`) whose predicted peak (two boundaries at a step) does not fit the free device memory,
        while :func:`.._cost.arena_peak` does; or, where it fits, whose largest
        intermediate has ARENA_FASTER entries or more, every label binary, and every step of that size one the
        arena takes by its rules (:func:`.._cost.arena_run`: a boundary sweep's, whose row steps would copy
        the boundary to each one's layout; not a greedy order's wide products, which stay batched). A count
        takes it by the same rules: its direct steps were quicker than the tiled ones written over their
        operands, a 32 x 32 count 5.95 s against 6.78 s (one process, H200, benchmarks/results/s70-h200).
        Only for a run on one thread with no slice cache and no kept argmax (:func:`contract_network`), whose
        every intermediate is its own: the arena's rules free a term the step after it is read."""
        alg = self.alg
        alg.arena = None
        found = self.arena_run(plan)
        if found is None:
            return
        bits, need, resident = found
        steps, _ = self.priced(plan)
        fits = self.fits(plan, 0, cached=False)
        largest = max((s.result for s in steps), default=1)
        if fits and (largest < ARENA_FASTER or any(n != 2 for n in self.sizes.values())):
            return
        if fits and not all(n in resident for n, s in enumerate(steps) if s.result >= ARENA_FASTER):
            return  # its large steps are products the arena cannot take (a greedy order's): they stay batched
        if need * _cost.POOL_MARGIN <= (self.be.budget_bytes() or 0):
            log.info("contraction: the boundary held in one buffer of 2^%d entries (peak %.2f GiB)", bits, need / 2**30)
            alg.arena = _arena.Arena(bits, resident)

    def prefetch(self, plan: ContractionPlan) -> list[threading.Thread]:
        """Start building, each in a thread, the kernels of ``plan``'s bit-addressed steps (the arena's, or
        the counting algebra's): named by the plan's steps (:func:`plan_steps`), they compile beside each
        other and the run's first steps rather than one after another at each first launch. A step the
        executor runs otherwise leaves its kernel built and unused; one it runs so unforeseen builds then.
        Returns the threads, which the run joins before it returns (:func:`contract_network`)."""
        if self.be.on_host:
            return []
        steps, _ = self.priced(plan)
        arena = self.alg.arena
        # the arena's: the steps its rules let into it (use_arena read them off _cost.arena_run)
        taken = [s for s in steps if s.bits] if arena is None else [steps[n] for n in sorted(arena.resident)]
        tiles = sorted({s.tile for s in taken})
        if not tiles:
            return []
        like = self.leaves[0].parts
        if arena is not None:
            return self.alg.prefetch_arena(like, tiles)
        return self.alg.prefetch(like, tiles)

    @contextlib.contextmanager
    def memory_guard(
        self,
        plan: ContractionPlan,
        keep: float,
        cached: bool = True,
        save: frozenset[int] = frozenset(),
        argmax: bool = False,
    ) -> Iterator[None]:
        """Refuse a run whose predicted peak exceeds the free device memory (on the host: the available
        RAM), before anything is allocated, and report an allocation failure inside the run the same way:
        one :class:`DeviceMemoryError` (a MemoryError) with the figures. A plan sliced absurdly deep is
        refused here too (:func:`check_slicing`)."""
        free = self.be.budget_bytes()
        need = 0
        if free is not None:
            need = self.peak(plan, keep, cached, save)
            if argmax:  # its backtracking holds every kept argmax and checkpoint beside a segment
                need = max(need, self.argmax_peak(plan, keep)(save))
        margin = self.margin(plan)
        if free is not None and need * margin > free - self.be.spare_bytes():
            # The pool's spare blocks count as free, but only as blocks of the sizes an earlier run freed:
            # a run that needs them cut to other sizes (a count after an energy on a 32 x 32 lattice) found
            # them split and held, and the device out of memory. Such a run starts from the device's memory.
            self.be.release_cached()
            free = self.be.budget_bytes() or 0
            if need * margin > free:
                raise DeviceMemoryError(memory_message(plan, need, free, self.be.host_ram, margin, argmax))
        check_slicing([t.labels for t in self.leaves], self.output, self.sizes, plan)
        try:
            yield
        except Exception as exc:
            if not self.be.out_of_memory(exc):
                raise
            self.be.release_cached()
            raise DeviceMemoryError(
                memory_message(plan, need, self.be.free_bytes() or 0, margin=margin, argmax=argmax)
                + f" (the device refused an allocation: {exc})"
            ) from exc

    def on_device(self, device: int | None) -> Network:
        """This network with its operands on GPU ``device`` and no recorded run (host: a copy that
        shares the operands); one per thread, since :meth:`run` records its steps on the network."""
        leaves = [Term(tuple(self.be.to_device(p, device) for p in t.parts), t.labels) for t in self.leaves]
        return replace(self, leaves=leaves, nodes={}, root=0, saved={}, memo=None, bare=None, peaks={})

    def finish(self, root: Term) -> Any:
        perm = tuple(root.labels.index(x) for x in self.output)
        parts = root.parts
        if self.alg.arena is not None:  # a view of the arena holds all of it: the result alone is handed back
            parts = tuple(self.be.contiguous(p) for p in parts)
            self.alg.arena = None
        if perm != tuple(range(len(perm))):
            parts = tuple(self.be.permute(p, perm) for p in parts)
        parts = tuple(self.be.wrap_result(p) for p in parts)
        return parts if self.alg.nparts > 1 else parts[0]


# Entries of a largest intermediate from which a sweep's boundary is held in one buffer even where two fit:
# its bit-addressed steps read the boundary where it lies, while the row kernel's steps copy it to the
# layout each needs, so a 32 x 32 energy ran in 1.15 s against 1.38 s (medians of 6 warm calls alternating
# in one process, H200: benchmarks/results/s63-h200/call6-arena-ab.json).
ARENA_FASTER = 1 << 24
