"""User Numba extensions of every registry kind, and one edit of each (tests/test_numba_registries.py).

Each case is a module whose kernel reaches one kind of registration: a ``lower_cast``, a
``make_attribute_wrapper``, a ``lower_constant`` and a ``typeof_impl``, a ``lower_getattr_generic``
with its typing template, an ``overload_method``, a data model's members. :func:`main` runs in a
fresh process (``python -m tests._numba_registry_cases DIR STORE [reverse]``) and prints, per case, whether
the shared store compiled it and the digest of the binary it gave.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import sys
from pathlib import Path

ARCH = "sm_80"
SIG = "void(int32[::1], int32)"

_HEAD = """
from llvmlite import ir
from numba.core.typeconv import Conversion
from numba.cuda import cgutils, float32, int32, types
from numba.cuda.cudaimpl import lower
from numba.cuda.extending import (
    core_models, intrinsic, lower_cast, lower_getattr_generic, make_attribute_wrapper, overload_method,
    register_model, type_callable, typeof_impl,
)
from numba.cuda.core.imputils import lower_constant
from numba.cuda.typing.templates import AttributeTemplate, infer_getattr
"""

_PAIR = """
class Pair:
    pass


class PairType(types.Type):
    def __init__(self):
        super().__init__(name="PairType")


pair_type = PairType()


@register_model(PairType)
class PairModel(core_models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [("x", int32), ("y", int32)])


@type_callable(Pair)
def type_pair(context):
    def typer(x, y):
        if isinstance(x, types.Integer) and isinstance(y, types.Integer):
            return pair_type

    return typer


def member(context, name):
    return context.data_model_manager.lookup(pair_type).get_member_fe_type(name)


@lower(Pair, types.Integer, types.Integer)
def lower_pair(context, builder, sig, args):
    obj = cgutils.create_struct_proxy(pair_type)(context, builder)
    obj.x = context.cast(builder, args[0], sig.args[0], member(context, "x"))
    obj.y = context.cast(builder, args[1], sig.args[1], member(context, "y"))
    return obj._getvalue()
"""

# case -> (module text, [(label, old, new)]): mutation i of every case is applied in round i.
CASES: dict[str, tuple[str, list[tuple[str, str, str]]]] = {
    "cast": (
        _HEAD
        + """
class FooType(types.Type):
    def __init__(self):
        super().__init__(name="Foo")

    def can_convert_to(self, typingctx, other):
        if isinstance(other, types.Integer):
            return Conversion.safe


foo = FooType()


@register_model(FooType)
class FooModel(core_models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.IntType(32))


@intrinsic
def make_foo(typingctx, x):
    def codegen(context, builder, sig, args):
        return args[0]

    return foo(x), codegen


@lower_cast(FooType, types.Integer)
def foo_to_int(context, builder, fromty, toty, val):
    return builder.add(val, val)


def kern(out, x):
    out[0] = make_foo(x)
""",
        [("lower_cast add -> mul", "builder.add(val, val)", "builder.mul(val, val)")],
    ),
    "attribute_wrapper": (
        _HEAD
        + _PAIR
        + """
make_attribute_wrapper(PairType, "x", "x")


def kern(out, x):
    p = Pair(x, x + 1)
    out[0] = p.x
""",
        [
            (
                "make_attribute_wrapper x -> y",
                'make_attribute_wrapper(PairType, "x", "x")',
                'make_attribute_wrapper(PairType, "y", "x")',
            )
        ],
    ),
    "constant_typeof": (
        _HEAD
        + """
class Cfg:
    def __init__(self, v):
        self.v = v


class CfgType(types.Type):
    def __init__(self, scale):
        self.scale = scale
        super().__init__(name=f"Cfg{scale}")

    def can_convert_to(self, typingctx, other):
        if isinstance(other, types.Integer):
            return Conversion.safe


@register_model(CfgType)
class CfgModel(core_models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.IntType(32))


@typeof_impl.register(Cfg)
def typeof_cfg(val, c):
    return CfgType(1)


@lower_constant(CfgType)
def cfg_constant(context, builder, ty, pyval):
    return context.get_constant(int32, pyval.v * ty.scale)


@lower_cast(CfgType, types.Integer)
def cfg_to_int(context, builder, fromty, toty, val):
    return val


CFG = Cfg(5)


def kern(out, x):
    out[0] = CFG
""",
        [
            ("lower_constant body", "pyval.v * ty.scale)", "pyval.v * ty.scale + 1)"),
            ("typeof_impl gives another type", "return CfgType(1)", "return CfgType(3)"),
        ],
    ),
    "getattr_generic": (
        _HEAD
        + _PAIR
        + """
make_attribute_wrapper(PairType, "x", "x")
make_attribute_wrapper(PairType, "y", "y")


@infer_getattr
class PairAttrs(AttributeTemplate):
    key = PairType

    def generic_resolve(self, typ, attr):
        if attr == "z":
            return int32


@lower_getattr_generic(PairType)
def pair_getattr(context, builder, typ, val, attr):
    obj = cgutils.create_struct_proxy(typ)(context, builder, value=val)
    return builder.add(obj.x, obj.y)


@overload_method(PairType, "total", target="cuda")
def pair_total(p):
    def impl(p):
        return p.x + p.y

    return impl


def kern(out, x):
    p = Pair(x, x + 1)
    out[0] = p.z
    out[1] = p.total()
""",
        [
            ("lower_getattr_generic body", "return builder.add(obj.x, obj.y)", "return builder.mul(obj.x, obj.y)"),
            ("overload_method body", "return p.x + p.y", "return p.x - p.y"),
        ],
    ),
    "getitem": (
        _HEAD
        + _PAIR
        + """
import operator
from numba.cuda.extending import lower_builtin


@type_callable(operator.getitem)
def type_pair_getitem(context):
    def typer(p, i):
        if isinstance(p, PairType) and isinstance(i, types.Integer):
            return int32

    return typer


@lower_builtin(operator.getitem, PairType, types.Integer)
def pair_getitem(context, builder, sig, args):
    obj = cgutils.create_struct_proxy(pair_type)(context, builder, value=args[0])
    return builder.add(obj.x, context.cast(builder, args[1], sig.args[1], int32))


def kern(out, x):
    p = Pair(x, x + 1)
    out[0] = p[x]
""",
        [("lower_builtin(operator.getitem) body", "builder.add(obj.x, context", "builder.add(obj.y, context")],
    ),
    "model": (
        _HEAD
        + _PAIR.replace("class Pair:", "class Pair:  # model case")
        + """
make_attribute_wrapper(PairType, "x", "x")
make_attribute_wrapper(PairType, "y", "y")


def kern(out, x):
    p = Pair(x, x + 1)
    out[0] = p.x * 3 + p.y
""",
        [
            ("register_model member order", '[("x", int32), ("y", int32)]', '[("y", int32), ("x", int32)]'),
            ("register_model member type", '[("x", int32), ("y", int32)]', '[("x", float32), ("y", int32)]'),
        ],
    ),
}


def module_name(case: str) -> str:
    return f"m_reg_{case}"


def rounds() -> int:
    return max(len(m) for _, m in CASES.values())


def write(directory: Path, round_index: int) -> list[str]:
    """Write every case with its mutation number ``round_index`` applied (0: none); the labels."""
    applied = []
    for case, (text, mutations) in CASES.items():
        if 0 < round_index <= len(mutations):
            label, old, new = mutations[round_index - 1]
            assert old in text, (case, label)
            text = text.replace(old, new, 1)
            applied.append(f"{case}: {label}")
        (directory / f"{module_name(case)}.py").write_text(text)
    return applied


def main(directory: str, store: str, order: str = "forward") -> None:
    """Per case: whether the shared store compiled, and the sha256 of the binary it gave."""
    sys.path.insert(0, directory)
    from lazykern import KernelCache, lazy_kernel
    from lazykern._numba.signature import normalize_signature
    from tests._numba_corpus import _same_names

    shared = KernelCache(store)
    _same_names()  # the same source gives the same bytes in every process
    types = normalize_signature(SIG)
    report = {}
    cases = list(CASES)
    if order == "reverse":  # other Numba types first, the modules imported and warmed the other way round
        from numba.cuda import types as numba_types

        made = [numba_types.UniTuple(numba_types.int8, n) for n in range(3, 30)]
        assert made
        cases.reverse()
        for case in cases:
            importlib.import_module(module_name(case))
    for case in cases:
        module = importlib.import_module(module_name(case))
        served, compiled = lazy_kernel(module.kern, cache=shared)._entry(types, ARCH, relax=False)
        report[case] = {"compiled": compiled, "served": hashlib.sha256(served.code).hexdigest()}
    memory_only = sorted(str(r.get("name")) for r in shared.entries() if r.get("memory_only"))
    print("JSON:" + json.dumps({"cases": report, "memory_only": memory_only}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
