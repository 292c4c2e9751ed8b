"""lazykern/jit/_lazy_launch.py: the launch of a ``@lazy_kernel`` finds its instance by type codes."""

from __future__ import annotations

import numpy as np
import pytest

from lazykern._numba import args as numba_args
from lazykern.jit import _lazy_launch


class _Typed:
    """Stands for a Numba device array: ``_numba_type_`` is what make_fast_key reads, then keeps."""

    def __init__(self, numba_type):
        self._numba_type_ = numba_type


def test_type_codes_are_the_fast_keys_of_the_general_path():
    from numba.cuda import types

    fast_key = numba_args.make_fast_key()
    arr = _Typed(types.float32[::1])
    values = (arr, np.float32(2.0), 3, 1.5, True)
    keys = tuple(map(fast_key, values))  # the general path: also keeps arr's type on arr
    assert _lazy_launch.KEPT_TYPE in arr.__dict__  # the name make_fast_key keeps it under
    assert _lazy_launch.type_codes(len(values))(*values) == keys


def test_an_array_the_general_path_has_not_typed_matches_nothing():
    from numba.cuda import types

    fast_key = numba_args.make_fast_key()
    typed, fresh = _Typed(types.float32[::1]), _Typed(types.float32[::1])
    table = {(fast_key(typed),): "instance"}
    codes = _lazy_launch.type_codes(1)
    assert table.get(codes(typed)) == "instance" and table.get(codes(fresh)) is None


def test_an_argument_without_a_scalar_class_or_a_dict_goes_to_the_general_path():
    with pytest.raises(AttributeError):
        _lazy_launch.type_codes(1)(np.zeros(3))  # a host array: copied on the general path
    assert _lazy_launch.type_codes(2) is _lazy_launch.type_codes(2)  # generated once per arity
