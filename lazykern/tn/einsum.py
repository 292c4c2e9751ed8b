"""Tropical einsum: contraction order from opt_einsum or cotengra, each step one batched product.

>>> import numpy as np
>>> from lazykern.tropical import einsum
>>> A = np.array([[0.0, 1.0], [2.0, -1.0]])
>>> einsum("ij,jk->ik", A, A)  # max-plus matrix product
array([[3., 1.],
       [2., 3.]])
>>> float(einsum("ii->", A))  # max over the diagonal
0.0

``semiring``: "maxplus" (default), "minplus" or "maxmul" (max-times distributes over max
only for nonnegative entries, as probabilities are; with negative ones the result depends
on the contraction order). NumPy operands are computed
on the CPU by vectorized NumPy kernels; CuPy arrays, Numba device arrays and torch
tensors (CUDA) by lazykern's batched GPU kernels, results of the same kind. torch
tensors that require grad get the tropical gradient (one winner per max) through
:mod:`lazykern.tropical.torch`.

``optimize``: "auto", "greedy", "optimal" (any opt_einsum strategy name), "cotengra"
(hyper-optimized trees sliced to ``memory_limit`` entries, searched for ``max_time`` seconds,
default 5, in worker processes lazykern ends when the time is up; needs
``pip install 'lazykern[tn]'``), a cotengra optimizer object (run as given, its pools its
own), an explicit path (a list of position tuples, as opt_einsum writes them), or a
:class:`ContractionPlan` from :func:`contraction_plan` (the order, the sliced labels and
their cost, searched once and reused; cotengra's plans are also kept in the lazykern store,
so the same network skips the search next time). ``memory_limit``: entries of the largest
intermediate; by default a quarter of the GPU's free memory for GPU operands (two operands, the
result and a layout copy live at once), 2^28 on the CPU. ``slices``:
labels to slice over explicitly: the network is contracted once per value of those
labels and the results are combined by the semiring sum, so no intermediate carries
them (memory / time trade). ``devices``: spread those slices over several GPUs of this
host, ``"all"`` or a sequence of ordinals (default None: the operands' device alone); each
device contracts one contiguous group of slices on its own copy of the operands (the operands' device in
this process, every other one in a worker process of its own, ended with the call that started it unless
``lazykern.tn.keep_workers()`` is open: :mod:`._procs`), and the groups' results are added in the
semiring on the operands' device, so the result equals one device's. NumPy operands stay on the host,
one thread per group (``LAZYKERN_SPREAD=threads`` / ``processes`` overrides either choice).

:func:`argmax_einsum` also returns one optimal assignment of every label (backtracking
through the argmax of every step). A step whose argmax was not kept is recomputed by segments:
the subtree under it, down to the checkpoints (steps whose values the run kept: on a GPU those a
search predicts to save the most time within the free memory, :func:`._recompute.place`, with the
small steps right under the recomputed ones, so that a segment redoes the large steps alone; on the
host about the square root of their number), once, with the labels chosen so far fixed, keeping the
argmax of the segment's steps; so each step is recomputed about once, not once per step above it.
``checkpoint=True`` keeps no argmax at all; ``checkpoint=n`` keeps the argmax of the steps whose
results have at most n entries; ``checkpoint=None`` (the default) splits the GPU's free memory beside
the contraction between kept argmax, checkpoints and a segment's argmax by the seconds each split is
predicted to cost (multiply-adds and steps redone, :mod:`._recompute`; on the host every argmax is
kept); ``checkpoint=False`` keeps all of them. On CuPy, an argmax run's arrays of 256 MiB or more are
device allocations of their own (:attr:`._backend.Backend.large_whole`), and a split the device refuses
all the same is planned once more with one largest intermediate's bytes left aside.

Memory is planned: the peak of a contraction (every live intermediate, a step's layout copies and
result, the argmax kept) is computed from its plan (:mod:`._cost`) before it runs. With
``memory_limit`` not given, the plan is sliced until that peak fits the GPU's free memory; a plan
whose peak does not fit raises :class:`lazykern.errors.DeviceMemoryError` naming the bytes it needs,
before anything is allocated (an allocation failure inside a step is reported the same way).
"""

from __future__ import annotations

import bisect
import contextlib
import importlib.util
import itertools
import logging
import math
import numbers
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Hashable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import DeviceMemoryError, SlicingError
from ..tropical import reference
from . import _arena, _contract, _cost, _plan_store, _planner, _procs, _recompute, _spread, _strided
from ._backend import DEFAULT_HOST_LIMIT, WHOLE_BYTES, Backend, backend_of
from ._contract import Algebra, Choice, Term, contract, diagonals, fix, reduce, unravel

log = logging.getLogger("lazykern")

Label = Hashable
DEFAULT_MEMORY_LIMIT = DEFAULT_HOST_LIMIT  # entries of the largest intermediate on the CPU (GPU: its free memory)
_NONE = -1  # run(keep=_NONE): keep no argmax


# ------------------------------------------------------------------ public --
def einsum(
    subscripts: str,
    *operands: Any,
    semiring: str = "maxplus",
    optimize: Any = "auto",
    slices: Sequence[Label] = (),
    memory_limit: int | None = None,
    max_time: float | None = None,
    devices: _spread.Devices = None,
) -> Any:
    """The tropical contraction ``subscripts`` (NumPy's notation, no ellipsis) of ``operands``.

    Raises ValueError for malformed subscripts or mismatched sizes, TypeError for mixed dtypes,
    ValueError for ``devices`` naming a GPU this process does not see.
    """
    inputs, output = parse(subscripts, len(operands))
    return contract_network(
        inputs,
        output,
        operands,
        semiring=semiring,
        optimize=optimize,
        slices=slices,
        memory_limit=memory_limit,
        max_time=max_time,
        devices=devices,
    )


def argmax_einsum(
    subscripts: str,
    *operands: Any,
    semiring: str = "maxplus",
    optimize: Any = "auto",
    at: Sequence[int] | None = None,
    checkpoint: bool | int | None = None,
    slices: Sequence[Label] = (),
    memory_limit: int | None = None,
    max_time: float | None = None,
    devices: _spread.Devices = None,
) -> tuple[Any, dict[Label, int]]:
    """(value, assignment): the optimum of the contraction over every label (the output
    entry ``at`` when the output is not a scalar) and one assignment of all labels reaching it.
    ``devices``: each device finds the optimum of its group of slices; the best slice (the first
    one on a tie, as on one device) is then contracted again and backtracked on the operands' device."""
    inputs, output = parse(subscripts, len(operands))
    return network_argmax(
        inputs,
        output,
        operands,
        semiring=semiring,
        optimize=optimize,
        at=at,
        checkpoint=checkpoint,
        slices=slices,
        memory_limit=memory_limit,
        max_time=max_time,
        devices=devices,
    )


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


# --------------------------------------------------------------- network --
@_procs.scoped
def contract_network(
    inputs: Sequence[Sequence[Label]],
    output: Sequence[Label],
    operands: Sequence[Any],
    *,
    semiring: str = "maxplus",
    optimize: Any = "auto",
    slices: Sequence[Label] = (),
    memory_limit: int | None = None,
    max_time: float | None = None,
    algebra: type[Algebra] = Algebra,
    devices: _spread.Devices = None,
) -> Any:
    """:func:`einsum` with any hashable labels (``inputs``: one label sequence per operand).

    ``algebra`` is the number system: :class:`Algebra` (one array per operand) or the
    counting algebra of :mod:`lazykern.tn.counting` (a (value, count) pair each)."""
    net = _Network.build(inputs, output, operands, semiring, algebra)
    spread = _spread.resolve(devices, net.be)
    if spread is not None and net.alg.grad:
        raise ValueError(
            "devices= spreads slices over threads and worker processes, which autograd does not follow: drop devices= "
            "or pass tensors that do not require grad"
        )
    plan = net.plan(optimize, slices, memory_limit, max_time)
    if spread is not None and plan.nslices == 1 and (net.be.on_host or _home(net) in spread):
        # One slice runs where its operands are: no worker, no copy (and it may take the arena). The record says
        # so where a spread was asked for: the other devices get nothing of a plan of one slice.
        log.debug(
            "tn spread: one slice (largest intermediate %d entries): run on the operands' device, not spread",
            plan.largest,
            extra={"spread_profile": {"kind": "one slice, local", "nslices": 1, "largest": int(plan.largest),
                                      "devices": list(spread), "home": _home(net)}},
        )  # fmt: skip
        spread = None
    # Slices reuse the results no sliced label reaches, unless keeping them would not fit the device.
    cached = bool(plan.sliced) and net.fits(plan, 0, cached=True)
    building: list[threading.Thread] = []
    if spread is None:
        net.use_arena(plan)
        building = net.prefetch(plan)
    try:
        with net.memory_guard(plan, 0, cached=cached):
            if spread is not None:
                return net.finish(_spread.contract(net, plan, spread, contract_slices, ship=ship))
            return net.finish(contract_slices(net, plan, 0, plan.nslices, {} if cached else None))
    finally:
        for thread in building:  # the run's own builds end with it (each one its steps would have waited for)
            thread.join()


def _home(net: _Network) -> int | None:
    """The GPU ordinal the operands live on."""
    return net.be.device_of(net.leaves[0].parts[0])


def ship(net: _Network) -> dict[str, Any] | None:
    """``net`` as a worker process rebuilds it (:func:`unship`): its leaves as host arrays (as the algebra
    prepared them), labels, sizes, output, semiring and algebra. None for an algebra another process cannot
    name (a class made at run time other than a counting ring): such a spread keeps its threads."""
    alg = type(net.alg)
    recipe: Any
    moduli = tuple(getattr(alg, "moduli", ()))
    if getattr(alg, "counting", False) and moduli:
        recipe = ("counting", moduli)
    elif getattr(importlib.import_module(alg.__module__), alg.__qualname__, None) is alg:
        recipe = alg
    else:
        return None
    return {
        "semiring": net.alg.semiring,
        "algebra": recipe,
        "leaves": [(tuple(net.be.to_host(p) for p in t.parts), t.labels) for t in net.leaves],
        "output": net.output,
        "sizes": net.sizes,
    }


def unship(shipped: dict[str, Any], to_module: Callable[[Any], Any], algebra: type[Algebra]) -> _Network:
    """The network :func:`ship` described, its leaves made arrays of this process by ``to_module``, in
    ``algebra`` (the class ``shipped["algebra"]`` names: the caller resolves a counting ring's recipe)."""
    leaves = [Term(tuple(to_module(p) for p in parts), labels) for parts, labels in shipped["leaves"]]
    be, _ = backend_of(leaves[0].parts[0])
    alg = algebra(shipped["semiring"], be, False)
    alg.rank = {lab: i for i, lab in enumerate(shipped["sizes"])}
    return _Network(be, alg, leaves, tuple(shipped["output"]), dict(shipped["sizes"]))


def contract_range(net: _Network, plan: ContractionPlan, start: int, stop: int) -> Term:
    """Slices ``start`` to ``stop`` of ``net`` along ``plan``, as :func:`contract_network` runs its own
    (slice-independent steps reused where they fit, under this device's memory guard): a worker's group."""
    cached = bool(plan.sliced) and net.fits(plan, 0, cached=True)
    with net.memory_guard(plan, 0, cached=cached):
        return contract_slices(net, plan, start, stop, {} if cached else None)


def build_network(
    inputs: Sequence[Sequence[Label]],
    output: Sequence[Label],
    operands: Sequence[Any],
    semiring: str,
    algebra: type[Algebra],
) -> _Network:
    """The network :func:`contract_network` contracts (for callers that run :func:`contract_slices`
    themselves, such as the Dask workers of :mod:`lazykern.scale.dask`)."""
    return _Network.build(inputs, output, operands, semiring, algebra)


def contract_slices(net: _Network, plan: ContractionPlan, start: int, stop: int, cache: dict[int, Term] | None) -> Term:
    """The semiring sum of slices ``start`` to ``stop`` (their numbering in :meth:`ContractionPlan.slice_values`)
    of ``net`` contracted along ``plan``: the seam where slices can be spread over devices or workers,
    each summing a range and the ranges' results added with the algebra's ``add``. ``cache`` keeps the
    results of the steps no sliced label reaches across the slices of one caller (None: no reuse)."""
    result = None
    progress = Progress(stop - start)
    for values in plan.slice_values(start, stop):
        out = net.run(plan, values, keep=_NONE, cache=cache, progress=progress)
        progress.slice_done()
        result = out if result is None else Term(net.alg.add(result.parts, out.parts), out.labels)
    if result is None:
        raise ValueError(f"slices {start} to {stop} of a plan with {plan.nslices} hold none")
    return result


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
    net = _Network.build(inputs, (), operands, semiring, Algebra, fixed=fixed)
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
        keep = math.inf if checkpoint is False else (_NONE if checkpoint is True else int(checkpoint))
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
    net: _Network,
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
    recomputed argmax may hold (:meth:`_Network.checkpoints`, :meth:`_Network.segment_bytes`)."""
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
                    keep=keep if single else _NONE,
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


def _slice_optima(net: _Network, plan: ContractionPlan, start: int, stop: int) -> list[tuple[dict[Label, int], Any]]:
    """(sliced labels' values, optimum) of slices ``start`` to ``stop``: one device's share of
    :func:`network_argmax`'s search, read back once all of them are queued."""
    cache: dict[int, Term] = {}
    runs = [
        (values, net.run(plan, values, keep=_NONE, cache=cache).parts[0]) for values in plan.slice_values(start, stop)
    ]
    return [(values, net.be.item(out)) for values, out in runs]


def search_range(net: _Network, plan: ContractionPlan, start: int, stop: int) -> list[tuple[dict[Label, int], Any]]:
    """:func:`argmax_einsum`'s search over slices ``start`` to ``stop`` under this device's memory guard
    (no argmax kept): a worker process's group."""
    with net.memory_guard(plan, _NONE, cached=True):
        return _slice_optima(net, plan, start, stop)


def _as_is(value: Any, _device: int) -> Any:
    return value


def _better(semiring: str, v: Any, best: Any) -> bool:
    better: bool = v < best if semiring == "minplus" else v > best  # scalars of the operands' library
    return better


# ------------------------------------------------------------- internals --
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


def _check_sizes(inputs: Sequence[Sequence[Label]], output: Sequence[Label], sizes: dict[Label, int]) -> None:
    """Every label of ``inputs`` has a size, a positive int; every output label is in an input."""
    labels = {x for t in inputs for x in t}
    for lab in sorted(labels | set(output), key=str):
        if lab not in labels:
            raise ValueError(f"output label {lab!r} is in no input")
        size = sizes.get(lab)
        if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 0:
            raise ValueError(f"label {lab!r} needs a size, a non-negative int, in sizes; got {size!r}")


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
    cotengra's "combo" of multiply-adds and writes). The executor plans for a GPU by "seconds".

    >>> plan = contraction_plan(["ab", "bc", "cd"], "", dict(a=2, b=3, c=4, d=5), optimize="greedy")
    >>> plan.path, plan.largest, plan.flops
    (((1, 2), (0, 1)), 3, 66)

    Raises ValueError for a slice label that is in no input or is an output label, or a
    ``max_time`` that is not positive; ImportError for "cotengra" when cotengra is missing.
    """
    output = tuple(output)
    limit = DEFAULT_MEMORY_LIMIT if memory_limit is None else int(memory_limit)
    if limit < 1:
        raise ValueError(f"memory_limit must be a positive number of entries, got {memory_limit!r}")
    if rank not in _RANKS:
        raise ValueError(f"rank must be one of {sorted(_RANKS)}, got {rank!r}")
    _check_sizes(inputs, output, sizes)
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
        path, more = _cotengra_plan(terms, output, rest, limit, max_time, initial, store, rank)
    else:
        try:
            path, more = _search(terms, output, rest, optimize)
        except KeyError as exc:  # opt_einsum's word for a strategy it does not know
            raise ValueError(f"optimize={optimize!r} is no contraction strategy opt_einsum knows ({exc})") from None
    if set(more) & set(output):  # cotengra may slice an output label: the result must keep it, so slice here
        path, more = _slice_to(terms, output, rest, path, limit)
    explicit = isinstance(optimize, (list, tuple))  # a caller's own path is sliced only to a limit they set
    if not more and (memory_limit is not None or not explicit) and _costs(terms, output, rest, path, {})[0] > limit:
        path, more = _slice_to(terms, output, rest, path, limit)  # memory_limit holds for every strategy
    for lab in more:
        sliced.setdefault(lab, sizes[lab])
    largest, flops = _costs([tuple(t) for t in inputs], output, sizes, path, sliced)
    if more:
        _warn_if_costly(path, flops, _costs(terms, output, rest, path, {})[1], len(more), limit)
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


def check_slicing(
    inputs: Sequence[Sequence[Label]], output: Sequence[Label], sizes: dict[Label, int], plan: ContractionPlan
) -> None:
    """Refuse, before anything runs, a plan whose slicing makes the contraction take far longer than
    unsliced: each slice reruns the steps, and each run of a step costs Python and a launch whatever its
    size (K_18 with memory_limit=4: 2^16 slices of 170 steps, half an hour; memory_limit=1 on 16 spins:
    every spin sliced). Priced at the host's rates (:mod:`._cost`), which rank plans alike on a device."""
    if not plan.sliced:
        return
    steps = plan_steps(inputs, output, sizes, plan.path, plan.sliced)
    runs = sum(plan.nslices if s.depends else 1 for s in steps)
    if runs <= _RUNS_ALWAYS_FINE:
        return
    took = _cost.seconds(steps, plan.nslices, 8, _cost.HOST)
    whole = plan_steps(inputs, output, sizes, plan.path, {})
    unsliced = _cost.seconds(whole, 1, 8, _cost.HOST)
    if took <= _SLICING_SLOWDOWN * unsliced or took <= _SECONDS_FINE:
        if took > _SLICING_SAID * unsliced and took > _SECONDS_SAID:
            from ..errors import LazykernWarning, warn_user

            warn_user(
                f"the plan slices {len(plan.sliced)} labels to fit its memory limit ({plan.largest} entries sliced): "
                f"{plan.nslices} slices of {len(steps)} steps, {runs} step runs, predicted {took:.3g} s on the host "
                f"against {unsliced:.3g} s unsliced. Raise memory_limit (or leave it unset: it is sized to the "
                "memory) if the memory allows",
                LazykernWarning,
            )
        return
    raise SlicingError(
        f"the plan slices {len(plan.sliced)} labels: {plan.nslices} slices of {len(steps)} steps, {runs} step "
        f"runs, predicted {took:.3g} s on the host against {unsliced:.3g} s unsliced (largest intermediate "
        f"{max((s.result for s in whole), default=1)} entries, {plan.largest} sliced). Raise memory_limit (or "
        "leave it unset: it is sized to the memory), or slice fewer labels"
    )


_RUNS_ALWAYS_FINE = 1 << 14  # step runs that take seconds at most, however they were sliced
_SLICING_SLOWDOWN = 64  # predicted slowdown from slicing past which it is refused ...
_SECONDS_FINE = 60.0  # ... when it also takes more than this (a minute is the caller's to spend on memory)
_SLICING_SAID = 4  # a slowdown past this, predicted to take more than _SECONDS_SAID, is said before it runs
_SECONDS_SAID = 1.0


def _slice_to(
    terms: Any, output: Any, sizes: Any, path: list[tuple[int, ...]], limit: int
) -> tuple[list[tuple[int, ...]], list[Label]]:
    """``path`` with labels sliced until its intermediates fit ``limit`` entries: each time, of the
    ``_SLICE_CANDIDATES`` labels carried by the most intermediates over the limit, the one that adds
    the fewest multiply-adds. A few walks over the path per label, no tree search: it holds on a
    3000-step sweep, where cotengra's tree recursion does not."""
    sliced: dict[Label, int] = {}
    while True:
        over = _oversized(terms, output, sizes, path, sliced, limit)
        if not over:
            return path, list(sliced)
        candidates = [x for x, _ in over.most_common(_SLICE_CANDIDATES)]  # first met first among equals
        label = min(candidates, key=lambda x: _costs(terms, output, sizes, path, _sub(sizes, [*sliced, x]))[1])
        sliced[label] = sizes[label]


_SLICE_CANDIDATES = 3


def _oversized(
    terms: Any, output: Any, sizes: Any, path: Sequence[tuple[int, ...]], sliced: dict[Label, int], limit: int
) -> Counter[Label]:
    """How many intermediates over ``limit`` entries carry each label (sliced labels count 1 entry)."""
    size = {k: (1 if k in sliced else v) for k, v in sizes.items()}
    output = set(output)
    live = [set(t) for t in terms]
    uses = Counter(x for t in live for x in t)
    over: Counter[Label] = Counter()
    for step in path:
        picked = [live[i] for i in step]
        for i in sorted(step, reverse=True):
            _count(uses, live.pop(i), -1)
        kept = {x for t in picked for x in t if x in output or uses[x] > 0}
        if math.prod(size[x] for x in kept) > limit:
            over.update(x for x in sorted(kept, key=str) if x not in sliced and x not in output)
        live.append(kept)
        _count(uses, kept, 1)
    return over


COSTLY_SLICING = 16  # times the unsliced multiply-adds past which a memory limit's slicing is reported


def _warn_if_costly(path: Any, flops: int, unsliced: int, count: int, limit: int) -> None:
    if flops <= COSTLY_SLICING * unsliced:
        return
    from ..errors import LazykernWarning, warn_user

    warn_user(
        f"tropical contraction plan: fitting intermediates to memory_limit={limit} entries slices "
        f"{count} labels and costs {flops:.3g} multiply-adds, {flops / unsliced:.3g} times the "
        f"{unsliced:.3g} of the same order unsliced; raise memory_limit (or leave it to the default, "
        "sized to the device) if the memory allows",
        LazykernWarning,
    )


def _cotengra_plan(
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

    def costs(path: list[tuple[int, ...]], more: list[Label]) -> tuple[int, int]:
        return _costs(terms, output, sizes, path, _sub(sizes, more))

    found = _plan_store.load(key, terms, costs) if key else None
    if found is not None:
        return found
    path, more = _search_cotengra(terms, output, sizes, limit, max_time, seed, rank)
    if key:
        _plan_store.save(key, terms, path, more, costs(path, more))
    return path, more


def _sub(sizes: dict[Label, int], labels: Sequence[Label]) -> dict[Label, int]:
    return {lab: sizes[lab] for lab in labels}


def _costs(
    inputs: Sequence[Sequence[Label]],
    output: Collection[Label],
    sizes: dict[Label, int],
    path: Sequence[tuple[int, ...]],
    sliced: dict[Label, int],
) -> tuple[int, int]:
    """(entries of the largest intermediate, multiply-adds) of ``path``, as :meth:`_Network.run` runs it
    (what :func:`plan_steps` gives in full, in one lean walk: candidates' costs are compared often)."""
    size = {k: (1 if k in sliced else v) for k, v in sizes.items()}
    nslices = math.prod(sliced.values())
    largest = flops = 0
    for _, union, kept, depends in _walk(inputs, output, sliced, path):
        flops += math.prod(size[x] for x in union) * (nslices if depends else 1)
        largest = max(largest, math.prod(size[x] for x in kept))
    return largest, flops


def _walk(
    inputs: Sequence[Sequence[Label]],
    output: Collection[Label],
    sliced: Collection[Label],
    path: Sequence[tuple[int, ...]],
) -> Iterator[tuple[list[set[Label]], set[Label], set[Label], bool]]:
    """Each step of ``path`` as :meth:`_Network.run` takes it: its operands' labels, their union, the
    labels its result keeps, and whether it depends on the ``sliced`` labels."""
    output = set(output)
    terms = [(set(t), bool(set(sliced) & set(t))) for t in inputs]  # (labels, depends on the slice)
    uses = Counter(x for t, _ in terms for x in t)  # live terms carrying each label
    for step in path:
        picked = [terms[i] for i in step]
        for i in sorted(step, reverse=True):
            _count(uses, terms.pop(i)[0], -1)
        union = set().union(*(t for t, _ in picked))
        kept = {x for x in union if x in output or uses[x] > 0}
        depends = any(d for _, d in picked)
        yield [t for t, _ in picked], union, kept, depends
        terms.append((kept, depends))
        _count(uses, kept, 1)


def plan_flops(
    inputs: Sequence[Sequence[Label]], output: Collection[Label], sizes: dict[Label, int], plan: ContractionPlan
) -> int:
    """The multiply-adds of ``plan`` over every slice, priced on this network's own labels and sizes: the
    figure a plan carries is the network's it was made for (one made for other sizes, or written by hand
    with the default 0, carries another), and a rounding bound must not rest on it."""
    steps = plan_steps(inputs, output, sizes, plan.path, dict(plan.sliced))
    return sum(int(s.flops) for s in steps) * int(plan.nslices)


def plan_steps(
    inputs: Sequence[Sequence[Label]],
    output: Collection[Label],
    sizes: dict[Label, int],
    path: Sequence[tuple[int, ...]],
    sliced: dict[Label, int],
) -> list[_cost.Step]:
    """The steps of ``path`` as :mod:`._cost` prices them (entries per slice: sliced labels count 1).
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
            _count(uses, terms.pop(i)[0], -1)
        union = set().union(*(t for t, _, _ in picked))
        kept = {x for x in union if x in output or uses[x] > 0}
        depends = any(d for _, d, _ in picked)
        operands = tuple(math.prod(size[x] for x in t) for t, _, _ in picked)
        # A sliced run caches the slice-independent operands of a slice-dependent step (_Network.run).
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
        _count(uses, kept, 1)
    return steps


def fit_to_memory(
    make: Callable[[int], ContractionPlan], limit: int, peak: Callable[[ContractionPlan], int], free: int | None
) -> ContractionPlan:
    """``make(limit)``, its largest intermediate halved (more slices) until its predicted peak fits
    ``free`` bytes with the pool's margin (None: the host, taken as it is). Stops where a halving
    no longer lowers the peak (the operands themselves fill the memory) or multiplies the cost by
    more than ``COSTLY_SLICING``: a plan that does not fit is returned as it is, and running it
    raises :class:`DeviceMemoryError` with the figures."""
    plan = make(limit)
    if free is None:
        return plan
    need = peak(plan)
    for _ in range(_FIT_TRIES):
        if need * _cost.POOL_MARGIN <= free or plan.largest <= 1:
            break
        limit = max(min(limit, plan.largest) // 2, 1)
        log.info("contraction plan: peak %.2f GiB over %.2f GiB free; replanning with intermediates <= %d entries",
                 need / 2**30, free / 2**30, limit)  # fmt: skip
        smaller = make(limit)
        if peak(smaller) >= need or smaller.flops > COSTLY_SLICING * plan.flops:
            break  # no lower, or at a cost the caller should decide on: the guard refuses it with figures
        plan, need = smaller, peak(smaller)
    return plan


_FIT_TRIES = 4  # halvings of the slicing target before the plan is left to be refused with its figures


def fit_in_place(
    make: Callable[[int], ContractionPlan], limit: int, peak: Callable[[ContractionPlan], int], free: int | None
) -> ContractionPlan:
    """:func:`fit_to_memory` for an executor whose steps run in place (one boundary held, not the four
    arrays ``limit`` was sized for): from four times ``limit`` first, and from ``limit`` as for any
    executor where that found no plan that fits (its halvings stop at a costly slicing)."""
    plan = fit_to_memory(make, limit * 4, peak, free)
    if free is None or peak(plan) * _cost.POOL_MARGIN <= free:
        return plan
    return fit_to_memory(make, limit, peak, free)


def _memory_message(
    plan: ContractionPlan,
    need: int,
    free: int,
    host: bool = False,
    margin: float = _cost.POOL_MARGIN,
    argmax: bool = True,
) -> str:
    where, room = ("RAM", "of RAM is available (MemAvailable)") if host else ("device memory", "is free")
    return (
        f"the contraction needs {need / 2**30:.2f} GiB of {where} at its peak (plus "
        f"{100 * (margin - 1):.0f}% for the pool; largest intermediate {plan.largest} entries, "
        f"{plan.nslices} slices) but {free / 2**30:.2f} GiB {room}: pass a smaller memory_limit= "
        f"(entries of the largest intermediate; it slices more), a smaller dtype, "
        f"{'checkpoint=True for argmax, ' if argmax else ''}or free {where}"
    )


def _count(uses: Counter[Label], labels: Any, by: int) -> None:
    """Counter.update / subtract for a few labels, without their per-call type checks (a tenth of a
    second over the steps of a 32 x 32 lattice)."""
    for x in labels:
        uses[x] += by


@dataclass
class _Node:
    """A step of a run: "pair" or "reduce", its children (ids below len(leaves) are
    leaves), the labels of its result, and what it chose (when kept)."""

    kind: str
    children: tuple[int, ...]
    labels: tuple[Label, ...]
    choice: Choice | None


@dataclass
class _Network:
    be: Backend
    alg: Algebra
    leaves: list[Term]
    output: tuple[Label, ...]
    sizes: dict[Label, int]
    nodes: dict[int, _Node] = field(default_factory=dict)
    root: int = 0
    saved: dict[int, Term] = field(default_factory=dict)  # node -> its values, the backtracking's checkpoints
    # The last plan's priced steps and tree: the argmax split prices one plan a hundred times.
    memo: tuple[ContractionPlan, list[_cost.Step], _recompute.Tree] | None = field(default=None, repr=False)
    # The last plan's peak profile keeping no argmax (:class:`._cost.ArgmaxPeak`), with the leaves' entries.
    bare: tuple[ContractionPlan, int, tuple[list[int], list[int]]] | None = field(default=None, repr=False)

    @classmethod
    def build(
        cls,
        inputs: Sequence[Sequence[Label]],
        output: Sequence[Label],
        operands: Sequence[Any],
        semiring: str,
        algebra: type[Algebra],
        fixed: dict[Label, int] | None = None,
    ) -> _Network:
        semiring = _check_semiring(semiring, algebra)
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
        _check_dtypes(be, leaves)
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

    # -- planning
    @property
    def entry_bytes(self) -> int:
        """Bytes per entry of every array of the run (value and count together when counting)."""
        return sum(self.be.dtype(p).itemsize for p in self.leaves[0].parts)

    def plan(
        self, optimize: Any, slices: Sequence[Label], memory_limit: int | None, max_time: float | None
    ) -> ContractionPlan:
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
                    rank="flops" if self.be.on_host else "seconds",
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
        """Predicted bytes at the worst moment of ``plan``'s run on this network (:func:`._cost.peak_bytes`);
        ``entry_bytes``: another width than the leaves' (a counting pass carrying more residues)."""
        steps, _ = self.priced(plan)
        leaves = sum(math.prod(int(n) for n in t.parts[0].shape) for t in self.leaves)
        if not cached:  # a run without the slices' cache keeps nothing beyond a step's use
            steps = [s._replace(pinned=0) for s in steps]
        width = self.entry_bytes if entry_bytes is None else entry_bytes
        if self.alg.arena is not None:  # an energy's run holding its boundary in one buffer
            return _cost.arena_peak(steps, leaves, width, 1 << self.alg.arena.bits)
        return _cost.peak_bytes(steps, leaves, width, keep, save, self.inplace, host=self.be.host_ram)

    def use_arena(self, plan: ContractionPlan) -> None:
        """Keep the boundary of ``plan``'s run in one buffer (:mod:`._arena`): an unsliced max-plus / min-plus
        contraction of float values on CuPy whose predicted peak (two boundaries at a step) does not fit the
        free device memory, while :func:`._cost.arena_peak` does; or, where it fits, whose largest
        intermediate has ARENA_FASTER entries or more, every label binary, and every step of that size one the
        arena takes by its rules (:func:`._cost.arena_run`: a boundary sweep's, whose row steps would copy
        the boundary to each one's layout; not a greedy order's wide products, which stay batched). Only
        for a run on one thread with no slice cache and no kept argmax (:func:`contract_network`), whose
        every intermediate is its own: the arena's rules free a term the step after it is read."""
        alg = self.alg
        alg.arena = None
        if plan.nslices > 1 or alg.counting or alg.nparts != 1 or alg.grad or not alg.strided:
            return
        if not _arena.capable(alg.semiring, self.be.dtype(self.leaves[0].parts[0]), self.be):
            return
        free = self.be.budget_bytes()
        if free is None:
            return
        steps, _ = self.priced(plan)
        largest = max((s.result for s in steps), default=1)
        bits = largest.bit_length() - 1
        leaves = sum(math.prod(int(n) for n in t.parts[0].shape) for t in self.leaves)
        fits = self.fits(plan, 0, cached=False)
        if fits and (largest < ARENA_FASTER or any(n != 2 for n in self.sizes.values())):
            return
        need, resident = _cost.arena_run(steps, leaves, self.entry_bytes, 1 << bits)
        if fits and not all(n in resident for n, s in enumerate(steps) if s.result >= ARENA_FASTER):
            return  # its large steps are products the arena cannot take (a greedy order's): they stay batched
        if need * _cost.POOL_MARGIN <= free:
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
            return _arena.prefetch(self.be, like[0], self.alg.semiring, tiles)
        return self.alg.prefetch(like, tiles)

    @property
    def inplace(self) -> bool:
        """Whether the executor runs bit-addressed steps, some over their operand (:func:`._contract.contract`)."""
        return hasattr(self.alg, "bits") and not self.be.on_host

    def priced(self, plan: ContractionPlan) -> tuple[list[_cost.Step], _recompute.Tree]:
        """``plan``'s steps as :mod:`._cost` and :mod:`._recompute` price them (the last plan's kept)."""
        if self.memo is None or self.memo[0] is not plan:
            inputs = [t.labels for t in self.leaves]
            steps = plan_steps(inputs, self.output, self.sizes, plan.path, plan.sliced)
            sized = {x: (1 if x in plan.sliced else n) for x, n in self.sizes.items()}
            self.memo = (plan, steps, _recompute.Tree(inputs, sized, plan.path))
        return self.memo[1], self.memo[2]

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
        keep: float = sizes[fits - 1] if fits else _NONE
        log.info("argmax: keeping the choices of steps up to %s entries; the larger ones are recomputed", keep)
        return keep

    def checkpoints(self, plan: ContractionPlan, keep: float, free: int | None) -> frozenset[int]:
        """Steps whose values an argmax run keeps for the backtracking. Between two checkpoints the
        backtracking recomputes a segment once (:meth:`recompute`) instead of every step from the leaves.
        With the device's free memory known (``free``), the set the search of :func:`._recompute.place`
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
        (:meth:`redo_seconds` of :meth:`._recompute.Tree.redone`) among keeping every choice that fits and
        keeping fewer. Keeping
        fewer adds segments and only pays by the memory it frees: a smaller ``keep`` that frees less
        than a hundredth of the free memory beside the last one priced is not priced."""
        most = self.keep_that_fits(plan, free)
        if free is None or most == math.inf:
            return most, frozenset(), math.inf
        steps, tree = self.priced(plan)
        sizes = sorted({s.result for s in steps if s.result <= most})
        options = [*sizes[:: -max(1, len(sizes) // 4)], _NONE]  # a few, from the most kept to none
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
        multiply-adds at the rate the plan's own run is predicted to have (:func:`._cost.seconds`), and
        each step's fixed cost through the executor (``step`` and ``overhead`` of :mod:`._cost`'s rates)."""
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
        its backtracking, as a function of the checkpoints (:class:`._cost.ArgmaxPeak`)."""
        steps, _ = self.priced(plan)
        if self.bare is None or self.bare[0] is not plan:
            leaves = sum(math.prod(int(n) for n in t.parts[0].shape) for t in self.leaves)
            self.bare = (plan, leaves, _cost.peak_profile(steps, leaves, self.entry_bytes, _NONE))
        _, leaves, bare = self.bare
        return _cost.ArgmaxPeak(steps, leaves, self.entry_bytes, keep, host=self.be.host_ram, bare=bare)

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
                raise DeviceMemoryError(_memory_message(plan, need, free, self.be.host_ram, margin, argmax))
        check_slicing([t.labels for t in self.leaves], self.output, self.sizes, plan)
        try:
            yield
        except Exception as exc:
            if not self.be.out_of_memory(exc):
                raise
            self.be.release_cached()
            raise DeviceMemoryError(
                _memory_message(plan, need, self.be.free_bytes() or 0, margin=margin, argmax=argmax)
                + f" (the device refused an allocation: {exc})"
            ) from exc

    def on_device(self, device: int | None) -> _Network:
        """This network with its operands on GPU ``device`` and no recorded run (host: a copy that
        shares the operands); one per thread, since :meth:`run` records its steps on the network."""
        leaves = [Term(tuple(self.be.to_device(p, device) for p in t.parts), t.labels) for t in self.leaves]
        return replace(self, leaves=leaves, nodes={}, root=0, saved={}, memo=None, bare=None)

    # -- running
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
        argmax of the steps whose results have at most ``keep`` entries (``_NONE``: none), and the
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
                _count(uses, live.pop(i)[1].labels, -1)
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
            _count(uses, term.labels, 1)
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
        """One step of a plan outside :meth:`run`, as run's own step contracts it (:mod:`._shared`: the steps
        every pass of a count shares): ``uses`` counts the labels of the live terms once ``terms`` are taken
        out; ``owned``: whose arrays the step may write over. No argmax is kept."""
        _, term = self._step([(-1, t) for t in terms], uses, set(self.output), _NONE, owned)
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
        ``owned``: per picked term, whether its arrays may be overwritten (:func:`._contract.contract`)."""
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
        self.nodes[node_id] = _Node(kind, children, term.labels, choice)
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


def _check_semiring(semiring: str, algebra: type[Algebra]) -> str:
    if algebra.counting:
        if semiring not in ("maxplus", "minplus"):
            raise ValueError(f"counting supports semiring 'maxplus' or 'minplus', got {semiring!r}")
        return semiring
    return reference.check_semiring(semiring)


def _check_dtypes(be: Backend, leaves: list[Term]) -> None:
    dtypes = {be.dtype(t.parts[0]) for t in leaves}
    if len(dtypes) > 1:
        raise TypeError(f"operands have dtypes {sorted(map(str, dtypes))}; convert them to one dtype")
    if be.on_host and any(d.kind == "O" for d in dtypes):  # Python ints: exact sums past int64 (tn/_exact.py)
        return
    reference.check_dtype(dtypes.pop(), "operands")


def _search(
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
    objectives = ("flops", COMBO) if rank == "seconds" else ("flops",)

    def cost(path: list[tuple[int, ...]], more: list[Label]) -> tuple[int, int, float]:
        largest, flops = _costs(inputs, output, sizes, path, _sub(sizes, more))
        if rank == "seconds":
            return largest, flops, _gpu_seconds(inputs, output, sizes, path, _sub(sizes, more))
        return largest, flops, flops

    options = [(_search(inputs, output, sizes, "greedy")[0], [])]  # the fallback, whatever the workers do
    longer = max_time is None and _costs(inputs, output, sizes, options[0][0], {})[1] >= LONG_SEARCH_FLOPS
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


_RANKS = ("flops", "seconds")
COMBO = "combo-64"  # cotengra's objective for the "seconds" workers: a write costs 64 multiply-adds (its default)


def _gpu_seconds(
    inputs: Sequence[Sequence[Label]],
    output: Collection[Label],
    sizes: dict[Label, int],
    path: Sequence[tuple[int, ...]],
    sliced: dict[Label, int],
) -> float:
    """Predicted GPU seconds of ``path`` (float32 rates, :func:`._cost.step_seconds`: each step its
    multiply-adds or the entries it reads and writes, whichever binds), in one lean walk as :func:`_costs`."""
    size = {k: (1 if k in sliced else v) for k, v in sizes.items()}
    nslices = math.prod(sliced.values())
    rates = _cost.rates_for(False, 4)
    total = 0.0
    for picked, union, kept, depends in _walk(inputs, output, sliced, path):
        operands = tuple(math.prod(size[x] for x in t) for t in picked)
        one = _cost.Step(math.prod(size[x] for x in union), operands, math.prod(size[x] for x in kept), depends)
        total += _cost.step_seconds(one, 4, rates) * (nslices if depends else 1)
    return total


CHEAP_FLOPS = 2**30  # multiply-adds under which an order is not worth searching for (~0.1 ms of GPU, ~1 s of CPU)
LONG_SEARCH_FLOPS = 2**36  # a greedy order this costly: the default search time is too short to be repeatable
LONG_SEARCH_TIMES = 2
_SECOND_SEED = 1000  # the second search's workers: other seeds than the first's
SMALL_NETWORK = 512  # tensors up to which opt_einsum's greedy order (milliseconds) is tried before a search


def _budget(max_time: float | None) -> float:
    budget = _planner.DEFAULT_MAX_TIME if max_time is None else float(max_time)
    if budget <= 0:
        raise ValueError(f"max_time must be a positive number of seconds, got {max_time!r}")
    return budget


def _cheap(inputs: Any, output: Any, sizes: Any, initial: Any, limit: int) -> list[tuple[int, ...]] | None:
    """``initial`` (else, on a small network, opt_einsum's greedy order) when it fits ``limit`` unsliced
    and costs at most CHEAP_FLOPS: a search (cotengra's import, worker processes, a store lookup)
    would cost more than it could save."""
    candidates: list[Callable[[], list[tuple[int, ...]]]] = [] if initial is None else [lambda: list(initial)]
    if len(inputs) <= SMALL_NETWORK:
        candidates.append(lambda: _search(inputs, output, sizes, "greedy")[0])
    for make in candidates:
        path = make()
        largest, flops = _costs(inputs, output, sizes, path, {})
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


# ------------------------------------------------------------ backtracking --
def _backtrack(net: _Network, assignment: dict[Label, int], budget: float) -> None:
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
