""":class:`ContractionPlan` (an order, its sliced labels, its cost) and :func:`contraction_plan`, which makes one from
any ``optimize=`` and slices it to ``memory_limit``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._backend import DEFAULT_HOST_LIMIT
from .._instance import check_max_time
from .inputs import Label, check_sizes
from .paths import check_path, costs, plan_steps
from .search import RANKS, cotengra_plan, search_path
from .slicing import slice_to, warn_if_costly

DEFAULT_MEMORY_LIMIT = DEFAULT_HOST_LIMIT  # entries of the largest intermediate on the CPU (GPU: its free memory)


@dataclass(frozen=True)
class ContractionPlan:
    """A contraction order, from :func:`contraction_plan`; pass it as ``optimize=`` to run it.

    ``path``: opt_einsum's position tuples; ``sliced``: label -> size of every label the
    network is contracted once per value of; ``largest``: entries of the largest
    intermediate of one slice; ``flops``: tropical multiply-adds of the whole contraction,
    with the steps no sliced label reaches counted once (the slices reuse their results)."""

    path: tuple[tuple[int, ...], ...]
    sliced: dict[Label, int] = field(default_factory=dict)
    largest: int = 0
    flops: int = 0

    @property
    def nslices(self) -> int:
        return math.prod(self.sliced.values())

    def slice_values(self, start: int = 0, stop: int | None = None) -> Iterator[dict[Label, int]]:
        """The sliced labels' values of slices ``start`` to ``stop`` (default: all), in a fixed order."""
        labels = list(self.sliced)
        combos = itertools.product(*(range(self.sliced[x]) for x in labels))
        for combo in itertools.islice(combos, start, stop):
            yield dict(zip(labels, combo))


def contraction_plan(
    inputs: Sequence[Sequence[Label]],
    output: Sequence[Label],
    sizes: dict[Label, int],
    *,
    optimize: Any = "auto",
    slices: Sequence[Label] = (),
    memory_limit: int | None = None,
    max_time: float | None = None,
    initial: Sequence[Sequence[int]] | None = None,
    store: bool = True,
    rank: str = "flops",
) -> ContractionPlan:
    """The order :func:`einsum` / :func:`contract_network` would contract ``inputs`` (one label
    sequence per operand, any hashable labels) into ``output`` with label sizes ``sizes``, and
    its cost; ``optimize``, ``slices``, ``max_time`` as for :func:`einsum`; ``memory_limit``
    defaults to 2^28 entries here (no device is known). Planning once and passing the plan as
    ``optimize=`` separates search time from contraction time.

    ``optimize="cotengra"``: ``initial`` (a path, e.g. one that follows the network's geometry) is
    refined by subtree reconfiguration beside the fresh searches and kept when nothing beats it; an
    ``initial`` path (else opt_einsum's greedy one) that fits ``memory_limit`` unsliced and costs at
    most ``CHEAP_FLOPS`` (2^30) multiply-adds is taken as it is, with no search and no worker process;
    with ``store`` the plan is read from / written to the lazykern store under the network's
    structure (labels, sizes, output, slices, memory limit, initial path), so a second process
    skips the search (``lazykern cache ls`` lists plans as family ``tropical_plan``). ``rank``: how
    ``optimize="cotengra"`` picks among the orders found: "flops" (the fewest multiply-adds) or
    "seconds" (the quickest predicted on a GPU, :func:`lazykern.tn._cost.seconds`: a step costs its
    multiply-adds or the bytes it streams, whichever binds; half the search's workers then minimize
    cotengra's "combo" of multiply-adds and writes), or "kbest" (the same for a k-best network's products,
    :func:`lazykern.tn._cost.kbest_step_seconds`). The executor plans for a GPU by its algebra's rank.

    >>> plan = contraction_plan(["ab", "bc", "cd"], "", dict(a=2, b=3, c=4, d=5), optimize="greedy")
    >>> plan.path, plan.largest, plan.flops
    (((1, 2), (0, 1)), 3, 66)

    Raises ValueError for a slice label that is in no input or is an output label, or a
    ``max_time`` that is not positive; ImportError for "cotengra" when cotengra is missing.
    """
    output = tuple(output)
    max_time = check_max_time(max_time)
    limit = DEFAULT_MEMORY_LIMIT if memory_limit is None else int(memory_limit)
    if limit < 1:
        raise ValueError(f"memory_limit must be a positive number of entries, got {memory_limit!r}")
    if rank not in RANKS:
        raise ValueError(f"rank must be one of {sorted(RANKS)}, got {rank!r}")
    check_sizes(inputs, output, sizes)
    kept = _path_key(inputs, output, sizes, optimize, slices, memory_limit)
    found = _plans_kept.get(kept) if kept is not None else None
    if found is not None:
        return found
    sliced: dict[Label, int] = {}
    for lab in slices:
        if lab not in sizes:
            raise ValueError(f"slice label {lab!r} is in no operand")
        if lab in output:
            raise ValueError(f"slice label {lab!r} is an output label; slice contracted labels only")
        sliced[lab] = sizes[lab]
    terms = [tuple(dict.fromkeys(x for x in t if x not in sliced)) for t in inputs]  # a repeat: its diagonal
    rest = {k: v for k, v in sizes.items() if k not in sliced}
    if isinstance(optimize, (int, float)) and not isinstance(optimize, bool):
        raise ValueError(
            "optimize= is a strategy name, a path (a list of tuples of positions) or a ContractionPlan, "
            f"got {optimize!r}"
        )
    if isinstance(optimize, (list, tuple)):
        path, more = check_path(optimize, len(terms)), []
    elif len(terms) == 1:
        path, more = [], []
    elif optimize == "cotengra":
        path, more = cotengra_plan(terms, output, rest, limit, max_time, initial, store, rank)
    else:
        try:
            path, more = search_path(terms, output, rest, optimize)
        except KeyError as exc:  # opt_einsum's word for a strategy it does not know
            raise ValueError(f"optimize={optimize!r} is no contraction strategy opt_einsum knows ({exc})") from None
    if set(more) & set(output):  # cotengra may slice an output label: the result must keep it, so slice here
        path, more = slice_to(terms, output, rest, path, limit)
    explicit = isinstance(optimize, (list, tuple))  # a caller's own path is sliced only to a limit they set
    if not more and (memory_limit is not None or not explicit) and costs(terms, output, rest, path, {})[0] > limit:
        path, more = slice_to(terms, output, rest, path, limit)  # memory_limit holds for every strategy
    for lab in more:
        sliced.setdefault(lab, sizes[lab])
    largest, flops = costs([tuple(t) for t in inputs], output, sizes, path, sliced)
    if more:
        warn_if_costly(path, flops, costs(terms, output, rest, path, {})[1], len(more), limit)
    plan = ContractionPlan(tuple(path), sliced, largest, flops)
    if kept is not None:
        if len(_plans_kept) >= _PLANS_KEPT:
            _plans_kept.pop(next(iter(_plans_kept)))  # the oldest
        _plans_kept[kept] = plan
    return plan


def _path_key(
    inputs: Sequence[Sequence[Label]],
    output: tuple[Label, ...],
    sizes: dict[Label, int],
    optimize: Any,
    slices: Sequence[Label],
    memory_limit: int | None,
) -> tuple[Any, ...] | None:
    """The key under which :func:`contraction_plan` keeps the plan of an explicit path (None for any
    other ``optimize``): costing and slicing a path is a walk over every step, and the solvers plan the
    same path for each of their passes and calls (5 ms a call at 150 tensors, 130 ms where it slices)."""
    if not isinstance(optimize, (list, tuple)):
        return None
    try:
        return (
            tuple(map(tuple, inputs)),
            output,
            tuple(sizes.items()),
            tuple(map(tuple, optimize)),
            tuple(slices),
            memory_limit,
        )
    except TypeError:  # a step that is no sequence: the general path says what is wrong with it
        return None


_plans_kept: dict[tuple[Any, ...], ContractionPlan] = {}
_PLANS_KEPT = 32


def plan_flops(
    inputs: Sequence[Sequence[Label]], output: Collection[Label], sizes: dict[Label, int], plan: ContractionPlan
) -> int:
    """The multiply-adds of ``plan`` over every slice, priced on this network's own labels and sizes: the
    figure a plan carries is the network's it was made for (one made for other sizes, or written by hand
    with the default 0, carries another), and a rounding bound must not rest on it."""
    steps = plan_steps(inputs, output, sizes, plan.path, dict(plan.sliced))
    return sum(int(s.flops) for s in steps) * int(plan.nslices)
