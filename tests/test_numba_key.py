"""@lazy_kernel keys hash globals by content, never through repr (issue 13, item 3)."""

from __future__ import annotations

import collections
import dataclasses
import enum
import os
import types as pytypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import cuda, float32, float64

from lazykern import lazy_kernel
from lazykern._numba.key import fingerprint
from lazykern.errors import CompileError

EXAMPLES = int(os.environ.get("LAZYKERN_FUZZ_EXAMPLES", "60"))
Pair = collections.namedtuple("Pair", "a b")


@dataclasses.dataclass
class Holder:
    scale: float
    table: np.ndarray


class Mode(enum.Enum):
    FAST = 1
    SLOW = 2


def _kernel(global_value):
    """A kernel whose code names the global ``G``, bound to ``global_value``."""
    ns: dict = {"cuda": cuda, "G": global_value}
    exec("def kern(a):\n    i = cuda.grid(1)\n    a[i] = G\n", ns)
    return ns["kern"]


def _key(fn) -> str:
    return fingerprint(fn)[0]


def _wrappers():
    return st.sampled_from(
        [
            ("bare", lambda arr: arr, lambda g: g),
            ("tuple", lambda arr: (1, arr), lambda g: g[1]),
            ("nested", lambda arr: [(arr,)], lambda g: g[0][0]),
            ("dict", lambda arr: {"t": arr}, lambda g: g["t"]),
            ("namedtuple", lambda arr: Pair(0, arr), lambda g: g.b),
            ("dataclass", lambda arr: Holder(1.0, arr), lambda g: g.table),
        ]
    )


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    dtype=st.sampled_from(["float32", "float64", "int8", "int32", "uint16", "bool", "complex64"]),
    size=st.integers(1, 4000),
    where=st.data(),
    wrap=_wrappers(),
    order=st.sampled_from(["C", "F"]),
)
def test_editing_any_element_of_a_global_array_changes_the_key(dtype, size, where, wrap, order):
    _, build, reach = wrap
    arr = np.asfortranarray(np.zeros((size, 2), dtype=dtype)) if order == "F" else np.zeros((size, 2), dtype=dtype)
    g = build(arr)
    fn = _kernel(g)
    before = _key(fn)
    assert _key(fn) == before  # stable
    i = where.draw(st.integers(0, size - 1))
    j = where.draw(st.integers(0, 1))
    target = reach(g)
    target[i, j] = 1 if dtype != "bool" else True
    assert _key(fn) != before, (i, j)


def test_array_layout_in_memory_does_not_change_the_key_content_does():
    a = np.arange(2000, dtype=np.float32).reshape(40, 50)
    assert _key(_kernel(a)) == _key(_kernel(np.ascontiguousarray(a.copy())))
    assert _key(_kernel(a)) != _key(_kernel(a.reshape(50, 40)))  # shape is part of it
    assert _key(_kernel(a)) != _key(_kernel(a.astype(np.float64)))  # dtype too


@cuda.jit(device=True)
def _plus_one(x):
    return x + 1


@cuda.jit(device=True)
def _plus_two(x):
    return x + 2


def test_a_tuple_of_device_functions_is_walked():
    key_one = _key(_kernel((_plus_one,)))
    assert _key(_kernel((_plus_two,))) != key_one
    made = []
    for body in ("x + 1", "x + 1", "x + 3"):  # the same body twice (other objects), then edited
        ns: dict = {"cuda": cuda}
        exec(f"@cuda.jit(device=True)\ndef dev(x):\n    return {body}\n", ns)
        made.append(_key(_kernel((ns["dev"],))))
    assert made[0] == made[1] != made[2]


def test_device_function_globals_and_closures_are_walked():
    ns: dict = {"cuda": cuda, "T": np.zeros(3000)}
    exec("@cuda.jit(device=True)\ndef dev(x):\n    return x + T[2999]\n", ns)
    fn = _kernel((ns["dev"],))
    before = _key(fn)
    ns["T"][2999] = 5
    assert _key(fn) != before

    def make(c):
        @cuda.jit(device=True)
        def closed(x):
            return x + c[1500]

        return closed

    arr = np.zeros(2000)
    fn = _kernel(make(arr))
    before = _key(fn)
    arr[1500] = 1
    assert _key(fn) != before


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (Mode.FAST, Mode.SLOW),
        (float32, float64),
        (np.float32(1), np.float64(1)),
        (np.float32(1), np.float32(2)),
        (0.0, -0.0),
        (1, True),
        ("x" * 2000 + "a", "x" * 2000 + "b"),
        (frozenset({1, 2}), frozenset({1, 3})),
        (np.dtype("f4"), np.dtype("f8")),
        (Holder(1.0, np.zeros(3)), Holder(2.0, np.zeros(3))),
        (pytypes.SimpleNamespace(n=1), pytypes.SimpleNamespace(n=2)),
        (np.sqrt, np.cos),
    ],
)
def test_values_that_differ_give_different_keys(a, b):
    assert _key(_kernel(a)) != _key(_kernel(b))
    assert _key(_kernel(a)) == _key(_kernel(a))


def test_cycles_are_cut_and_deep_nesting_is_refused_clearly():
    loop: list = [1]
    loop.append(loop)
    assert _key(_kernel(loop)) == _key(_kernel(loop))
    deep: list = []
    for _ in range(200):
        deep = [deep]
    with pytest.raises(CompileError, match="G.*levels deep"):
        _key(_kernel(deep))


def test_unknown_objects_are_keyed_by_their_attributes_not_their_address():
    class Config:
        def __init__(self, n):
            self.n = n
            self.table = np.zeros(2000)

    a, b = Config(1), Config(1)
    assert _key(_kernel(a)) == _key(_kernel(b))  # other object, same contents
    b.table[1999] = 1
    assert _key(_kernel(a)) != _key(_kernel(b))


def test_class_attributes_the_code_names_are_keyed_by_value():
    ns: dict = {"cuda": cuda, "__name__": "user_module"}
    keys = []
    for value in (1, 1, 2):
        exec(f"import enum\nclass Color(enum.IntEnum):\n    RED = {value}\n", ns)
        g = {"cuda": cuda, "Color": ns["Color"]}
        exec("def kern(a):\n    a[0] = Color.RED\n", g)
        keys.append(_key(g["kern"]))
    assert keys[0] == keys[1] != keys[2]


_GLOBAL_TABLE = (np.zeros(3000, dtype=np.float32),)


def _uses_table(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = _GLOBAL_TABLE[0][i]


def test_lazy_kernel_key_follows_a_tuple_held_array(cache):
    k = lazy_kernel(_uses_table, cache=cache)
    sig = (float32[::1],)
    before = k.key(sig, "sm_90")
    _GLOBAL_TABLE[0][1500] = 7
    try:
        assert k.key(sig, "sm_90") != before
    finally:
        _GLOBAL_TABLE[0][1500] = 0
    assert k.key(sig, "sm_90") == before


class _Count(int):
    pass


class _Name(str):
    pass


@pytest.mark.parametrize(("a", "b"), [(_Count(3), _Count(4)), (_Name("x"), _Name("y")), (_Count(3), 3)])
def test_subclasses_of_int_and_str_are_keyed_by_value(a, b):
    """Numba freezes an int subclass's value into the code: ``class N(int)`` has no __dict__ entries to walk."""
    assert _key(_kernel(a)) != _key(_kernel(b))
    assert _key(_kernel(a)) == _key(_kernel(type(a)(a)))


def test_an_intrinsic_is_keyed_by_its_definition_and_codegen():
    from numba.cuda.extending import intrinsic

    def make(op):
        ns: dict = {}
        exec(
            "def defn(typingctx, x):\n    def codegen(context, builder, sig, args):\n"
            f"        return builder.{op}(args[0], args[0])\n    return x(x), codegen\n",
            ns,
        )
        return intrinsic(ns["defn"])

    assert _key(_kernel(make("add"))) != _key(_kernel(make("mul")))
    assert _key(_kernel(make("add"))) == _key(_kernel(make("add")))


def test_with_lineinfo_every_line_number_is_keyed():
    def at(body: str):
        ns: dict = {"cuda": cuda}
        exec(compile(body, "same_file.py", "exec"), ns)
        return ns["kern"]

    plain = at("def kern(a):\n    i = cuda.grid(1)\n    a[i] = 1\n")
    moved = at("def kern(a):\n\n    i = cuda.grid(1)\n    a[i] = 1\n")  # a line inserted above the body
    assert fingerprint(plain)[0] == fingerprint(moved)[0]  # without lineinfo lines are not compiled in
    assert fingerprint(plain, lines=True)[0] != fingerprint(moved, lines=True)[0]


# -- issue 35.7 / 38.5: types by what Numba compares them by, never by a per-process counter -------
def test_a_namedtuple_value_is_keyed_with_its_field_order():
    from lazykern._numba.key import value_digest

    lo_hi, hi_lo = collections.namedtuple("Pt", "lo hi"), collections.namedtuple("Pt", "hi lo")
    assert value_digest(lo_hi(1, 7)) != value_digest(hi_lo(1, 7))
    assert value_digest(lo_hi(1, 7)) == value_digest(collections.namedtuple("Pt", "lo hi")(1, 7))


def test_a_namedtuple_class_the_code_names_is_keyed_with_its_field_order():
    def key_with(fields):
        ns: dict = {"Made": collections.namedtuple("Made", fields)}
        exec("def kern(out, x):\n    out[0] = Made(x, 2 * x).hi\n", ns)
        return _key(ns["kern"])

    assert key_with("lo hi") != key_with("hi lo")
    assert key_with("lo hi") == key_with("lo hi")


def test_a_namedtuple_argument_type_is_keyed_with_its_field_order():
    from numba import typeof

    from lazykern.jit._lazy_entry import instance_key

    def kern(out, p):
        out[0] = p.hi

    lo_hi, hi_lo = collections.namedtuple("Pt", "lo hi"), collections.namedtuple("Pt", "hi lo")
    keys = [
        instance_key(kern, (), {"lineinfo": False}, (float32[::1], typeof(cls(1, 7))), "sm_80")
        for cls in (lo_hi, hi_lo, lo_hi)
    ]
    assert keys[0] != keys[1] and keys[0] == keys[2]


def test_a_user_numba_type_is_keyed_without_its_process_counter():
    from numba.core import types

    from lazykern._numba.key import describe_type, value_digest

    class Opaque(types.Type):
        def __init__(self, name):
            super().__init__(name=name)

    t = Opaque("OpaqueForTheKey")
    before = (describe_type(t), value_digest(t), value_digest((t, types.UniTuple(t, 2))))
    t._code = t._code + 1000  # what another process, having made other types first, would number it
    assert (describe_type(t), value_digest(t), value_digest((t, types.UniTuple(t, 2)))) == before
    assert value_digest(Opaque("OtherName")) != before[1]


def test_functions_numba_makes_with_exec_count_as_numbas_own():
    import operator

    import numba.experimental.jitclass  # noqa: F401  (registers the dunder overloads of len, truediv ...)
    from numba.core.typing.templates import builtin_registry

    from lazykern._numba.key import pinned_function
    from lazykern._numba.resolved import _template_functions

    registered = [typ for val, typ in builtin_registry.globals if val in (len, operator.truediv)]
    templates = [t for typ in registered for t in getattr(typ, "templates", ())]
    wrapped = [getattr(t, "_overload_func", None) for t in templates]
    made = [f for f in wrapped if isinstance(f, pytypes.FunctionType) and f.__module__ is None]
    assert made, "numba no longer makes module-less overloads: this test tests nothing"
    assert all(pinned_function(f) for f in made)
    assert [f for t in templates for f in _template_functions(t)] == []


def test_a_type_that_prints_an_address_is_keyed_by_what_it_refers_to():
    from numba import typeof

    from lazykern._numba.key import describe_type

    def device_function(c):
        ns: dict = {"cuda": cuda}
        exec(f"@cuda.jit(device=True)\ndef f(x):\n    return x + {c}\n", ns)
        return typeof(ns["f"])

    one, two, one_again = device_function(1), device_function(2), device_function(1)
    assert " at 0x" not in describe_type(one)
    assert describe_type(one) != describe_type(two) and describe_type(one) == describe_type(one_again)


# -- session 61's hostile round: what a `lower_constant` or Numba's array constant reads, exactly --------
class _Scale:
    """A user type whose instance carries nothing: a `lower_constant` reads the class's `factor`."""

    factor = 2.0


_FACTOR = 3.0


class _Derived:
    @property
    def factor(self):
        return _FACTOR


def test_a_class_attribute_or_property_an_object_reads_is_keyed():
    before = _key(_kernel(_Scale()))
    _Scale.factor = 5.0
    try:
        assert _key(_kernel(_Scale())) != before
    finally:
        _Scale.factor = 2.0
    assert _key(_kernel(_Scale())) == before
    global _FACTOR
    before = _key(_kernel(_Derived()))
    _FACTOR = 4.0  # the property's code reads a module global: walked as any function's
    try:
        assert _key(_kernel(_Derived())) != before
    finally:
        _FACTOR = 3.0


def test_an_arrays_strides_contiguity_and_writeability_are_keyed():
    a = np.zeros((3, 1000))
    base = _key(_kernel(a))
    assert _key(_kernel(np.asfortranarray(a))) != base  # `A.strides[0]`: 8000 in C, 8 in F
    assert _key(_kernel(np.zeros((3, 2000))[:, ::2])) != base  # a strided view of the same values
    frozen = a.copy()
    frozen.flags.writeable = False  # Numba types it as a readonly array
    assert _key(_kernel(frozen)) != base
    assert _key(_kernel(a.copy())) == base


@pytest.mark.parametrize(
    "a, b",
    [
        (np.frombuffer(np.uint64(0x7FF8000000000001).tobytes(), np.float64)[0].item(),
         np.frombuffer(np.uint64(0x7FF8000000000ABC).tobytes(), np.float64)[0].item()),
        (0.0, -0.0),
        (complex(0.0, 1.0), complex(-0.0, 1.0)),
    ],
)  # fmt: skip
def test_floats_are_keyed_by_their_bits_not_their_repr(a, b):
    assert _key(_kernel(a)) != _key(_kernel(b))


def test_a_debug_kernel_keys_its_line_numbers_as_lineinfo_does(cache):
    def at(body: str):
        ns: dict = {"cuda": cuda}
        exec(compile(body, "same_file.py", "exec"), ns)
        return ns["kern"]

    plain = at("def kern(a):\n    i = cuda.grid(1)\n    a[i] = 1\n")
    moved = at("def kern(a):\n\n    i = cuda.grid(1)\n    a[i] = 1\n")  # its debug info's lines move
    sig = (float32[::1],)
    for options, differ in (({"debug": True, "opt": False}, True), ({"lineinfo": True}, True), ({}, False)):
        a = lazy_kernel(plain, cache=cache, **options).key(sig, "sm_90")
        b = lazy_kernel(moved, cache=cache, **options).key(sig, "sm_90")
        assert (a != b) is differ, options
