"""The public API, listed: every name of ``lazykern.__all__`` and every documented module path.

The package is laid out by stage (compile/, store/, launch/, graph/, jit/, families/, tropical/,
scale/, tools/); what users import (README, notebooks, examples, entry points) must keep working
exactly as written. relayout: keep (this file names the documented paths on purpose).
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

import lazykern
from lazykern import _aliases

ROOT = Path(__file__).resolve().parents[1]

ALL = [
    "CacheError",
    "CaptureError",
    "CompileError",
    "CompileResult",
    "Kernel",
    "KernelCache",
    "KernelFamily",
    "LaunchError",
    "LazyKernel",
    "LazykernError",
    "LazykernWarning",
    "__version__",
    "arrays",
    "compile_source",
    "current_arch",
    "default_cache",
    "graph",
    "lazy_kernel",
    "make_key",
    "nvrtc_version",
    "set_default_cache",
    "tropical",
]

# Documented module path -> names users take from it (README, notebooks, examples, docs/).
MODULES = {
    "lazykern.errors": ["LazykernError", "CompileError", "CacheError", "CaptureError", "LaunchError", "DriverError"],
    "lazykern.config": ["configure_logging"],
    "lazykern.graph": ["capture", "graphed", "DeviceScalar", "CapturePool", "Graph", "GraphedCallable"],
    "lazykern.arrays": ["empty", "zeros"],
    "lazykern.memory": ["on_library_stream"],
    "lazykern.compiler": ["compile_source", "current_arch", "device_compute_capability", "nvrtc_version"],
    "lazykern.kernel": ["Kernel"],
    "lazykern.decorator": ["lazy_kernel", "LazyKernel"],
    "lazykern.families": ["resolve", "declared", "loaded"],
    "lazykern.testing": ["assert_compiled", "assert_matches_reference", "assert_no_compile", "every_backend"],
    "lazykern.multigpu": ["bmm_multi", "split_batch", "device_count", "release_buffers"],
    "lazykern.dask": ["matmul", "warm_workers"],
    "lazykern.bundle": ["export_bundle", "import_bundle"],
    "lazykern.ipython": ["load_ipython_extension"],
    "lazykern.cli": ["main", "app"],
    "lazykern.pytest_plugin": [],
    # Modules that were top-level before the folders: still importable under their old names.
    "lazykern.demo": ["road_graph", "apsp"],
    "lazykern.cache": ["KernelCache", "default_cache", "make_key", "set_default_cache"],
    "lazykern.family": ["KernelFamily"],
    "lazykern.source": ["FamilySource"],
    "lazykern.warm": ["warm"],
    "lazykern.bench": [],
    "lazykern.tropical": ["matmul", "bmm", "matmul_backward", "kernels_for", "family"],
    "lazykern.tropical.api": ["gpu_available"],
    "lazykern.tropical.networks": [],
    "lazykern.tropical.einsum": ["contract_network"],
    "lazykern.tropical.plan": ["make_plan"],
    "lazykern.tropical.fragments": ["Spec", "TileShape"],
    "lazykern.tropical.reference": [],
    "lazykern.tropical.tuning": ["forced_tile"],
    "lazykern.tropical.counting": [],
    "lazykern.tropical.orders": ["graph_order"],
    # The tensor networks' own package (issue 39): the tropical.* paths above are the same modules.
    "lazykern.tn": ["einsum", "argmax_einsum", "contraction_plan", "ContractionPlan"],
    "lazykern.tn.networks": ["SpinGlass", "ground_state_energy", "ground_state", "degeneracy"],
    "lazykern.tn.counting": ["count_network"],
}


def test_all_is_the_listed_api():
    assert sorted(lazykern.__all__) == sorted(ALL)


@pytest.mark.parametrize("name", ALL)
def test_each_public_name_resolves(name):
    assert getattr(lazykern, name) is not None
    namespace: dict[str, object] = {}
    exec(f"from lazykern import {name}", namespace)
    assert namespace[name] is getattr(lazykern, name)


@pytest.mark.parametrize("path", sorted(MODULES))
def test_each_documented_module_path_imports(path):
    module = importlib.import_module(path)
    for name in MODULES[path]:
        assert hasattr(module, name), f"{path} lost {name}"
    real = _aliases.PUBLIC_PATHS.get(path)
    if real is not None:  # a moved module: the documented path is the very same object
        assert module is importlib.import_module(real)
        assert module.__name__ == module.__spec__.name == real


def test_tropical_einsum_stays_the_function_after_its_module_path_is_imported():
    import lazykern.tropical.einsum  # noqa: F401  (the documented module path, an alias of lazykern.tn.einsum)
    from lazykern import tn, tropical

    assert tropical.einsum is tn.einsum and callable(tn.einsum)
    assert sys.modules["lazykern.tropical.einsum"] is sys.modules["lazykern.tn.einsum"]


def test_every_alias_is_documented_here():
    assert set(_aliases.PUBLIC_PATHS) <= set(MODULES)


def test_documented_paths_as_a_user_writes_them_in_a_fresh_process():
    # Not polluted by this test process's imports: `import lazykern` loads no alias target, then each
    # spelling (import a.b, from a import b, from a.b import c, attribute access) gives the real module.
    code = """
import sys, lazykern
assert not [m for m in sys.modules if m.startswith(tuple(lazykern._aliases.PUBLIC_PATHS.values()))]
import lazykern.multigpu
from lazykern import memory
from lazykern.compiler import current_arch
import lazykern.cli._common as common
import lazykern.launch.memory, lazykern.scale.multigpu, lazykern.compile.compiler, lazykern.tools.cli._common
assert lazykern.multigpu is lazykern.scale.multigpu
assert memory is lazykern.launch.memory
assert current_arch is lazykern.compile.compiler.current_arch
assert common is lazykern.tools.cli._common
assert lazykern.testing is sys.modules["lazykern.tools.testing"]
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


def test_entry_points_name_importable_objects():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    targets = [
        *meta["scripts"].values(),
        *meta["entry-points"]["pytest11"].values(),
        *meta["entry-points"]["lazykern.families"].values(),
    ]
    for target in targets:
        module, _, attr = target.partition(":")
        obj = importlib.import_module(module)
        for part in filter(None, attr.split(".")):
            obj = getattr(obj, part)
        assert obj is not None, target


def test_an_unknown_path_still_fails_clearly():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("lazykern.no_such_module")
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        lazykern.no_such_name  # noqa: B018
