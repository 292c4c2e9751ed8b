"""``debug=True`` kernels' exception table (lazykern/_numba/debug.py): stored by name, raised as numba-cuda words it."""

from __future__ import annotations

import types

import pytest

from lazykern._numba import debug


class LocalError(Exception):
    pass


def _helper(exceptions):
    return types.SimpleNamespace(exceptions=exceptions)


def test_builtin_and_importable_exceptions_are_persisted_by_name():
    table, reason = debug.exception_table(
        _helper({1: (ValueError, ("too far",), ("k", "/x/k.py", 7)), 2: (LocalError, None, None)})
    )
    assert reason is None
    assert table == {
        "1": {"class": "builtins:ValueError", "args": ["too far"], "loc": ["k", "/x/k.py", 7]},
        "2": {"class": f"{__name__}:LocalError", "args": [], "loc": None},
    }


def test_an_exception_a_new_process_cannot_find_keeps_the_entry_in_memory():
    class Hidden(Exception):
        pass

    _, reason = debug.exception_table(_helper({1: (Hidden, ("x",), None)}))
    assert reason is not None and "Hidden" in reason and "debug=True" in reason


def test_raise_for_words_the_error_as_numba_cuda_does():
    table, _ = debug.exception_table(_helper({1: (ValueError, ("too far",), ("k", "/x/k.py", 7))}))
    positions = {"tidz": 0, "tidy": 0, "tidx": 3, "ctaidz": 0, "ctaidy": 0, "ctaidx": 1}
    with pytest.raises(ValueError) as info:
        debug.raise_for(table, 1, positions.__getitem__, "k")
    assert str(info.value) == "In function 'k', file /x/k.py, line 7, tid=[0, 0, 3] ctaid=[0, 0, 1]: too far"
    with pytest.raises(SystemError, match="unknown error 9 in native function"):
        debug.raise_for(table, 9, positions.__getitem__, "k")
