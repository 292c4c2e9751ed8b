"""Finding a contraction order: opt_einsum's strategies or a cotengra optimizer object (:func:`search_path`);
``optimize="cotengra"`` (:func:`cotengra_plan`): a cheap order as it is, else the stored plan, else a bounded
search, then stored.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any

from .. import _cost, _plan_store, _planner
from .._instance import check_max_time
from .inputs import Label
from .paths import costs, sub, walk

log = logging.getLogger("lazykern")


def search_path(
    inputs: Sequence[Sequence[Label]], output: Sequence[Label], sizes: dict[Label, int], optimize: Any
) -> tuple[list[tuple[int, ...]], list[Label]]:
    """(path, labels the optimizer chose to slice) from opt_einsum or a cotengra optimizer object."""
    symbols = {lab: _symbol(i) for i, lab in enumerate(sizes)}
    back = {s: lab for lab, s in symbols.items()}
    sym_inputs = [tuple(symbols[x] for x in t) for t in inputs]
    sym_output = tuple(symbols[x] for x in output)
    sym_sizes = {symbols[x]: n for x, n in sizes.items()}
    if hasattr(optimize, "search"):
        tree = optimize.search(sym_inputs, sym_output, sym_sizes)
        return [tuple(p) for p in tree.get_path()], [back[s] for s in tree.sliced_inds]
    import opt_einsum

    eq = ",".join("".join(t) for t in sym_inputs) + "->" + "".join(sym_output)
    shapes = [tuple(sizes[x] for x in t) for t in inputs]
    path, _ = opt_einsum.contract_path(eq, *shapes, shapes=True, optimize=optimize)
    return [tuple(p) for p in path], []


def cotengra_plan(
    terms: Any, output: Any, sizes: Any, limit: int, max_time: float, initial: Any, store: Any, rank: str = "flops"
) -> tuple[list[tuple[int, ...]], list[Label]]:
    """optimize="cotengra": a cheap order as it is, else the stored plan, else a search (then stored)."""
    _budget(max_time)
    if importlib.util.find_spec("cotengra") is None:  # asked for: missing is an error even where not needed
        raise _planner.cotengra_missing()
    seed = None if initial is None else [tuple(int(i) for i in p) for p in initial]
    cheap = _cheap(terms, output, sizes, seed, limit)
    if cheap is not None:
        return cheap, []
    key = _plan_store.key(terms, output, sizes, limit, seed, rank) if store else None

    def priced(path: list[tuple[int, ...]], more: list[Label]) -> tuple[int, int]:
        return costs(terms, output, sizes, path, sub(sizes, more))

    found = _plan_store.load(key, terms, priced) if key else None
    if found is not None:
        return found
    path, more = _search_cotengra(terms, output, sizes, limit, max_time, seed, rank)
    if key:
        _plan_store.save(key, terms, path, more, priced(path, more))
    return path, more


def _search_cotengra(
    inputs: Sequence[Sequence[Label]],
    output: Sequence[Label],
    sizes: dict[Label, int],
    limit: int,
    max_time: float | None,
    initial: Sequence[tuple[int, ...]] | None,
    rank: str = "flops",
) -> tuple[list[tuple[int, ...]], list[Label]]:
    """The cheapest order by ``rank`` (the fewest multiply-adds, or the quickest predicted on a GPU,
    :func:`_gpu_seconds`) whose largest intermediate fits ``limit`` entries, among what cotengra's
    workers found within ``max_time``, the ``initial`` path and opt_einsum's greedy;
    when none fits, the one with the smallest largest intermediate (with a warning). With ``max_time``
    unset, where the best order the default search found still costs LONG_SEARCH_FLOPS or more (and so
    did the greedy one), a second search of (LONG_SEARCH_TIMES - 1) times the default refines it with
    fresh seeds beside: the order is stored and every later call contracts it, and 5 s of search left a
    random 3-regular graph of 200 vertices at 2^38 multiply-adds in one process and 2^34 in the next
    (10-15 s found 2^33-2^35 on 2 cores), 20x the k-best and counting passes' time.

    Ranked by "seconds", half the workers minimize cotengra's combo of multiply-adds and writes: on a
    GPU the fewest multiply-adds is often the slowest order, its large steps streaming a big operand
    through a contracted axis of 2 (n = 200: 2^35 multiply-adds at 1.7% of the GEMM rate, where orders
    of 2^38 ran their large steps as GEMMs at 44-63%)."""
    budget = _budget(max_time)
    start = time.monotonic()
    objectives = ("flops", COMBO) if rank != "flops" else ("flops",)

    def cost(path: list[tuple[int, ...]], more: list[Label]) -> tuple[int, int, float]:
        largest, flops = costs(inputs, output, sizes, path, sub(sizes, more))
        if rank == "kbest":  # predicted seconds at the k-best kernels' rates
            return largest, flops, _gpu_seconds(inputs, output, sizes, path, sub(sizes, more), kbest=True)
        if rank == "seconds":  # at the max-plus GEMM's
            return largest, flops, _gpu_seconds(inputs, output, sizes, path, sub(sizes, more))
        return largest, flops, flops

    options = [(search_path(inputs, output, sizes, "greedy")[0], [])]  # the fallback, whatever the workers do
    longer = max_time is None and costs(inputs, output, sizes, options[0][0], {})[1] >= LONG_SEARCH_FLOPS
    if initial is not None:
        options.append((list(initial), []))
    symbols = {lab: _symbol(i) for i, lab in enumerate(sizes)}
    back = {s: lab for lab, s in symbols.items()}
    problem = (
        [tuple(symbols[x] for x in t) for t in inputs],
        tuple(symbols[x] for x in output),
        {symbols[x]: n for x, n in sizes.items()},
    )
    found = _planner.search(
        *problem,
        target=limit,
        max_time=max(budget - (time.monotonic() - start), 0.5),
        initial=initial,
        objectives=objectives,
    )
    options += [(path, [back[s] for s in sliced]) for path, sliced in found]
    scored = [(cost(path, more), path, more) for path, more in options]
    best = min(((c[2], c[1], path) for c, path, _ in scored if c[0] <= limit), default=None, key=lambda b: b[:2])
    if longer and best is not None and best[1] >= LONG_SEARCH_FLOPS:
        again = _planner.search(
            *problem,
            target=limit,
            max_time=budget * (LONG_SEARCH_TIMES - 1),
            initial=best[2],
            seed=_SECOND_SEED,
            objectives=objectives,
        )
        scored += [(cost(path, more), path, more) for path, more in ((p, [back[s] for s in sl]) for p, sl in again)]
    fitting = [item for item in scored if item[0][0] <= limit]
    if not fitting:  # the workers had no time: slice the best order here (quick on the small networks this hits)
        path, more = _slice_here(inputs, output, sizes, min(scored, key=lambda item: item[0][1])[1], limit)
        scored.append((cost(path, more), path, more))
        fitting = [item for item in scored[-1:] if item[0][0] <= limit]
    if fitting:
        _, path, more = min(fitting, key=lambda item: (item[0][2], item[0][1], item[0][0]))
    else:
        (largest, _, _), path, more = min(scored, key=lambda item: item[0])
        log.warning(
            "tropical.contraction_plan: no order found within max_time=%s s keeps intermediates under %d "
            "entries; using one whose largest has %d (raise max_time or memory_limit)",
            budget,
            limit,
            largest,
        )
    return path, more


RANKS = ("flops", "seconds", "kbest")
COMBO = "combo-64"  # cotengra's objective for the "seconds" workers: a write costs 64 multiply-adds (its default)


def _gpu_seconds(
    inputs: Sequence[Sequence[Label]],
    output: Collection[Label],
    sizes: dict[Label, int],
    path: Sequence[tuple[int, ...]],
    sliced: dict[Label, int],
    kbest: bool = False,
) -> float:
    """Predicted GPU seconds of ``path`` (float32 rates, :func:`.._cost.step_seconds`: each step its
    multiply-adds or the entries it reads and writes, whichever binds), in one lean walk as :func:`costs`;
    ``kbest``: of a k-best network (:func:`_kbest_step`)."""
    size = {k: (1 if k in sliced else v) for k, v in sizes.items()}
    nslices = math.prod(sliced.values())
    rates = _cost.rates_for(False, 4)
    total = 0.0
    for picked, union, kept, depends in walk(inputs, output, sliced, path):
        if kbest:
            seconds = _kbest_step(picked, kept, size)
        else:
            operands = tuple(math.prod(size[x] for x in t) for t in picked)
            one = _cost.Step(math.prod(size[x] for x in union), operands, math.prod(size[x] for x in kept), depends)
            seconds = _cost.step_seconds(one, 4, rates)
        total += seconds * (nslices if depends else 1)
    return total


def _kbest_step(picked: Sequence[Sequence[Label]], kept: Sequence[Label], size: dict[Label, int]) -> float:
    """Predicted seconds of a k-best step (:func:`.._cost.kbest_step_seconds`): a pair as the product its
    kernels run, batch x (M, K) x (K, N), at the rate of the kernel its shape takes, cut along a long sum
    where it would run few threads, as the algebra does; one operand reduced: its bytes."""
    from ..algebras import kbest

    moved = sum(math.prod(size[x] for x in t) for t in picked) + math.prod(size[x] for x in kept)
    if len(picked) != 2:
        return moved * _cost.KBEST_ENTRY / _cost.KBEST_BYTES + _cost.KBEST_STEP
    a, b, keep = set(picked[0]), set(picked[1]), set(kept)
    batch, M, N, K = (math.prod(size[x] for x in group) for group in (a & b & keep, (a - b) & keep,
                      (b - a) & keep, (a & b) - keep))  # fmt: skip
    return _cost.kbest_step_seconds(batch, M, K, N, moved, kbest.splits(batch, M, N, K))


CHEAP_FLOPS = 2**30  # multiply-adds under which an order is not worth searching for (~0.1 ms of GPU, ~1 s of CPU)
LONG_SEARCH_FLOPS = 2**36  # a greedy order this costly: the default search time is too short to be repeatable
LONG_SEARCH_TIMES = 2
_SECOND_SEED = 1000  # the second search's workers: other seeds than the first's
SMALL_NETWORK = 512  # tensors up to which opt_einsum's greedy order (milliseconds) is tried before a search


def _budget(max_time: float | None) -> float:
    seconds = check_max_time(max_time)
    return _planner.DEFAULT_MAX_TIME if seconds is None else seconds


def _cheap(inputs: Any, output: Any, sizes: Any, initial: Any, limit: int) -> list[tuple[int, ...]] | None:
    """``initial`` (else, on a small network, opt_einsum's greedy order) when it fits ``limit`` unsliced
    and costs at most CHEAP_FLOPS: a search (cotengra's import, worker processes, a store lookup)
    would cost more than it could save."""
    candidates: list[Callable[[], list[tuple[int, ...]]]] = [] if initial is None else [lambda: list(initial)]
    if len(inputs) <= SMALL_NETWORK:
        candidates.append(lambda: search_path(inputs, output, sizes, "greedy")[0])
    for make in candidates:
        path = make()
        largest, flops = costs(inputs, output, sizes, path, {})
        if largest <= limit and flops <= CHEAP_FLOPS:
            log.debug("contraction order: %d multiply-adds unsliced, taken without a search", flops)
            return path
    return None


def _slice_here(
    inputs: Any, output: Any, sizes: Any, path: list[tuple[int, ...]], limit: int
) -> tuple[list[tuple[int, ...]], list[Label]]:
    import cotengra

    symbols = {lab: _symbol(i) for i, lab in enumerate(sizes)}
    back = {s: lab for lab, s in symbols.items()}
    tree = cotengra.ContractionTree.from_path(
        [tuple(symbols[x] for x in t) for t in inputs],
        tuple(symbols[x] for x in output),
        {symbols[x]: n for x, n in sizes.items()},
        path=path,
    ).slice(target_size=limit)
    return [tuple(p) for p in tree.get_path()], [back[s] for s in tree.sliced_inds]


def _symbol(i: int) -> str:
    from opt_einsum import get_symbol

    symbol: str = get_symbol(i)  # opt_einsum has no types
    return symbol
