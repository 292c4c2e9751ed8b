"""An entry header's check takes decoded JSON values without a call each (every warm lookup checks
the header it serves): it must accept and refuse exactly what the plain recursive check does, with
the same message. Held against that check, written out here, on random nested values."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from lazykern.errors import EntryError
from lazykern.store import _entry


def _plain(value: Any, depth: int) -> None:
    """The header check as it read before its fast path: every value through one recursive call."""
    if depth > 16:
        raise EntryError("entry header nests deeper than 16 levels")
    if value is None or isinstance(value, (bool, int)):
        if isinstance(value, int) and abs(value) >= 1 << 63:
            raise EntryError("entry header holds an integer beyond 64 bits")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise EntryError("entry header holds a non-finite number")
        return
    if isinstance(value, str):
        if len(value) > _entry._MAX_STR:
            raise EntryError(f"entry header holds a string of {len(value)} characters (limit {_entry._MAX_STR})")
        return
    if isinstance(value, (list, tuple)):
        items: Any = value
    elif isinstance(value, dict):
        if not all(isinstance(k, str) and len(k) <= 128 for k in value):
            raise EntryError("entry header keys must be short strings")
        items = value.values()
    else:
        raise EntryError(f"entry header holds a {type(value).__name__}")
    for item in items:
        _plain(item, depth + 1)


class _Str(str):
    pass


_LEAVES = [None, True, 0, -(1 << 63) + 1, (1 << 63) - 1, 1 << 63, -(1 << 63), 1.5, math.inf, math.nan, "s", "",
           _Str("sub"), b"bytes", ("tuple",), 2**70]  # fmt: skip


def _value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth > 19 or roll < 0.3:
        return rng.choice(_LEAVES)
    if roll < 0.62:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if roll < 0.67:
        return rng.choice([[], {}])
    keys = ["a", "b", "k" * 129, 1, _Str("c")]
    return {rng.choice(keys): _value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def _outcome(check: Any, value: Any) -> str:
    try:
        check(value, 0)
    except EntryError as exc:
        return str(exc)
    return "accepted"


@pytest.mark.parametrize("seed", range(4))
def test_the_header_check_decides_as_the_plain_check(seed):
    rng = random.Random(seed)
    refused = 0
    for _ in range(5000):
        value = _value(rng, 0)
        plain = _outcome(_plain, value)
        assert _outcome(_entry._check_json, value) == plain, repr(value)[:300]
        refused += plain != "accepted"
    assert 0 < refused < 5000  # both kinds of value were drawn


def test_nesting_at_the_limit():
    deep: Any = "leaf"
    for _ in range(16):
        deep = [deep]
    _entry._check_json(deep, 0)  # 16 levels of lists around a leaf: within the limit
    for leaf in ("leaf", 1, 1.5, None, True, [], {}):
        too_deep: Any = [leaf]
        for _ in range(16):
            too_deep = [too_deep]
        with pytest.raises(EntryError, match="nests deeper than 16 levels"):
            _entry._check_json(too_deep, 0)
