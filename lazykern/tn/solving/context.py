"""What every property's contractions share: the caller's array module and planning options, host
arrays put on the device (one transfer per dtype), one contraction order per network structure (searched
once, then kept in the process), and the contraction of a network of the tables, its small steps run on
the host first."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import _host_steps, _tables, _upload
from .._contract import Algebra
from ..contraction.paths import costs
from ..einsum import ContractionPlan, build_network, contract_network
from .values import label_sizes


class Context:
    """The caller's array module and planning options, and the conversions every algebra shares."""

    def __init__(self, xp: Any, optimize: Any, memory_limit: int | None, max_time: float | None, devices: Any) -> None:
        self.xp = xp
        self.optimize = _default_optimize() if optimize == "auto" else optimize
        self.memory_limit = memory_limit
        self.max_time = max_time
        self.devices = devices
        # The host array each device array put here came from (by id, the device array kept beside it so
        # that the id is not reused): a contraction's small steps over them run on the host (_host_steps).
        self._hosts: dict[int, tuple[Any, np.ndarray]] = {}

    def planning(self, tab: _tables.Tables, **semiring: str) -> dict[str, Any]:
        """The keyword arguments every network of ``tab`` is contracted with: its order, the caller's
        memory limit, search time and devices (and ``semiring=`` where given)."""
        return dict(
            semiring, optimize=self.order(tab), memory_limit=self.memory_limit, max_time=self.max_time,
            devices=self.devices,
        )  # fmt: skip

    def put(self, x: np.ndarray) -> Any:
        """A host array on the caller's device."""
        name = self.xp.__name__
        if name == "numpy":
            return x
        if name == "torch":
            return self.xp.as_tensor(np.ascontiguousarray(x), device="cuda")
        return self.xp.asarray(x)

    def put_all(self, arrays: Sequence[np.ndarray]) -> list[Any]:
        """Host arrays on the caller's device, each dtype's in one transfer (:mod:`.._upload`)."""
        if self.xp.__name__ == "numpy":
            return list(arrays)
        out = _upload.upload(arrays, self.put)
        for dev, host in zip(out, arrays):
            self._hosts[id(dev)] = (dev, host)
        return out

    def _host_copies(self, operands: Sequence[Any]) -> list[Any] | None:
        """The host arrays ``operands`` (device arrays, or tuples of them) were put from, or None where one
        was not put by :meth:`put_all`."""

        def host(x: Any) -> np.ndarray | None:
            found = self._hosts.get(id(x))
            return found[1] if found is not None and found[0] is x else None

        out: list[Any] = []
        for op in operands:
            mapped = tuple(host(x) for x in op) if isinstance(op, tuple) else host(op)
            if mapped is None or (isinstance(mapped, tuple) and any(m is None for m in mapped)):
                return None
            out.append(mapped)
        return out

    def order(
        self, tab: _tables.Tables, algebra: type[Algebra] = Algebra, operands: Sequence[Any] = (), semiring: str = ""
    ) -> Any:
        """What ``optimize=`` every network of ``tab`` takes: one order, searched (or read from the
        store) once for the tropical network, then given as a path to the others, which slice it to
        their own entry size. Only the caller's own plan, path or optimizer object is passed as it is.
        On a GPU an ``algebra`` that ranks orders by another measure (``plan_rank``: the k-best products,
        by their kernels' predicted seconds) gets an order of its own, searched on its network of
        ``operands``."""
        if not isinstance(self.optimize, str):
            return self.optimize
        rank = algebra.plan_rank if self.xp.__name__ != "numpy" else Algebra.plan_rank
        if rank != Algebra.plan_rank and operands:
            if rank not in tab.ranked:
                # seeded with the tropical order, which the search keeps where it finds nothing better: a
                # search's luck (5 s found 2^34.4 to 2^35.3 multiply-adds at n = 200) never costs more
                tab.ranked[rank] = self._searched(tab, rank, lambda: build_network(
                    tab.labels, (), operands, semiring or "maxplus", algebra), self.order(tab),
                    lambda: self._search_limit(tab))  # fmt: skip
            return list(tab.ranked[rank])
        if tab.order is None:
            zeros = [np.zeros(m.shape, np.float32) for m in tab.mask]  # the tropical network's entries
            tab.order = self._searched(tab, Algebra.plan_rank, lambda: build_network(
                tab.labels, (), [self.put(z) for z in zeros], "maxplus", Algebra))  # fmt: skip
        return list(tab.order)

    def _searched(
        self,
        tab: _tables.Tables,
        rank: str,
        network: Any,
        initial: list[tuple[int, ...]] | None = None,
        limit: Callable[[], int] | None = None,
    ) -> list[tuple[int, ...]]:
        """The order of ``tab`` for ``rank``: the process's (one per network structure), else searched
        (or read from the store) on ``network()``, from ``initial`` where given, for intermediates of
        ``limit()`` entries (else the caller's memory limit: the free memory), asked only for a search."""
        key = (self.xp.__name__, self.optimize, self.memory_limit, self.max_time, tuple(map(tuple, tab.labels)),
               tuple(m.shape for m in tab.mask), rank)  # fmt: skip
        found = _orders.get(key)
        if found is None:
            entries = self.memory_limit if limit is None else limit()
            plan = network().plan(self.optimize, (), entries, self.max_time, initial)
            found = [tuple(p) for p in plan.path]
            if len(_orders) >= _ORDERS_KEPT:
                _orders.pop(next(iter(_orders)))  # the oldest
            _orders[key] = found
        return found

    def _search_limit(self, tab: _tables.Tables) -> int:
        """The largest intermediate a k-best order is searched for: SEARCH_ENTRIES, or the tropical order's
        largest where that is more (the search's seed must fit), within the caller's memory limit. The
        path is what is kept: each contraction slices it to its own memory."""
        limit = max(SEARCH_ENTRIES, self.largest(tab) or 0)
        return limit if self.memory_limit is None else min(limit, self.memory_limit)

    def largest(self, tab: _tables.Tables) -> int | None:
        """Entries of the largest intermediate of ``tab``'s network on the order its contractions take
        (kept per structure and order: the walk over a 300-step path is milliseconds a call); None for the
        caller's own plan or optimizer object."""
        order = self.order(tab)
        if not isinstance(order, list):
            return None
        key = (tuple(map(tuple, tab.labels)), tab.flavors, tuple(map(tuple, order)))
        found = _largests.get(key)
        if found is None:
            if len(_largests) >= _ORDERS_KEPT:
                _largests.pop(next(iter(_largests)))  # the oldest
            found = _largests[key] = costs(tab.labels, (), label_sizes(tab), order, {})[0]
        return found

    def contract(
        self,
        tab: _tables.Tables,
        labels: Any,
        output: Any,
        operands: Any,
        semiring: str,
        algebra: Any,
        plan: ContractionPlan | None = None,
    ) -> Any:
        """The contraction of one network of ``tab`` (``plan``: one made by :meth:`plan` for it). On a GPU,
        with the order's path or an unsliced plan, the small steps over the tables run on the host first
        (:mod:`.._host_steps`); the rest of the plan, its own steps, on the device."""
        optimize = self.order(tab, algebra, operands, semiring) if plan is None else plan
        path = optimize if isinstance(optimize, list) else plan.path if plan is not None and plan.nslices == 1 else None
        if path is not None and self.devices is None and self.xp.__name__ != "numpy":
            host = self._host_copies(operands)
            if host is not None:
                shorter = _host_steps.first(labels, output, host, semiring, algebra, path, operands, self.put)
                if shorter is not None:
                    labels, operands, short = shorter
                    optimize = short if plan is None else dataclasses.replace(plan, path=tuple(short))
        return contract_network(
            labels,
            output,
            operands,
            semiring=semiring,
            optimize=optimize,
            memory_limit=self.memory_limit if plan is None else None,
            max_time=self.max_time,
            algebra=algebra,
            devices=self.devices,
        )

    def plan(
        self, tab: _tables.Tables, labels: Any, output: Any, operands: Any, semiring: str, algebra: Any
    ) -> ContractionPlan:
        """The plan of a network contracted several times (residue passes, restricted counts)."""
        net = build_network(labels, output, operands, semiring, algebra)
        return net.plan(self.order(tab, algebra, operands, semiring), (), self.memory_limit, self.max_time)


# Intermediates a k-best order is searched for (entries): on the H200 the free memory (2^33 and more) left a
# 3-regular 200-vertex graph's searches at 2^35.5 multiply-adds, where 2^28 to 2^29 found 2^33.7 (4 of 5
# searches, 6 to 25 s on 2 cores) and CountingMax(2) ran 0.094 s against 0.116 (session 73, call 5).
SEARCH_ENTRIES = 1 << 28

# The order of each network structure this process solved (by array module and planning options): a
# repeated solve skips the greedy order, the store's key and load, and the replay of the stored path
# (20-100 ms a call at 100-200 vertices, as long as the contraction itself on a GPU). A path fits any
# memory: each contraction slices it to its own entry size and the free memory of its call.
_orders: dict[tuple[Any, ...], list[tuple[int, ...]]] = {}
_ORDERS_KEPT = 32
_largests: dict[tuple[Any, ...], int] = {}  # Context.largest's, by structure and order (as many as the orders)


def _default_optimize() -> str:
    import importlib.util

    return "cotengra" if importlib.util.find_spec("cotengra") is not None else "greedy"
