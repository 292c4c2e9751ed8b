"""A network's optimum and one assignment of every label reaching it (:func:`network_argmax`): the best slice found,
contracted again keeping argmax and checkpoints, then backtracked from the root.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

from ...errors import DeviceMemoryError
from .. import _procs, _spread
from .._contract import Algebra, Choice, Term, unravel
from .executor import NONE
from .inputs import Label
from .network import Network
from .plan import ContractionPlan
from .ship import ship

log = logging.getLogger("lazykern")


@_procs.scoped
def network_argmax(
    inputs: Sequence[Sequence[Label]],
    output: Sequence[Label],
    operands: Sequence[Any],
    *,
    semiring: str = "maxplus",
    optimize: Any = "auto",
    at: Sequence[int] | None = None,
    checkpoint: bool | int | None = None,
    slices: Sequence[Label] = (),
    memory_limit: int | None = None,
    max_time: float | None = None,
    devices: _spread.Devices = None,
) -> tuple[Any, dict[Label, int]]:
    """:func:`argmax_einsum` with any hashable labels."""
    output = tuple(output)
    fixed: dict[Label, int] = {}
    if output:
        if at is None or len(at) != len(output):
            raise ValueError(f"the output has labels {output}: pass at= with one position per output label")
        fixed = dict(zip(output, (int(v) for v in at)))
    net = Network.build(inputs, (), operands, semiring, Algebra, fixed=fixed)
    empty = [x for x, n in net.sizes.items() if n == 0]
    if empty:
        raise ValueError(f"argmax_einsum: labels {empty} hold no values (size 0): no assignment exists to return")
    if net.alg.grad:
        raise ValueError("argmax_einsum backtracks through argmax: pass tensors that do not require grad")
    net.be.large_whole = True  # its long-lived arrays beside steps of every size (Backend.large_whole)
    spread = _spread.resolve(devices, net.be)
    plan = net.plan(optimize, slices, memory_limit, max_time)
    single = not plan.sliced
    free = net.be.free_bytes()
    if checkpoint is None:
        keep, save, budget = net.backtracking(plan, free)
    else:
        keep = math.inf if checkpoint is False else (NONE if checkpoint is True else int(checkpoint))
        save = net.checkpoints(plan, keep, free)
        budget = net.segment_bytes(plan, keep, save, free)
    # The pool starts empty: a cached block of an earlier call (an energy's boundary) would be cut for the
    # run's small long-lived arrays (kept choices) and held, beside the large arrays allocated whole.
    net.be.release_cached()
    try:
        with net.memory_guard(plan, keep, save=save, argmax=True):
            return _argmax_run(net, plan, spread, single, keep, semiring, fixed, (save, budget))
    except DeviceMemoryError as exc:
        if checkpoint is not None or free is None:
            raise
        refused = str(exc)  # the traceback's frames (and the run's arrays they hold) end with this block
    # The split's peak is predicted from the plan; the pool can hold more than the arrays alive (blocks cut
    # for arrays of other sizes). Once more, planned with one largest intermediate's bytes left free.
    net.nodes, net.saved = {}, {}
    net.be.release_cached()
    spare = plan.largest * net.entry_bytes
    log.warning("argmax: the device refused the split (%s); once more with %.1f GiB left aside", refused, spare / 2**30)
    keep, save, budget = net.backtracking(plan, max(free - spare, 0))
    with net.memory_guard(plan, keep, save=save, argmax=True):
        return _argmax_run(net, plan, spread, single, keep, semiring, fixed, (save, budget))


def _argmax_run(
    net: Network,
    plan: ContractionPlan,
    spread: Any,
    single: bool,
    keep: float,
    semiring: str,
    fixed: dict[Label, int],
    backtracking: tuple[frozenset[int], float],
) -> tuple[Any, dict[Label, int]]:
    """:func:`network_argmax`'s search over the slices and its backtracking, once planned;
    ``backtracking``: the steps whose values are kept as checkpoints, and the bytes a segment's
    recomputed argmax may hold (:meth:`Network.checkpoints`, :meth:`Network.segment_bytes`)."""
    save, budget = backtracking
    if spread is not None and not single:
        groups = _spread.spread_groups(
            net, plan, spread, lambda local, a, b: _slice_optima(local, plan, a, b), "slice_optima", _as_is, ship=ship
        )
        scores = [item for group in groups for item in group]
    else:
        cache: dict[int, Term] = {}
        runs = [
            (
                values,
                net.run(
                    plan,
                    values,
                    keep=keep if single else NONE,
                    cache=None if single else cache,
                    save=save if single else frozenset(),
                ).parts[0],
            )
            for values in plan.slice_values()
        ]
        scores = [(values, net.be.item(out)) for values, out in runs]  # read back once every slice is queued
    best, best_values = None, {}
    for values, v in scores:
        if best is None or _better(semiring, v, best):
            best, best_values = v, values
    if not single:
        net.run(plan, best_values, keep=keep, save=save)
    assignment = dict(fixed) | dict(best_values)
    _backtrack(net, assignment, budget)
    return best, assignment


def _slice_optima(net: Network, plan: ContractionPlan, start: int, stop: int) -> list[tuple[dict[Label, int], Any]]:
    """(sliced labels' values, optimum) of slices ``start`` to ``stop``: one device's share of
    :func:`network_argmax`'s search, read back once all of them are queued."""
    cache: dict[int, Term] = {}
    runs = [
        (values, net.run(plan, values, keep=NONE, cache=cache).parts[0]) for values in plan.slice_values(start, stop)
    ]
    return [(values, net.be.item(out)) for values, out in runs]


def search_range(net: Network, plan: ContractionPlan, start: int, stop: int) -> list[tuple[dict[Label, int], Any]]:
    """:func:`argmax_einsum`'s search over slices ``start`` to ``stop`` under this device's memory guard
    (no argmax kept): a worker process's group."""
    with net.memory_guard(plan, NONE, cached=True):
        return _slice_optima(net, plan, start, stop)


def _as_is(value: Any, _device: int) -> Any:
    return value


def _better(semiring: str, v: Any, best: Any) -> bool:
    better: bool = v < best if semiring == "minplus" else v > best  # scalars of the operands' library
    return better


def _backtrack(net: Network, assignment: dict[Label, int], budget: float) -> None:
    """Walk down from the root, reading each step's choice at the position its labels have. A step
    whose argmax was not kept starts a segment: its subtree is recomputed once down to the
    checkpoints, with every label chosen so far fixed, keeping the argmax of the segment's steps
    (up to ``budget`` bytes; a step left out starts a segment of its own when the walk reaches it),
    each dropped once read. So each step is recomputed about once, not once per step above it."""
    found: dict[int, tuple[tuple[Label, ...], Choice, int]] = {}
    stack = [net.root]
    while stack:
        node_id = stack.pop()
        node = net.nodes.get(node_id)
        if node is None:
            continue  # a leaf
        if node.choice.index is not None:
            labels, choice = node.labels, node.choice
        else:
            if node_id not in found:
                net.recompute(node_id, dict(assignment), found, budget)
            labels, choice, _ = found.pop(node_id)
        assignment.update(unravel(choice, tuple(assignment[x] for x in labels), net.be))
        stack.extend(node.children)
    net.saved = {}
