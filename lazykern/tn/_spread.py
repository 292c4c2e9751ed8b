"""A sliced contraction spread over several devices: one contiguous group of slices per device.

Each group runs on its own thread with its device current, on its own copy of the network's
operands (the plan is replayed there; the steps no sliced label reaches run once per group and
are cached for that group's later slices). The partial results come back to the operands'
device and are added there in the semiring, in group order, so ties and counts combine as the
one-device loop combines them: the result equals one device's. NumPy operands stay on the
host: their groups are host threads (NumPy's kernels release the GIL).

GPU operands spread over processes instead (:mod:`._procs`): the group on the operands' device runs in this
process, each other group in a worker process of its device (ended with the call that started it;
``keep_workers()`` keeps it), sent the network as host arrays (:func:`lazykern.tn.contraction.ship.ship`) and the plan
(no search in a worker); its partial comes back as host arrays and is added as a thread's would be, in group
order. One interpreter driving every device takes turns on the GIL between their host work (a spread's steps
are hundreds of small launches); a process per device does not. ``LAZYKERN_SPREAD`` (``threads`` /
``processes``) overrides the choice (NumPy operands default to threads: NumPy's kernels release the GIL). A
network whose algebra another process cannot name keeps its threads.

Each spread logs its profile at debug level (``extra={"spread_profile": {...}}`` on the
``lazykern`` logger, :func:`profile_record`): per group its device, slices, when it began and
ended after the spread's start, and its thread's CPU seconds; the combination's seconds. A group
whose CPU seconds are close to its wall seconds was driven by the host (launches, Python), not by
its device: that, not the slice count, is then what bounds the speed-up.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

import numpy as np

from .. import config
from ..launch import _device
from ..launch._batch_split import split_batch
from ..launch._threads import run_each
from . import _procs
from ._backend import Backend
from ._contract import Algebra, Term

log = logging.getLogger("lazykern")

T = TypeVar("T")
Devices = Sequence[int] | str | None
Activate = Callable[[int | None], AbstractContextManager[Any]]


class SlicedNetwork(Protocol):
    """What this module needs of a network (:class:`lazykern.tn.contraction.network.Network`)."""

    be: Backend
    alg: Algebra
    leaves: list[Term]

    def on_device(self, device: int | None) -> SlicedNetwork: ...


RunRange = Callable[[Any, Any, int, int, "dict[Any, Any] | None"], Term]
Ship = Callable[[Any], "dict[str, Any] | None"]
WORKER = "lazykern.tn._proc_worker"  # the module whose functions a worker process runs


def in_processes(be: Backend) -> bool:
    """Whether a spread of ``be``'s operands runs its other devices' groups in worker processes
    (``LAZYKERN_SPREAD``, else: GPU operands do, NumPy's keep threads)."""
    mode = config.spread_mode()
    return (mode == "processes") if mode is not None else not be.on_host


def resolve(devices: Devices, be: Backend) -> list[int] | None:
    """``devices=`` as a list of ordinals; None keeps today's one-device loop.

    ``"all"``: every GPU this process sees (with none, as on a CPU machine, one group). For GPU
    operands every ordinal must exist; for NumPy operands the ordinals only name host threads.
    """
    wanted = ordinals(devices)
    if isinstance(wanted, str):  # "all"
        return list(range(max(_device.count(), 1)))
    if wanted is not None and not be.on_host:
        n = _device.count()
        missing = [d for d in wanted if d >= n]
        if missing:
            seen = f"{n} GPU(s), ordinals 0..{n - 1}" if n else "no GPU"
            raise ValueError(f"devices {missing} do not exist: this process sees {seen}")
    return wanted


def ordinals(devices: Devices) -> list[int] | str | None:
    """``devices=`` checked for its form (what :func:`resolve` takes; whether the GPUs exist is its
    question): None, "all", or distinct non-negative ints."""
    if devices is None:
        return None
    if isinstance(devices, str):
        if devices != "all":
            raise ValueError(f"devices must be 'all', None or a sequence of GPU ordinals, got {devices!r}")
        return "all"
    try:
        given = list(devices)
    except TypeError:
        raise TypeError(f"devices must be 'all', None or a sequence of GPU ordinals, got {devices!r}") from None
    if any(isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)) for d in given):
        raise TypeError(f"devices are GPU ordinals (ints such as 0, 1), got {given!r}")
    wanted = [int(d) for d in given]
    if not wanted:
        raise ValueError("devices must name at least one device, got an empty sequence")
    if len(set(wanted)) != len(wanted) or min(wanted) < 0:
        raise ValueError(f"devices must be distinct non-negative ordinals, got {wanted}")
    return wanted


def groups(nslices: int, devices: Sequence[int]) -> list[tuple[int, int, int]]:
    """``(device, start, stop)``: contiguous, as even as can be; devices left without a slice get no group.

    >>> groups(5, [0, 1])
    [(0, 0, 3), (1, 3, 5)]
    """
    shares = split_batch(nslices, len(devices))
    return [(d, lo, hi) for d, (lo, hi) in zip(devices, shares) if hi > lo]


def profile_record(
    nslices: int, groups_timed: Sequence[dict[str, Any]], combine_seconds: float, total_seconds: float
) -> dict[str, Any]:
    """The profile one spread logs: ``groups`` (device, start, stop, began, ended, cpu_seconds, each in
    seconds after the spread began), ``combine_seconds``, ``seconds`` and ``balance`` (the shortest
    group's wall seconds over the longest's: 1.0 is an even split)."""
    walls = [g["ended"] - g["began"] for g in groups_timed]
    return {
        "nslices": nslices,
        "groups": list(groups_timed),
        "combine_seconds": round(combine_seconds, 6),
        "seconds": round(total_seconds, 6),
        "balance": round(min(walls) / max(walls), 3) if walls and max(walls) > 0 else 1.0,
    }


def run_groups(
    net: SlicedNetwork,
    nslices: int,
    devices: Sequence[int],
    work: Callable[[Any, int, int], T],
    activate: Activate | None = None,
    timings: list[dict[str, Any]] | None = None,
) -> list[T]:
    """``work(network on the device, start, stop)`` for each group of slices, on its own thread with
    its device current; the results in group (slice) order, once the device's work has finished.

    ``activate(device)`` makes a device current for a ``with`` block (default: the backend's
    :meth:`~Backend.on_device`; tests pass their own to see where each group ran). ``timings``
    receives one entry per group, in group order (see :func:`profile_record`)."""
    be = net.be
    enter = be.on_device if activate is None else activate
    todo = groups(nslices, devices)
    log.debug("tropical: %d slices in %d groups over devices %s", nslices, len(todo), [g[0] for g in todo])
    t0 = time.perf_counter()
    timed: list[dict[str, Any]] = [{} for _ in todo]

    def one(index: int, device: int, start: int, stop: int) -> T:
        began, cpu = time.perf_counter(), time.thread_time()
        try:
            with enter(device):
                out = work(net.on_device(device), start, stop)
                be.synchronize()  # another device's stream copies this result next
                return out
        finally:
            timed[index] = {
                "device": device,
                "start": start,
                "stop": stop,
                "began": round(began - t0, 6),
                "ended": round(time.perf_counter() - t0, 6),
                "cpu_seconds": round(time.thread_time() - cpu, 6),
            }

    try:
        if len(todo) == 1:
            return [one(0, *todo[0])]
        # a thread of each group's own, all joined before an error of one is raised
        return run_each([functools.partial(one, i, *g) for i, g in enumerate(todo)], "lazykern-slices")
    finally:
        if timings is not None:
            timings.extend(timed)


def spread_groups(
    net: SlicedNetwork,
    plan: Any,
    devices: Sequence[int],
    work: Callable[[Any, int, int], T],
    remote: str,
    convert: Callable[[Any, int], T],
    activate: Activate | None = None,
    ship: Ship | None = None,
    timings: list[dict[str, Any]] | None = None,
) -> list[T]:
    """:func:`run_groups` over ``plan``'s slices, or, where ``ship`` can describe the network and
    :func:`in_processes`, the group on the operands' device (else the first) here and each other in its
    device's worker process, running ``_proc_worker.<remote>(shipped, module, plan, start, stop)``; a
    worker's answer becomes a group's result through ``convert(answer, device)``."""
    be = net.be
    todo = groups(int(plan.nslices), devices)
    shipped = ship(net) if ship is not None and len(todo) > 1 and in_processes(be) else None
    if shipped is None:
        return run_groups(net, int(plan.nslices), devices, work, activate, timings)
    enter = be.on_device if activate is None else activate
    home = be.device_of(net.leaves[0].parts[0])
    timed: list[dict[str, Any]] = [] if timings is None else timings
    return _in_processes(net, plan, todo, shipped, work, enter, home, timed, remote, convert)


def contract(
    net: SlicedNetwork,
    plan: Any,
    devices: Sequence[int],
    run_range: RunRange,
    activate: Activate | None = None,
    ship: Ship | None = None,
) -> Term:
    """The semiring sum of every slice of ``plan``, one group of slices per device in ``devices``.

    ``run_range(net, plan, start, stop, cache)`` sums one range on the current device (the
    one-device loop); ``activate`` as for :func:`run_groups`. ``ship(net)``: the network as a worker
    process rebuilds it (None: it cannot be); given, and :func:`in_processes`, the groups of other
    devices run in worker processes (see the module's docstring).
    """
    be = net.be
    enter = be.on_device if activate is None else activate
    home = be.device_of(net.leaves[0].parts[0])

    def work(local: Any, start: int, stop: int) -> Term:
        return run_range(local, plan, start, stop, {} if plan.sliced else None)

    def term(answer: Any, _: int) -> Term:
        parts, labels = answer
        with enter(home):
            return Term(tuple(be.from_host(p) for p in parts), labels)

    profiling = log.isEnabledFor(logging.DEBUG)
    t0 = time.perf_counter()
    timed: list[dict[str, Any]] = []
    partials = spread_groups(net, plan, devices, work, "slices", term, activate, ship, timed)
    t1 = time.perf_counter()
    with enter(home):
        total = _home(be, partials[0], home)
        for part in partials[1:]:
            part = _home(be, part, home)
            total = Term(net.alg.add(total.parts, part.parts), part.labels)
        if profiling:
            be.synchronize()  # the combination's own seconds, not the next step's
    t2 = time.perf_counter()
    if profiling:
        profile = profile_record(int(plan.nslices), timed, t2 - t1, t2 - t0)
        log.debug(
            "tn spread: %d slices over %d devices in %.3f s (balance %.2f)",
            profile["nslices"],
            len(timed),
            profile["seconds"],
            profile["balance"],
            extra={"spread_profile": profile},
        )
    return total


def _in_processes(
    net: SlicedNetwork,
    plan: Any,
    todo: list[tuple[int, int, int]],
    shipped: dict[str, Any],
    work: Callable[[Any, int, int], T],
    enter: Activate,
    home: int | None,
    timed: list[dict[str, Any]],
    remote: str,
    convert: Callable[[Any, int], T],
) -> list[T]:
    """The groups ``todo``: the one on ``home`` (else the first) here, each other in its device's worker
    process; the results in group order. ``timed`` as for :func:`run_groups` (a worker's group: from when
    it was sent, for the seconds the worker reports, its process CPU time)."""
    be = net.be
    mine = next((i for i, g in enumerate(todo) if g[0] == home), 0)
    others = [i for i in range(len(todo)) if i != mine]
    t0 = time.perf_counter()
    stamps: dict[int, dict[str, Any]] = {}

    def here() -> T:
        device, start, stop = todo[mine]
        began, cpu = time.perf_counter(), time.thread_time()
        try:
            with enter(device):
                out = work(net.on_device(device), start, stop)
                be.synchronize()
                return out
        finally:
            stamps[mine] = _stamp(todo[mine], began - t0, time.perf_counter() - t0, time.thread_time() - cpu)

    calls = [(todo[i][0], WORKER, remote, (shipped, be.name, plan, todo[i][1], todo[i][2])) for i in others]
    log.debug("tropical: %d slices in %d groups, %d in worker processes", plan.nslices, len(todo), len(others))
    answers = _procs.run(calls, here, gpu=not be.on_host)
    results: list[T] = [answers[0]] * len(todo)
    for i, answer in zip(others, answers[1:]):
        stamps[i] = _stamp(todo[i], 0.0, answer["seconds"], answer["cpu_seconds"])
        results[i] = convert(answer["value"], todo[i][0])
    timed.extend(stamps[i] for i in range(len(todo)))
    return results


def _stamp(group: tuple[int, int, int], began: float, ended: float, cpu: float) -> dict[str, Any]:
    device, start, stop = group
    return {
        "device": device,
        "start": start,
        "stop": stop,
        "began": round(began, 6),
        "ended": round(ended, 6),
        "cpu_seconds": round(cpu, 6),
    }


def _home(be: Backend, term: Term, home: int | None) -> Term:
    return Term(tuple(be.to_device(p, home) for p in term.parts), term.labels)
