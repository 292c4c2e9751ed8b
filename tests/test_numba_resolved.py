"""The @lazy_kernel key covers what Numba resolved (issue 25, items 2-4), and a key-completeness
mutation test over a corpus of kernels (tests/_numba_corpus.py).

Every compile happens on the CPU (NVRTC route, sm_80). A case's store entry is built in one process;
then one input the compile read is edited on disk, and a fresh process must either compile again
or be served a binary byte-identical to what compiling now gives.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests import _numba_corpus as corpus

ROOT = str(Path(__file__).resolve().parents[1])


def _python(*args: str) -> dict:
    """Run ``python args...`` in a fresh process; the JSON it printed after ``JSON:``."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # an edit within the same second must not meet a stale .pyc
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run([sys.executable, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(next(li for li in proc.stdout.splitlines() if li.startswith("JSON:"))[5:])


def _fresh_process(src: Path, store: Path) -> dict:
    return _python("-m", "tests._numba_corpus", str(src), str(store))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """[(applied mutations, report)]: the base twice, then each round of one mutation per case,
    each round on a copy of the base's store (a mutation meets the base's entry, never the entry an
    earlier round's mutation left under the same key)."""
    src, store = tmp_path_factory.mktemp("corpus"), tmp_path_factory.mktemp("store")
    out = []
    for round_index in [0, 0, *range(1, corpus.rounds() + 1)]:
        applied = corpus.write(src, round_index)
        here = store
        if round_index:
            here = tmp_path_factory.mktemp(f"store{round_index}")
            shutil.copytree(store, here, dirs_exist_ok=True)
        out.append((applied, _fresh_process(src, here)))
    return out


@pytest.mark.slow  # fresh processes that compile
def test_a_warm_store_serves_every_case_without_compiling(runs):
    (_, first), (_, second) = runs[0], runs[1]
    assert all(r["compiled"] for r in first.values())
    # the manifest verifies in a new process: nothing is compiled twice
    assert {case: r["compiled"] for case, r in second.items()} == dict.fromkeys(second, False)
    assert all(r["served"] == r["fresh"] for r in second.values())


def _mutations() -> list[tuple[str, str, int]]:
    return [(case, m[0], i + 1) for case, spec in corpus.CASES.items() for i, m in enumerate(spec[3])]


@pytest.mark.slow
@pytest.mark.parametrize(("case", "label", "round_index"), _mutations(), ids=lambda v: str(v))
def test_an_edit_of_what_the_compile_read_is_never_served_stale(runs, case, label, round_index):
    base = runs[0][1][case]
    applied, report = runs[round_index + 1]
    assert f"{case}: {label}" in applied
    r = report[case]
    assert r["fresh"] != base["fresh"], f"{label}: the mutation does not change the binary; the case tests nothing"
    assert r["compiled"] or r["served"] == r["fresh"], f"{label}: the store served the binary from before the edit"


@pytest.mark.slow  # fresh processes that compile
def test_key_completeness_mutation_count_and_survivors(runs, capsys):
    survivors, total = [], 0
    for applied, report in runs[2:]:
        for item in applied:
            total += 1
            case = item.split(":", 1)[0]
            r = report[case]
            if not r["compiled"] and r["served"] != r["fresh"]:
                survivors.append(item)
    with capsys.disabled():
        print(f"\nnumba key-completeness: {total} mutations, {len(survivors)} survivors {survivors}")
    assert total == len(_mutations())
    assert survivors == []


# -- item 1: a kernel whose code holds an address of its process is never stored --------------
_FAKE_DEVICE_GLOBAL = """
class FakeDeviceArray:
    '''Stands for a CuPy / torch / Numba device array: only the interface Numba reads.'''
    def __init__(self, address):
        self.__cuda_array_interface__ = {
            "shape": (4,), "typestr": "<f4", "data": (address, False), "version": 3, "strides": None}

G = FakeDeviceArray({address})
WRAPPED = (1, G)

def kern(out):
    out[0] = G[1]

def kern_in_tuple(out):
    out[0] = WRAPPED[1][2]
"""

_MEMORY_ONLY_RUN = """
import json, logging, sys
sys.path.insert(0, {src!r})
records = []
handler = logging.Handler()
handler.emit = lambda record: records.append(record.getMessage())
logging.getLogger("lazykern").addHandler(handler)
import m_device_global as m
from lazykern import KernelCache, lazy_kernel
cache = KernelCache({store!r})
out = {{}}
for name in ("kern", "kern_in_tuple"):
    out[name] = lazy_kernel(getattr(m, name), cache=cache).warm(["void(float32[::1])"], arch="sm_80")[0]["compiled"]
rows = [dict(name=r.get("name"), bytes=r["bytes"], memory_only=r.get("memory_only")) for r in cache.entries()]
print("JSON:" + json.dumps(dict(compiled=out, rows=rows, log=[r for r in records if "memory only" in r])))
"""


def _run_memory_only(src: Path, store: Path, address: int) -> dict:
    (src / "m_device_global.py").write_text(_FAKE_DEVICE_GLOBAL.replace("{address}", hex(address)))
    return _python("-c", _MEMORY_ONLY_RUN.format(src=str(src), store=str(store)))


@pytest.mark.slow  # fresh processes that compile
def test_a_device_array_global_is_never_stored_and_runs_from_memory(tmp_path):
    src, store = tmp_path / "src", tmp_path / "store"
    src.mkdir()
    first = _run_memory_only(src, store, 0x7F0000001000)
    assert first["compiled"] == {"kern": True, "kern_in_tuple": True}
    # one log line per compile, saying why
    assert len(first["log"]) == 2, first["log"]
    assert all("device array" in li and "address" in li for li in first["log"]), first["log"]
    # the store holds markers only: no code, the reason (what `lazykern cache ls` shows)
    assert sorted(r["name"] for r in first["rows"]) == ["kern", "kern_in_tuple"]
    assert all(r["bytes"] == 0 and "device array" in r["memory_only"] for r in first["rows"])
    # another process, another address: compiled again, never served the old process's code
    second = _run_memory_only(src, store, 0x7F0000009000)
    assert second["compiled"] == {"kern": True, "kern_in_tuple": True}
    assert all(r["bytes"] == 0 for r in second["rows"])


@pytest.mark.slow  # fresh processes that compile
def test_cache_ls_shows_a_memory_only_kernel(tmp_path):
    from typer.testing import CliRunner

    from lazykern.tools.cli import app

    src, store = tmp_path / "src", tmp_path / "store"
    src.mkdir()
    _run_memory_only(src, store, 0x7F0000001000)
    result = CliRunner().invoke(app, ["cache", "ls"], env={"LAZYKERN_CACHE_DIR": str(store), "COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert result.output.count("(memory only)") == 2, result.output


_GPU_RUN = """
import json, sys
import numpy as np
from numba import cuda
sys.path.insert(0, {src!r})
import m_gpu_global as m
from lazykern import KernelCache, lazy_kernel
k = lazy_kernel(m.kern, cache=KernelCache({store!r}))
out = cuda.device_array(4, dtype=np.float32)
k[1, 4](out)
cuda.synchronize()
print("JSON:" + json.dumps(dict(out=out.copy_to_host().tolist(), compiles=k.stats()["compiles"])))
"""

_GPU_MODULES = {
    "numba": "import numpy as np\nfrom numba import cuda\n"
    "G = cuda.to_device(np.arange(4, dtype=np.float32) * {scale})\n",
    "cupy": "import cupy\nG = cupy.arange(4, dtype=cupy.float32) * {scale}\n",
}


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("library", sorted(_GPU_MODULES))
def test_gpu_a_global_device_array_reads_this_process_memory(tmp_path, library):
    """Two processes, each with its own global device array: each reads its own values."""
    if library == "cupy":
        pytest.importorskip("cupy")
    src, store = tmp_path / "src", tmp_path / "store"
    src.mkdir()
    results = []
    for scale in (1, 10):
        text = _GPU_MODULES[library].format(scale=scale) + "\ndef kern(out):\n    i = cuda.grid(1)\n    out[i] = G[i]\n"
        if library == "cupy":
            text = "from numba import cuda\n" + text
        (src / "m_gpu_global.py").write_text(text)
        results.append(_python("-c", _GPU_RUN.format(src=str(src), store=str(store))))
    assert results[0]["out"] == [0.0, 1.0, 2.0, 3.0]
    assert results[1]["out"] == [0.0, 10.0, 20.0, 30.0]
    assert results[1]["compiles"] == 1  # compiled again: the first process's cubin was never stored


def _register_local_overload():
    """An @overload registered inside a function: a new process cannot find it by name."""
    from numba.cuda.extending import overload

    def local_stub(x):
        pass

    @overload(local_stub, target="cuda")
    def ov(x):
        return lambda x: x + 1

    return local_stub


_local_stub = _register_local_overload()


def _uses_local_overload(out, x):
    out[0] = _local_stub(x)


def test_what_a_new_process_cannot_find_by_name_is_not_persisted(tmp_path):
    from lazykern import KernelCache, lazy_kernel

    cache = KernelCache(tmp_path / "store")
    k = lazy_kernel(_uses_local_overload, cache=cache)
    assert k.warm(["void(int32[::1], int32)"], arch="sm_80")[0]["compiled"]
    (row,) = list(cache.entries())
    assert row["bytes"] == 0 and "_register_local_overload.<locals>.ov" in row["memory_only"]
    assert k.warm(["void(int32[::1], int32)"], arch="sm_80")[0]["compiled"]  # never served from the store


def _register_exec_made_overload():
    """An @overload whose implementation exec() made in a namespace of its own: no module holds it."""
    from numba.cuda.extending import overload

    namespace: dict = {}
    exec("def ov(x):\n    return lambda x: x + 2\n", namespace)

    def exec_stub(x):
        pass

    overload(exec_stub, target="cuda")(namespace["ov"])
    return exec_stub


_exec_stub = _register_exec_made_overload()


def _uses_exec_made_overload(out, x):
    out[0] = _exec_stub(x)


def test_a_user_function_made_by_exec_is_named_in_the_memory_only_reason(tmp_path):
    from lazykern import KernelCache, lazy_kernel

    cache = KernelCache(tmp_path / "store")
    assert lazy_kernel(_uses_exec_made_overload, cache=cache).warm(["void(int32[::1], int32)"], arch="sm_80")[0][
        "compiled"
    ]
    (row,) = list(cache.entries())
    assert row["bytes"] == 0 and "function 'ov' made by exec() without a module (<string>:1)" in row["memory_only"]


# -- the manifest's own rules, in process ---------------------------------------------------
class _FakeCai:
    __cuda_array_interface__ = {"shape": (1,), "typestr": "<f4", "data": (4096, False), "version": 3}


@pytest.mark.parametrize(
    ("value", "why"),
    [(_FakeCai(), "device array"), ((1, (2, _FakeCai())), "device array"), (ctypes.c_void_p(16), "ctypes pointer")],
)
def test_a_process_address_anywhere_in_a_frozen_value_is_found(value, why):
    from lazykern._numba.resolved import process_specific

    assert why in process_specific(value)


def test_plain_values_are_not_process_specific():
    from lazykern._numba.resolved import process_specific

    assert process_specific((1, 2.0, "x", np.arange(3))) == ""


@pytest.mark.parametrize(
    "manifest",
    [
        None,
        {},
        {"version": 1, "lines": False, "functions": [], "values": []},  # an older lazykern's: no "registered"
        # version 2 listed registrations per resolved key only (issue 43.4): never trusted now
        {"version": 2, "lines": False, "functions": [], "values": [], "registered": []},
        {"version": 3, "functions": [["x"]], "values": [], "registered": []},
        {"version": 3, "functions": [], "values": [[1]], "registered": []},
        {"version": 3, "functions": [], "values": [], "registered": [[["m"]]]},
        {"version": 3, "functions": [], "values": [], "world": {}, "registries": [], "registered": []},
    ],
)
def test_a_malformed_manifest_is_never_trusted(manifest):
    from lazykern._numba.resolved import verify

    assert verify(manifest, _uses_local_overload)  # a reason, not an exception and not None


def test_a_module_getattr_that_raises_is_a_reason_not_a_crash(tmp_path, monkeypatch):
    from lazykern._numba.resolved import verify

    (tmp_path / "m_raising_getattr.py").write_text("def __getattr__(name):\n    raise RuntimeError('no ' + name)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    manifest = {
        "version": 3,
        "lines": False,
        "functions": [],
        "values": [[["attr", "m_raising_getattr", "N"], "0"]],
        "world": {"types": [], "keys": [], "values": []},
        "registries": [],
        "registered": [],
    }
    assert "RuntimeError" in verify(manifest, _uses_local_overload)


# -- issue 38.5: keys and manifests are functions of the program, not of the process's history -----
_USER_TYPE_MODULE = """
from numba.cuda import cgutils, int32, types
from numba.cuda.cudaimpl import lower
from numba.cuda.extending import core_models, make_attribute_wrapper, register_model, type_callable


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


make_attribute_wrapper(PairType, "x", "x")
make_attribute_wrapper(PairType, "y", "y")


@type_callable(Pair)
def type_pair(context):
    def typer(x, y):
        if isinstance(x, types.Integer) and isinstance(y, types.Integer):
            return pair_type

    return typer


@lower(Pair, types.Integer, types.Integer)
def lower_pair(context, builder, sig, args):
    obj = cgutils.create_struct_proxy(pair_type)(context, builder)
    obj.x, obj.y = args
    return obj._getvalue()


def kern(out, x):
    p = Pair(x, x)
    out[0] = p.x * p.y
"""

_ORDER_RUN = """
import importlib, json, sys
sys.path.insert(0, {src!r})
from numba.cuda import types
if {others}:  # other Numba types first: the per-process type counter moves on
    made = [types.UniTuple(types.int8, n) for n in range(3, 40)] + [types.Array(types.int16, n, "A") for n in (4, 5)]
if {lazykern_first}:
    from lazykern import KernelCache, lazy_kernel
modules = [importlib.import_module(name) for name in {imports!r}]
from lazykern import KernelCache, lazy_kernel
cache = KernelCache({store!r})
compiled = {{}}
for module, name, sig, options in {kernels!r}:
    k = lazy_kernel(getattr(sys.modules[module], name), cache=cache, **options)
    compiled[name] = k.warm([sig], arch="sm_80")[0]["compiled"]
print("JSON:" + json.dumps(compiled))
"""

_ORDER_KERNELS = [
    ("m_user_type", "kern", "void(int32[::1], int32)", {}),
    ("m_numba_own", "tuple_of_tuples", "void(int64[::1], UniTuple(UniTuple(int64, 2), 2))", {}),
    ("m_numba_own", "divide", "void(float32[::1], float32, float32)", {"fastmath": True}),
    ("m_numba_own", "declared", "void(uint32[::1], uint32, uint32)", {}),
]


@pytest.mark.slow  # fresh processes that compile
def test_kernels_hit_whatever_the_process_made_imported_or_warmed_before(tmp_path, monkeypatch):
    """Warmed in one order in one process, then in other orders, after other types, with other
    hash seeds and import orders: every kernel hits (issue 38.5)."""
    src, store = tmp_path / "src", tmp_path / "store"
    src.mkdir()
    (src / "m_user_type.py").write_text(_USER_TYPE_MODULE)
    (src / "m_numba_own.py").write_text(_NUMBA_OWN_MODULE)
    # (other types first, lazykern imported first, import order, warm order, hash seed)
    runs = [
        (False, False, ["m_user_type", "m_numba_own"], [0, 1, 2, 3], "0"),
        (True, False, ["m_numba_own", "m_user_type"], [3, 2, 1, 0], "1"),
        (True, True, ["m_user_type", "m_numba_own"], [2, 0, 3, 1], "2"),
        (False, True, ["m_numba_own", "m_user_type"], [1, 3, 0, 2], "3"),
    ]
    results = []
    for others, lazykern_first, imports, order, seed in runs:
        monkeypatch.setenv("PYTHONHASHSEED", seed)
        kernels = [_ORDER_KERNELS[i] for i in order]
        code = _ORDER_RUN.format(
            src=str(src),
            store=str(store),
            others=others,
            lazykern_first=lazykern_first,
            imports=imports,
            kernels=kernels,
        )
        results.append(_python("-c", code))
    assert all(results[0].values()), results[0]
    for result in results[1:]:
        assert not any(result.values()), results  # every kernel served from the first process's store


# -- issue 38.4: what Numba itself registers (its jitclass overloads of len, operator.truediv ...)
# is Numba's, whatever its functions' __module__ says: these kernels are stored and hit -----------
_NUMBA_OWN_MODULE = """
import operator
import numpy as np
from numba import cuda
from numba.cuda import CUSource

EMPTY = np.empty(0, dtype=np.float32)


def empty_tuple(out, t):
    out[0] = len(t)


def tuple_of_tuples(out, t):
    out[0] = len(t) + len(t[0]) + t[1][1]


def tuple_of_arrays(out, t):
    for i in range(len(t)):
        out[i] = t[i][0]


def empty_constant(out):
    c = cuda.const.array_like(EMPTY)
    out[0] = len(c)


def make_divide():
    op = operator.truediv

    def divide(out, a, b):
        out[0] = op(a, b)

    return divide


divide = make_divide()


ADD3 = 'extern "C" __device__ int add3(unsigned* r, unsigned x, unsigned y) { *r = x + y + 3; return 0; }'


def make_declared():
    add3 = cuda.declare_device("add3", "uint32(uint32, uint32)", link=[CUSource(ADD3)])

    def declared(out, x, y):
        out[0] = add3(x, y)

    return declared


declared = make_declared()
"""

_NUMBA_OWN_RUN = """
import json, logging, sys
sys.path.insert(0, {src!r})
records = []
handler = logging.Handler()
handler.emit = lambda record: records.append(record.getMessage())
logging.getLogger("lazykern").addHandler(handler)
import m_numba_own as m
from lazykern import KernelCache, lazy_kernel
cache = KernelCache({store!r})
cases = {{
    "empty_tuple": ("void(int64[::1], Tuple(()))", {{}}),
    "tuple_of_tuples": ("void(int64[::1], UniTuple(UniTuple(int64, 2), 2))", {{}}),
    "tuple_of_arrays": ("void(float32[::1], UniTuple(float32[::1], 2))", {{}}),
    "empty_constant": ("void(float32[::1])", {{}}),
    "divide": ("void(float32[::1], float32, float32)", {{"fastmath": True}}),
    "declared": ("void(uint32[::1], uint32, uint32)", {{}}),
}}
out = {{}}
for name, (sig, options) in cases.items():
    out[name] = lazy_kernel(getattr(m, name), cache=cache, **options).warm([sig], arch="sm_80")[0]["compiled"]
memory_only = sorted(r["name"] for r in cache.entries() if r.get("memory_only"))
print("JSON:" + json.dumps(dict(compiled=out, memory_only=memory_only, log=[r for r in records if "memory" in r])))
"""


@pytest.mark.slow  # fresh processes that compile
def test_kernels_reaching_numbas_own_generated_overloads_are_stored_and_hit(tmp_path):
    src, store = tmp_path / "src", tmp_path / "store"
    src.mkdir()
    (src / "m_numba_own.py").write_text(_NUMBA_OWN_MODULE)
    first = _python("-c", _NUMBA_OWN_RUN.format(src=str(src), store=str(store)))
    assert all(first["compiled"].values()), first
    assert first["memory_only"] == [] and first["log"] == [], first
    second = _python("-c", _NUMBA_OWN_RUN.format(src=str(src), store=str(store)))
    assert not any(second["compiled"].values()), second  # every one served in a new process


_NUMBA_OWN_GPU_RUN = """
import json, sys
import numpy as np
from numba import cuda
sys.path.insert(0, {src!r})
import m_numba_own as m
from lazykern import KernelCache, lazy_kernel
cache = KernelCache({store!r})
a, b = cuda.to_device(np.array([1.5], np.float32)), cuda.to_device(np.array([2.5], np.float32))
cases = {{
    "empty_tuple": (np.int64, 1, lambda: ((),), {{}}),
    "tuple_of_tuples": (np.int64, 1, lambda: (((1, 2), (3, 4)),), {{}}),
    "tuple_of_arrays": (np.float32, 2, lambda: ((a, b),), {{}}),
    "empty_constant": (np.float32, 1, lambda: (), {{}}),
    "divide": (np.float32, 1, lambda: (np.float32(3.0), np.float32(4.0)), {{"fastmath": True}}),
    "declared": (np.uint32, 1, lambda: (np.uint32(5), np.uint32(6)), {{}}),
}}
out, compiles = {{}}, {{}}
for name, (dtype, n, args, options) in cases.items():
    results = []
    ours = lazy_kernel(getattr(m, name), cache=cache, **options)
    for launcher in (ours, cuda.jit(getattr(m, name), **options)):
        res = cuda.to_device(np.zeros(n, dtype))
        launcher[1, 1](res, *args())
        results.append(res.copy_to_host().tolist())
    compiles[name] = ours.stats()["compiles"]  # (numba's dispatcher has a .stats of its own: not this)
    out[name] = results
print("JSON:" + json.dumps(dict(out=out, compiles=compiles)))
"""


@pytest.mark.gpu
@pytest.mark.slow
def test_gpu_kernels_reaching_numbas_own_overloads_run_like_cuda_jit_and_hit(tmp_path):
    src, store = tmp_path / "src", tmp_path / "store"
    src.mkdir()
    (src / "m_numba_own.py").write_text(_NUMBA_OWN_MODULE)
    runs = [_python("-c", _NUMBA_OWN_GPU_RUN.format(src=str(src), store=str(store))) for _ in range(2)]
    for run in runs:
        for name, (ours, numbas) in run["out"].items():
            assert ours == numbas, (name, ours, numbas)
    assert runs[0]["out"]["declared"] == [[14], [14]]
    assert set(runs[1]["compiles"].values()) == {0}, runs[1]["compiles"]  # a new process compiles none
