"""A sliced contraction spread over several devices: one contiguous group of slices per device.

Each group runs on its own thread with its device current, on its own copy of the network's
operands (the plan is replayed there; the steps no sliced label reaches run once per group and
are cached for that group's later slices). The partial results come back to the operands'
device and are added there in the semiring, in group order, so ties and counts combine as the
one-device loop combines them: the result equals one device's. NumPy operands stay on the
host: their groups are host threads (NumPy's kernels release the GIL).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

from ..launch import _device
from ..launch._batch_split import split_batch
from ._backend import Backend
from ._contract import Algebra, Term

log = logging.getLogger("lazykern")

T = TypeVar("T")
Devices = Sequence[int] | str | None
Activate = Callable[[int | None], AbstractContextManager[Any]]


class SlicedNetwork(Protocol):
    """What this module needs of a network (:class:`lazykern.tn.einsum._Network`)."""

    be: Backend
    alg: Algebra
    leaves: list[Term]

    def on_device(self, device: int | None) -> SlicedNetwork: ...


RunRange = Callable[[Any, Any, int, int, "dict[Any, Any] | None"], Term]


def resolve(devices: Devices, be: Backend) -> list[int] | None:
    """``devices=`` as a list of ordinals; None keeps today's one-device loop.

    ``"all"``: every GPU this process sees (with none, as on a CPU machine, one group). For GPU
    operands every ordinal must exist; for NumPy operands the ordinals only name host threads.
    """
    if devices is None:
        return None
    if isinstance(devices, str):
        if devices != "all":
            raise ValueError(f"devices must be 'all', None or a sequence of GPU ordinals, got {devices!r}")
        return list(range(max(_device.count(), 1)))
    try:
        wanted = [int(d) for d in devices]
    except (TypeError, ValueError):
        raise TypeError(f"devices must be 'all', None or a sequence of GPU ordinals, got {devices!r}") from None
    if not wanted:
        raise ValueError("devices must name at least one device, got an empty sequence")
    if len(set(wanted)) != len(wanted) or min(wanted) < 0:
        raise ValueError(f"devices must be distinct non-negative ordinals, got {wanted}")
    if not be.on_host:
        n = _device.count()
        missing = [d for d in wanted if d >= n]
        if missing:
            seen = f"{n} GPU(s), ordinals 0..{n - 1}" if n else "no GPU"
            raise ValueError(f"devices {missing} do not exist: this process sees {seen}")
    return wanted


def groups(nslices: int, devices: Sequence[int]) -> list[tuple[int, int, int]]:
    """``(device, start, stop)``: contiguous, as even as can be; devices left without a slice get no group.

    >>> groups(5, [0, 1])
    [(0, 0, 3), (1, 3, 5)]
    """
    shares = split_batch(nslices, len(devices))
    return [(d, lo, hi) for d, (lo, hi) in zip(devices, shares) if hi > lo]


def run_groups(
    net: SlicedNetwork,
    nslices: int,
    devices: Sequence[int],
    work: Callable[[Any, int, int], T],
    activate: Activate | None = None,
) -> list[T]:
    """``work(network on the device, start, stop)`` for each group of slices, on its own thread with
    its device current; the results in group (slice) order, once the device's work has finished.

    ``activate(device)`` makes a device current for a ``with`` block (default: the backend's
    :meth:`~Backend.on_device`; tests pass their own to see where each group ran)."""
    be = net.be
    enter = be.on_device if activate is None else activate
    todo = groups(nslices, devices)
    log.debug("tropical: %d slices in %d groups over devices %s", nslices, len(todo), [g[0] for g in todo])

    def one(device: int, start: int, stop: int) -> T:
        with enter(device):
            out = work(net.on_device(device), start, stop)
            be.synchronize()  # another device's stream copies this result next
            return out

    if len(todo) == 1:
        return [one(*todo[0])]
    with ThreadPoolExecutor(max_workers=len(todo), thread_name_prefix="lazykern-slices") as pool:
        futures = [pool.submit(one, *g) for g in todo]
        wait(futures)  # every group ends before an error of one is raised: no thread outlives the call
        return [f.result() for f in futures]


def contract(
    net: SlicedNetwork,
    plan: Any,
    devices: Sequence[int],
    run_range: RunRange,
    activate: Activate | None = None,
) -> Term:
    """The semiring sum of every slice of ``plan``, one group of slices per device in ``devices``.

    ``run_range(net, plan, start, stop, cache)`` sums one range on the current device (the
    one-device loop); ``activate`` as for :func:`run_groups`.
    """
    be = net.be
    enter = be.on_device if activate is None else activate
    home = be.device_of(net.leaves[0].parts[0])

    def work(local: Any, start: int, stop: int) -> Term:
        return run_range(local, plan, start, stop, {} if plan.sliced else None)

    partials = run_groups(net, int(plan.nslices), devices, work, activate)
    with enter(home):
        total = _home(be, partials[0], home)
        for part in partials[1:]:
            part = _home(be, part, home)
            total = Term(net.alg.add(total.parts, part.parts), part.labels)
    return total


def _home(be: Backend, term: Term, home: int | None) -> Term:
    return Term(tuple(be.to_device(p, home) for p in term.parts), term.labels)
