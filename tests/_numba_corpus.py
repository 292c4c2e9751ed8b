"""A corpus of ``@lazy_kernel`` sources and one-input mutations, for the key-completeness tests.

Each case is a small package of modules (written to a temporary directory) whose kernel reaches
one kind of input the compile consumes: an ``@intrinsic``'s codegen, an ``@overload`` /
``overload_method`` / ``register_jitable`` implementation, a ``type_callable`` typer and its
``lower_builtin`` lowering, a device function in another module, an
``int`` subclass global, a namedtuple field, a module ``__getattr__`` value, global arrays and
tuples, a closure, the line table under ``lineinfo``. Each mutation edits one of those inputs.

:func:`main` runs in a fresh process (``python -m tests._numba_corpus DIR STORE [ROUND]``): it
imports the cases as they are on disk, asks the shared store for each instantiation (served or
compiled) and compiles it again into a throw-away cache, and prints per case whether the store
compiled, and the sha256 of the served and the fresh binary. The store may serve an entry only if
it is byte-identical to what compiling now gives.
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import json
import sys
from pathlib import Path

ARCH = "sm_80"

# case -> (files, signature, options, mutations). A mutation: (label, file, old, new).
CASES: dict[str, tuple[dict[str, str], str, dict, list[tuple[str, str, str, str]]]] = {
    "intrinsic": (
        {
            "k_intrinsic.py": (
                "from numba import cuda\nfrom h_intrinsic import twice\n\ndef kern(out, x):\n    out[0] = twice(x)\n"
            ),
            "h_intrinsic.py": (
                "from numba.cuda.extending import intrinsic\n\n"
                "@intrinsic\ndef twice(typingctx, x):\n    sig = x(x)\n\n"
                "    def codegen(context, builder, signature, args):\n"
                "        return builder.add(args[0], args[0])\n\n    return sig, codegen\n"
            ),
        },
        "void(int32[::1], int32)",
        {},
        [("intrinsic codegen", "h_intrinsic.py", "builder.add(args[0], args[0])", "builder.mul(args[0], args[0])")],
    ),
    "intrinsic_indirect": (
        {
            "k_intrinsic2.py": (
                "from numba import cuda\nimport h_intrinsic2_ov\nfrom h_intrinsic2 import scaled\n\n"
                "def kern(out, x):\n    out[0] = h_intrinsic2_ov.stub(x)\n    out[1] = scaled(x)\n"
            ),
            # an intrinsic reached only through an overload's implementation
            "h_intrinsic2_ov.py": (
                "from numba.cuda.extending import overload\nfrom h_intrinsic2 import thrice\n\n"
                "def stub(x):\n    pass\n\n@overload(stub, target='cuda')\ndef ov(x):\n"
                "    def impl(x):\n        return thrice(x)\n\n    return impl\n"
            ),
            # and one made by a factory: its closure holds the constant
            "h_intrinsic2.py": (
                "from numba.cuda.extending import intrinsic\n\n"
                "@intrinsic\ndef thrice(typingctx, x):\n    def codegen(context, builder, signature, args):\n"
                "        return builder.mul(args[0], context.get_constant(signature.return_type, 3))\n\n"
                "    return x(x), codegen\n\n"
                "def make(k):\n    def defn(typingctx, x):\n        def codegen(context, builder, signature, args):\n"
                "            return builder.add(args[0], context.get_constant(signature.return_type, k))\n\n"
                "        return x(x), codegen\n\n    return intrinsic(defn)\n\nscaled = make(5)\n"
            ),
        },
        "void(int32[::1], int32)",
        {},
        [
            ("intrinsic called by an overload", "h_intrinsic2.py", "return_type, 3)", "return_type, 4)"),
            ("intrinsic factory argument", "h_intrinsic2.py", "scaled = make(5)", "scaled = make(6)"),
        ],
    ),
    "overload": (
        {
            "k_overload.py": (
                "from numba import cuda\nimport h_overload\n\ndef kern(out, x):\n    out[0] = h_overload.stub(x)\n"
            ),
            "h_overload.py": (
                "from numba.cuda.extending import overload\n\ndef stub(x):\n    pass\n\n"
                "@overload(stub, target='cuda')\ndef ov_stub(x):\n    def impl(x):\n        return x + 5\n\n"
                "    return impl\n"
            ),
        },
        "void(int32[::1], int32)",
        {},
        [("overload implementation", "h_overload.py", "return x + 5", "return x + 6")],
    ),
    "overload_method": (
        {
            "k_method.py": (
                "from numba import cuda\nimport h_method  # noqa: F401 (registers plus_one)\n\n"
                "def kern(out, x):\n    out[0] = out.plus_one(0)\n"
            ),
            "h_method.py": (
                "from numba.cuda import types\nfrom numba.cuda.extending import overload_method\n\n"
                "@overload_method(types.Array, 'plus_one', target='cuda')\ndef ov_plus_one(arr, i):\n"
                "    def impl(arr, i):\n        return arr[i] + 1\n\n    return impl\n"
            ),
        },
        "void(int32[::1], int32)",
        {},
        [("overload_method implementation", "h_method.py", "arr[i] + 1", "arr[i] + 2")],
    ),
    "register_jitable": (
        {
            "k_jitable.py": (
                "from numba import cuda\nimport h_jitable_ov\n\ndef kern(out, x):\n    out[0] = h_jitable_ov.stub(x)\n"
            ),
            # the jitable is reached only through an overload's implementation
            "h_jitable_ov.py": (
                "from numba.cuda.extending import overload\nfrom h_jitable import rj\n\ndef stub(x):\n    pass\n\n"
                "@overload(stub, target='cuda')\ndef ov(x):\n    def impl(x):\n        return rj(x)\n\n"
                "    return impl\n"
            ),
            "h_jitable.py": (
                "from numba.cuda.extending import register_jitable\n\n@register_jitable\ndef rj(x):\n    return x - 1\n"
            ),
        },
        "void(int32[::1], int32)",
        {},
        [("register_jitable body", "h_jitable.py", "return x - 1", "return x - 2")],
    ),
    "lowering": (
        {
            "k_lowering.py": (
                "from numba import cuda\nfrom h_lowering import myfunc\n\ndef kern(out, x):\n    out[0] = myfunc(x)\n"
            ),
            "h_lowering.py": (
                "from numba.cuda import types\nfrom numba.cuda.extending import lower_builtin, type_callable\n\n"
                "def myfunc(x):\n    pass\n\n"
                "@type_callable(myfunc)\ndef type_myfunc(context):\n    def typer(x):\n"
                "        if isinstance(x, types.Integer):\n            return types.int32\n\n    return typer\n\n"
                "@lower_builtin(myfunc, types.Integer)\ndef lower_myfunc(context, builder, sig, args):\n"
                "    x = context.cast(builder, args[0], sig.args[0], sig.return_type)\n"
                "    return builder.add(x, context.get_constant(sig.return_type, 7))\n"
            ),
        },
        "void(int64[::1], int32)",
        {},
        [
            ("lower_builtin implementation", "h_lowering.py", "sig.return_type, 7", "sig.return_type, 8"),
            ("type_callable typer", "h_lowering.py", "return types.int32", "return types.int64"),
        ],
    ),
    "device_function": (
        {
            "k_device.py": (
                "from numba import cuda\nfrom h_device import outer\n\ndef kern(out, x):\n    out[0] = outer(x)\n"
            ),
            "h_device.py": (
                "from numba import cuda\nimport h_device2\n\n"
                "@cuda.jit(device=True)\ndef outer(x):\n    return h_device2.inner(x) + 1\n"
            ),
            "h_device2.py": "from numba import cuda\n\n@cuda.jit(device=True)\ndef inner(x):\n    return x * 3\n",
        },
        "void(int32[::1], int32)",
        {},
        [
            ("device function in another module", "h_device.py", "inner(x) + 1", "inner(x) + 2"),
            ("device function two modules away", "h_device2.py", "x * 3", "x * 4"),
        ],
    ),
    "values": (
        {
            "k_values.py": (
                "import collections\nimport numpy as np\nfrom numba import cuda\nimport h_cfg\n\n"
                "class N(int):\n    pass\n\nK = N(3)\nPt = collections.namedtuple('Pt', 'lo hi')\nP = Pt(1, 7)\n"
                "ARR = np.arange(4, dtype=np.int32)\nT = (2, 5)\n\n"
                "def kern(out, x):\n    out[0] = x + K\n    out[1] = P.hi\n    out[2] = ARR[1]\n"
                "    out[3] = T[1]\n    out[4] = h_cfg.N\n"
            ),
            "h_cfg.py": (
                "def __getattr__(name):\n    if name == 'N':\n        return 11\n    raise AttributeError(name)\n"
            ),
        },
        "void(int32[::1], int32)",
        {},
        [
            ("int subclass global", "k_values.py", "K = N(3)", "K = N(4)"),
            ("namedtuple field", "k_values.py", "P = Pt(1, 7)", "P = Pt(1, 8)"),
            ("global array element", "k_values.py", "np.arange(4, dtype=np.int32)", "np.arange(1, 5, dtype=np.int32)"),
            ("global tuple item", "k_values.py", "T = (2, 5)", "T = (2, 6)"),
            ("module __getattr__ value", "h_cfg.py", "return 11", "return 12"),
        ],
    ),
    # issue 35.7: which field `P.hi` names is the namedtuple's field order, not its values
    "namedtuple": (
        {
            "k_namedtuple.py": (
                "import collections\nfrom numba import cuda\n\nPt = collections.namedtuple('Pt', 'lo hi')\n"
                "P = Pt(1, 7)\n\ndef kern(out, x):\n    out[0] = P.hi + x\n"
            ),
        },
        "void(int32[::1], int32)",
        {},
        [("namedtuple field order", "k_namedtuple.py", "namedtuple('Pt', 'lo hi')", "namedtuple('Pt', 'hi lo')")],
    ),
    # issue 35.6: the registry's pick, not only the code of what was picked
    "registration": (
        {
            "k_registration.py": (
                "from numba import cuda\nimport h_reg\n\n"
                "def kern(out, x):\n    out[0] = h_reg.stub(x)\n    out[1] = h_reg.low(x)\n    out[2] = out.bump(1)\n"
                "    out[3] = h_reg.conv(x)\n    out[4] = out.scaled\n"
            ),
            "h_reg.py": (
                "from numba.cuda import types\n"
                "from numba.cuda.extending import lower_builtin, overload, overload_attribute\n"
                "from numba.cuda.extending import overload_method, type_callable\n\n"
                "def stub(x):\n    pass\n\n"
                "def impl_a(x):\n    return lambda x: x + 5\n\n"
                "def impl_b(x):\n    return lambda x: x + 6\n\n"
                "overload(stub, target='cuda')(impl_a)\n\n"
                "def low(x):\n    pass\n\n"
                "@type_callable(low)\ndef type_low(context):\n    return lambda x: types.int32\n\n"
                "def lower_a(context, builder, sig, args):\n"
                "    return builder.add(args[0], context.get_constant(sig.return_type, 7))\n\n"
                "def lower_b(context, builder, sig, args):\n"
                "    return builder.add(args[0], context.get_constant(sig.return_type, 8))\n\n"
                "lower_builtin(low, types.int32)(lower_a)\n\n"
                "def bump_a(arr, i):\n    return lambda arr, i: arr[i] + 1\n\n"
                "def bump_b(arr, i):\n    return lambda arr, i: arr[i] + 2\n\n"
                "overload_method(types.Array, 'bump', target='cuda')(bump_a)\n\n"
                "def conv(x):\n    pass\n\n"
                "def type_conv_a(context):\n    return lambda x: types.int32\n\n"
                "def type_conv_b(context):\n    return lambda x: types.float32\n\n"
                "type_callable(conv)(type_conv_a)\n\n"
                "@lower_builtin(conv, types.int32)\ndef lower_conv(context, builder, sig, args):\n"
                "    return context.cast(builder, args[0], sig.args[0], sig.return_type)\n\n"
                "def scaled_a(arr):\n    return lambda arr: arr.shape[0] * 2\n\n"
                "def scaled_b(arr):\n    return lambda arr: arr.shape[0] * 3\n\n"
                "overload_attribute(types.Array, 'scaled', target='cuda')(scaled_a)\n"
            ),
        },
        "void(int32[::1], int32)",
        {},
        [
            (
                "overload registers the other implementation",
                "h_reg.py",
                "(stub, target='cuda')(impl_a)",
                "(stub, target='cuda')(impl_b)",
            ),
            (
                "lower_builtin registers the other lowering",
                "h_reg.py",
                "types.int32)(lower_a)",
                "types.int32)(lower_b)",
            ),
            (
                "overload_method registers the other implementation",
                "h_reg.py",
                "target='cuda')(bump_a)",
                "target='cuda')(bump_b)",
            ),
            ("type_callable registers the other typer", "h_reg.py", "(conv)(type_conv_a)", "(conv)(type_conv_b)"),
            (
                "overload_attribute registers the other implementation",
                "h_reg.py",
                "target='cuda')(scaled_a)",
                "target='cuda')(scaled_b)",
            ),
        ],
    ),
    # a user Numba type: its attribute's lowering, re-registered (issue 35.6)
    "user_type": (
        {
            "k_user_type.py": (
                "from numba import cuda\nfrom h_pair import Pair\n\n"
                "def kern(out, x):\n    p = Pair(x, x + x)\n    out[0] = p.total\n"
            ),
            "h_pair.py": (
                "from numba.cuda import cgutils, int32, types\nfrom numba.cuda.cudaimpl import lower\n"
                "from numba.cuda.extending import core_models, infer_getattr, lower_getattr, register_model\n"
                "from numba.cuda.extending import type_callable\n"
                "from numba.cuda.typing.templates import AttributeTemplate\n\n"
                "class Pair:\n    pass\n\n"
                "class PairType(types.Type):\n    def __init__(self):\n        super().__init__(name='PairType')\n\n"
                "pair_type = PairType()\n\n"
                "@register_model(PairType)\nclass PairModel(core_models.StructModel):\n"
                "    def __init__(self, dmm, fe_type):\n"
                "        super().__init__(dmm, fe_type, [('x', int32), ('y', int32)])\n\n"
                "@type_callable(Pair)\ndef type_pair(context):\n    return lambda x, y: pair_type\n\n"
                "@lower(Pair, types.Integer, types.Integer)\ndef lower_pair(context, builder, sig, args):\n"
                "    obj = cgutils.create_struct_proxy(pair_type)(context, builder)\n"
                "    obj.x = context.cast(builder, args[0], sig.args[0], int32)\n"
                "    obj.y = context.cast(builder, args[1], sig.args[1], int32)\n"
                "    return obj._getvalue()\n\n"
                "@infer_getattr\nclass PairAttrs(AttributeTemplate):\n    key = pair_type\n\n"
                "    def resolve_total(self, p):\n        return int32\n\n"
                "def total_a(context, builder, typ, val):\n"
                "    obj = cgutils.create_struct_proxy(typ)(context, builder, value=val)\n"
                "    return builder.add(obj.x, obj.y)\n\n"
                "def total_b(context, builder, typ, val):\n"
                "    obj = cgutils.create_struct_proxy(typ)(context, builder, value=val)\n"
                "    return builder.mul(obj.x, obj.y)\n\n"
                "lower_getattr(PairType, 'total')(total_a)\n"
            ),
        },
        "void(int32[::1], int32)",
        {},
        [("lower_getattr registers the other lowering", "h_pair.py", "'total')(total_a)", "'total')(total_b)")],
    ),
    "closure": (
        {
            "k_closure.py": (
                "from numba import cuda\n\ndef make(c):\n    def kern(out, x):\n        out[0] = x + c\n\n"
                "    return kern\n\nkern = make(2)\n"
            ),
        },
        "void(int32[::1], int32)",
        {},
        [("closure cell", "k_closure.py", "make(2)", "make(3)")],
    ),
    "lineinfo": (
        {
            "k_lines.py": (
                "from numba import cuda\nfrom h_lines import helper\n\n"
                "def kern(out, x):\n    out[0] = helper(x)\n    out[1] = x\n"
            ),
            "h_lines.py": (
                "from numba import cuda\n\n@cuda.jit(device=True, lineinfo=True)\ndef helper(x):\n    return x + 1\n"
            ),
        },
        "void(int32[::1], int32)",
        {"lineinfo": True},
        [
            ("line inserted above the kernel body", "k_lines.py", "def kern(out, x):\n", "def kern(out, x):\n\n"),
            ("line inserted between statements", "k_lines.py", "    out[1] = x\n", "\n    out[1] = x\n"),
            ("line inserted in a device function", "h_lines.py", "def helper(x):\n", "def helper(x):\n\n"),
        ],
    ),
}


def _registry_examples() -> dict[str, tuple[dict[str, str], str, dict, list[tuple[str, str, str, str]]]]:
    """Issue 43.4's two examples (tests/_numba_registry_cases.py): a user ``lower_cast`` edited
    from add to mul, ``make_attribute_wrapper`` re-pointed from member x to y."""
    from tests import _numba_registry_cases as registry

    out = {}
    for case in ("cast", "attribute_wrapper"):
        text, mutations = registry.CASES[case]
        name = f"k_reg_{case}.py"
        out[f"registry_{case}"] = ({name: text}, registry.SIG, {}, [(label, name, o, n) for label, o, n in mutations])
    return out


CASES.update(_registry_examples())


def kernel_module(case: str) -> str:
    return next(name[:-3] for name in CASES[case][0] if name.startswith("k_"))


def write(directory: Path, round_index: int) -> list[str]:
    """Write every case with its mutation number ``round_index`` applied (0: none); returns labels."""
    applied = []
    for case, (files, _sig, _opts, mutations) in CASES.items():
        texts = dict(files)
        if 0 < round_index <= len(mutations):
            label, name, old, new = mutations[round_index - 1]
            assert old in texts[name], (case, label)
            texts[name] = texts[name].replace(old, new, 1)
            applied.append(f"{case}: {label}")
        for name, text in texts.items():
            (directory / name).write_text(text)
    return applied


def rounds() -> int:
    return max(len(c[3]) for c in CASES.values())


def main(directory: str, store: str) -> None:
    """In this fresh process: per case, what the shared store gives and what compiling now gives."""
    sys.path.insert(0, directory)
    from lazykern import KernelCache, lazy_kernel
    from lazykern._numba.signature import normalize_signature

    shared, fresh = KernelCache(store), KernelCache(enabled=False)  # fresh: in memory, compiles
    _same_names()
    report = {}
    for case, (_files, sig, options, _mutations) in CASES.items():
        module = importlib.import_module(kernel_module(case))
        types = normalize_signature(sig)
        served, compiled = lazy_kernel(module.kern, cache=shared, **options)._entry(types, ARCH, relax=False)
        again, _ = lazy_kernel(module.kern, cache=fresh, **options)._entry(types, ARCH, relax=False)
        report[case] = {
            "compiled": compiled,
            "served": hashlib.sha256(served.code).hexdigest(),
            "fresh": hashlib.sha256(again.code).hexdigest(),
        }
    print("JSON:" + json.dumps(report))


def _same_names() -> None:
    """Numba puts a per-process counter in mangled names (``...B2v7...``), so the same source
    compiled at another moment gives other bytes. Here every function gets number 1 (the corpus
    has no two functions of one qualified name), so compiles compare byte for byte (harness only)."""
    from numba.core import bytecode
    from numba.cuda.core import bytecode as cuda_bytecode

    for module in (bytecode, cuda_bytecode):
        module.FunctionIdentity._unique_ids = itertools.repeat(1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
