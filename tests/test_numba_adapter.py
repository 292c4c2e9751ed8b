"""The numba-cuda internals lazykern borrows (lazykern/_numba), checked against the installed numba-cuda.

Each borrowed name is one test: when a numba-cuda release moves or reshapes it, the failure names
the internal, what lazykern uses it for, and the numba-cuda version, so the fix starts in
``lazykern/_numba/`` and nowhere else.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import numpy as np
import pytest

try:
    import tomllib
except ImportError:  # Python 3.10: pytest itself depends on tomli there
    import tomli as tomllib

from lazykern._numba import BORROWED, internals

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(
    internals.simulating(),
    reason="under NUMBA_ENABLE_CUDASIM numba.cuda swaps in the simulator's modules: the contract is checked "
    "against the real target (the default test run, no GPU needed)",
)


def _numba_cuda_version() -> str:
    import numba_cuda

    return str(getattr(numba_cuda, "__version__", "?"))


def _resolve(spec: str):
    module_name, _, path = spec.partition(":")
    obj = importlib.import_module(module_name)
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("spec", sorted(BORROWED))
def test_each_borrowed_internal_is_where_the_adapter_expects_it(spec):
    try:
        _resolve(spec)
    except (ImportError, AttributeError) as exc:
        pytest.fail(
            f"numba-cuda {_numba_cuda_version()} moved {spec} (lazykern uses it for: {BORROWED[spec]}): {exc}. "
            "Update lazykern/_numba/ for this release, or install a numba-cuda in the range pyproject.toml declares."
        )


def _params(spec: str) -> list[str]:
    return list(inspect.signature(_resolve(spec)).parameters)


@pytest.mark.parametrize(
    ("spec", "needed"),
    [
        (
            "numba.cuda.compiler:compile_cuda",
            [
                "pyfunc",
                "return_type",
                "args",
                "debug",
                "lineinfo",
                "fastmath",
                "nvvm_options",
                "cc",
                "max_registers",
                "lto",
            ],
        ),  # fmt: skip
        ("numba.cuda.dispatcher:CUDADispatcher.compile_device", ["self", "args", "return_type"]),
        ("numba.cuda.dispatcher:CUDADispatcher.call", ["self", "args", "launch_config"]),
        ("numba.cuda.cudadrv.dummyarray:Array.from_desc", ["offset", "shape", "strides", "itemsize"]),
        ("numba.cuda.simulator.kernel:FakeCUDAKernel.__getitem__", ["self", "configuration"]),
        ("numba.cuda.cudadrv.driver:Context.create_module_image", ["self", "image"]),
    ],
)
def test_borrowed_functions_still_take_the_arguments_we_pass(spec, needed):
    missing = [p for p in needed if p not in _params(spec)]
    assert not missing, f"numba-cuda {_numba_cuda_version()}: {spec} no longer takes {missing} ({BORROWED[spec]})"


def test_device_array_template_matches_what_numba_reads():
    """The attributes the template sets are the ones DeviceNDArray's own methods read."""
    t = internals.device_array_template((3, 4), (16, 4), 4, np.dtype(np.float32))
    for attr in ("ndim", "_dummy", "shape", "strides", "dtype", "size", "alloc_size", "stream"):
        assert attr in t, f"numba-cuda {_numba_cuda_version()}: DeviceNDArray template lacks {attr}"
    assert t["shape"] == (3, 4) and t["strides"] == (16, 4) and t["size"] == 12 and t["alloc_size"] == 48
    from numba.cuda.cudadrv.driver import MemoryPointer

    cls, pointer = internals.device_array_classes()
    freed = []
    make = internals.device_array_maker([(t, 0, 48), (t, 256, 48)], object(), lambda: 0x1000, freed.append, ())
    (arr, other), address, second = make()
    assert type(arr) is cls and arr.device_ctypes_pointer.value == address == 0x1000
    assert arr.gpu_data.device_pointer == 0x1000 and isinstance(arr.gpu_data, MemoryPointer)
    assert other.gpu_data.device_pointer == second == 0x1100 and isinstance(other.gpu_data, pointer)
    assert str(arr._numba_type_) == "array(float32, 2d, C)"
    del arr
    assert freed == []  # the second array's pointer borrows the buffer
    del other
    assert freed == [0x1000]


def test_capture_patch_targets_exist_and_patches_come_off():
    targets = internals.capture_patch_targets()
    assert targets["allocators"] and targets["synchronize"] and targets["copies"]
    for owner, name in [t for group in targets.values() for t in group]:
        assert callable(getattr(owner, name)), f"numba-cuda {_numba_cuda_version()}: {owner}.{name} is gone"
    owner, name = targets["synchronize"][0]
    before = getattr(owner, name)
    saved = internals.patch(owner, name, lambda original: "patched")
    assert getattr(owner, name) == "patched"
    internals.unpatch(saved)
    assert getattr(owner, name) is before


def test_the_supported_numba_cuda_range_is_declared_and_installed():
    from packaging.specifiers import SpecifierSet

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    spec = next(d for d in deps if d.startswith("numba-cuda"))
    allowed = SpecifierSet(spec[len("numba-cuda") :].split(";")[0].strip())
    assert "0.29.9" not in allowed and "<" in str(allowed), f"no upper bound in {spec!r}"
    assert _numba_cuda_version() in allowed, f"numba-cuda {_numba_cuda_version()} is outside {spec!r}"


@pytest.mark.parametrize(
    ("line", "private"),
    [
        ("from numba import cuda", []),
        ("from numba.cuda import config as cuda_config", []),
        ("from numba.cuda.extending import overload", []),
        ("from numba.cuda.cudadrv.driver import MemoryPointer", ["numba.cuda.cudadrv.driver"]),
        ("import numba.cuda.dispatcher", ["numba.cuda.dispatcher"]),
        ("from numba.cuda import cudadrv", ["numba.cuda.cudadrv"]),
        ("from numba.cuda import jit, _foo  # why", ["numba.cuda._foo"]),
        ("from numpy.core import multiarray", []),
    ],
)
def test_the_import_contract_tells_private_numba_imports(line, private):
    """The import-linter contract type behind "No private numba-cuda import outside lazykern._numba"."""
    from tests._import_contracts import _private_parts

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    public = set(next(c for c in contracts if c["type"] == "private_external")["public"])
    assert _private_parts(line, "numba", public) == private
