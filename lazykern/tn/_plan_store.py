"""Contraction plans in the lazykern store: searched once per network structure, read back later.

A plan depends only on the network's structure: which labels each tensor carries, their sizes, the
output, the slicing target (and the path it was seeded with). The key hashes exactly that, with the
labels renamed by first appearance, so the same lattice built again (any label objects) finds its
plan. The value is JSON bytes in a lazykern entry (digest-checked by the store, never pickle); on
load the path is replayed and its costs recomputed, and a plan that does not hold up is dropped and
searched again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from ..errors import CacheError

log = logging.getLogger("lazykern")

FAMILY = "tropical_plan"
KIND = "contraction-plan"  # bundles leave these out: they are not kernels
FORMAT = 1  # bump when the value's layout changes: older plans then miss

Label = Hashable
Costs = Callable[[list[tuple[int, ...]], list[Label]], tuple[int, int]]


def _canon(terms: Sequence[Sequence[Label]]) -> dict[Label, int]:
    names: dict[Label, int] = {}
    for t in terms:
        for x in t:
            names.setdefault(x, len(names))
    return names


def key(
    terms: Sequence[Sequence[Label]],
    output: Sequence[Label],
    sizes: dict[Label, int],
    limit: int,
    initial: Sequence[Sequence[int]] | None,
    rank: str = "flops",
) -> str:
    """The store key of a plan for this network structure, slicing target and ranking (a plan ranked
    by predicted GPU seconds is another plan than the fewest multiply-adds)."""
    names = _canon(terms)
    record = {
        "format": FORMAT,
        "inputs": [[names[x] for x in t] for t in terms],
        "output": [names[x] for x in output],
        "sizes": [sizes[x] for x in names],
        "limit": int(limit),
        "initial": None if initial is None else [list(p) for p in initial],
    }
    if rank != "flops":  # the keys of plans stored before ranks existed stay as they were
        record["rank"] = rank
    digest = hashlib.sha256(json.dumps(record, separators=(",", ":")).encode()).hexdigest()
    return f"{FAMILY}:{digest}"


def _cache() -> Any:
    from ..store.cache import default_cache

    return default_cache()


def load(
    store_key: str, terms: Sequence[Sequence[Label]], costs: Costs
) -> tuple[list[tuple[int, ...]], list[Label]] | None:
    """(path, sliced labels) stored under ``store_key``, or None; a plan that fails the checks is dropped."""
    cache = _cache()
    entry = cache.lookup(store_key, expect={"family": FAMILY, "kind": KIND})
    if entry is None:
        return None
    try:
        path, sliced = _decode(entry.code, terms)
        if [str(c) for c in costs(path, sliced)] != [entry.meta.get("largest"), entry.meta.get("flops")]:
            raise ValueError("its costs do not match the ones recorded with it")
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        log.warning("lazykern: stored contraction plan %s... is damaged (%s); planning again", store_key[:30], exc)
        cache.delete(store_key)
        return None
    return path, sliced


def _decode(code: bytes, terms: Sequence[Sequence[Label]]) -> tuple[list[tuple[int, ...]], list[Label]]:
    value = json.loads(code)
    if not isinstance(value, dict) or value.get("format") != FORMAT:
        raise ValueError(f"not a format-{FORMAT} plan")
    live = len(terms)
    path = []
    for step in value["path"]:
        if not isinstance(step, list) or not step or not all(isinstance(i, int) and 0 <= i < live for i in step):
            raise ValueError(f"step {step!r} does not name operands among {live}")
        if len(set(step)) != len(step):
            raise ValueError(f"step {step!r} repeats an operand")
        path.append(tuple(step))
        live -= len(step) - 1
    if live != 1:
        raise ValueError(f"the path leaves {live} operands")
    labels = list(_canon(terms))
    sliced = value["sliced"]
    if not all(isinstance(i, int) and 0 <= i < len(labels) for i in sliced):
        raise ValueError("a sliced label is not in the network")
    return path, [labels[i] for i in sliced]


def save(
    store_key: str,
    terms: Sequence[Sequence[Label]],
    path: Sequence[Sequence[int]],
    sliced: Sequence[Label],
    costs: tuple[int, int],
) -> None:
    """Keep a plan; its costs are recorded with it and checked again on load."""
    names = _canon(terms)
    value = {"format": FORMAT, "path": [list(p) for p in path], "sliced": [names[x] for x in sliced]}
    largest, flops = costs
    meta = {
        "family": FAMILY,
        "kind": KIND,
        "kernel": f"plan: {len(terms)} tensors, largest 2^{math.log2(max(largest, 1)):.1f}, "
        f"flops 10^{math.log10(max(flops, 1)):.2f}",
        "arch": "any",
        "largest": str(largest),  # strings: a bad order's flops can pass 2^64, which headers do not hold
        "flops": str(flops),
    }
    try:
        _cache().store(store_key, json.dumps(value, separators=(",", ":")).encode(), meta)
    except CacheError as exc:  # planning still succeeded; the next process plans again
        log.warning("lazykern: could not store contraction plan %s... (%s)", store_key[:30], exc)
