"""lazykern's pytest plugin: GPU code tested on any machine, Numba's simulator where there is no GPU.

Active for anyone who installs lazykern (entry point ``pytest11: lazykern``).
Turn it off with ``pytest -p no:lazykern`` or ``LAZYKERN_PYTEST=0``.

* ``--lazykern-sim=auto|on|off`` (ini ``lazykern_sim``, default ``auto``): ``auto``
  sets ``NUMBA_ENABLE_CUDASIM=1`` where the driver reports no GPU (a value
  already in the environment wins), ``on`` always, ``off`` never. It is set
  before conftest files and test modules import ``numba.cuda``.
* markers: ``gpu`` (skipped where no GPU runs the code: none found, or the
  simulator is on), ``cudasim`` (runs only under the simulator), ``no_cudasim``
  (never under it), ``multi_gpu(n)`` (needs n GPUs).
* fixtures: ``lazykern_cache`` (a fresh store per test, made the default),
  ``lazykern_session_cache`` (one store per session, shared by pytest-xdist
  workers), ``lazykern_stream``, ``gpu_or_sim`` ("gpu" or "sim").
* ``@lazykern.testing.every_backend`` runs a test on the GPU and under the
  simulator: the backend this process does not have runs in a child pytest.

This module imports neither Numba nor lazykern's kernels at import time: pytest
loads it before it decides what ``NUMBA_ENABLE_CUDASIM`` should be.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from .. import config as _config  # as _config: pytest hooks take a `config` argument
from ..launch._gpu_probe import gpu_count

SIM_ENV = "NUMBA_ENABLE_CUDASIM"
OFF_ENV = "LAZYKERN_PYTEST"
MODES = ("auto", "on", "off")
BACKENDS = ("device", "simulator")
BACKEND_PARAM = "lazykern_backend"
_NO_GPU = "needs a CUDA GPU; none found"


@dataclass(frozen=True)
class _State:
    enabled: bool
    simulator: bool
    gpus: int
    mode: str


_STATE = pytest.StashKey[_State]()
_SAVED_ENV = pytest.StashKey[Any]()


def _enabled() -> bool:
    return _config.pytest_plugin_enabled()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lazykern", "lazykern: GPU kernels on any machine")
    group.addoption(
        "--lazykern-sim",
        choices=MODES,
        default=None,
        help="run Numba-Python kernels in Numba's CUDA simulator: auto (where no GPU is found, the default), on, off",
    )
    parser.addini("lazykern_sim", "auto, on or off: as --lazykern-sim", default="auto")


def _mode(config: pytest.Config) -> str:
    # Before pytest_configure, options live only in the early parse of the command line.
    early = getattr(config, "known_args_namespace", None)
    mode = config.getoption("lazykern_sim", None) or getattr(early, "lazykern_sim", None)
    mode = mode or config.getini("lazykern_sim") or "auto"
    mode = str(mode).strip().lower()
    if mode not in MODES:
        raise pytest.UsageError(f"lazykern_sim must be one of {MODES}, got {mode!r} (ini option lazykern_sim)")
    return mode


def _decide(config: pytest.Config) -> _State:
    """Choose simulator or device once per process and put it in the environment (children inherit it)."""
    state = config.stash.get(_STATE, None)
    if state is not None:
        return state
    if not _enabled():
        state = _State(False, os.environ.get(SIM_ENV) == "1", 0, "off")
        config.stash[_STATE] = state
        return state
    mode = _mode(config)
    gpus = gpu_count()
    preset = os.environ.get(SIM_ENV)
    if mode == "on":
        want = True
    elif mode == "off":
        want = False
    else:
        want = preset == "1" if preset is not None else gpus == 0
    config.stash[_SAVED_ENV] = preset
    os.environ[SIM_ENV] = "1" if want else "0"
    simulator = _numba_simulating(want)
    state = _State(True, simulator, gpus, mode)
    config.stash[_STATE] = state
    return state


def _numba_simulating(want: bool) -> bool:
    """What Numba will do: ``want``, unless Numba read its settings before the plugin could say (numba.cuda
    takes the switch from numba's own config, read when ``numba`` is first imported: a pytest
    ``filterwarnings`` naming a numba warning class is enough)."""
    if "numba.cuda" in sys.modules:
        from numba.cuda import config as cuda_config

        actual = bool(cuda_config.ENABLE_CUDASIM)
    elif "numba.core.config" in sys.modules:
        actual = bool(getattr(sys.modules["numba.core.config"], "ENABLE_CUDASIM", want))
    else:
        return want
    if actual != want:
        warnings.warn(
            f"lazykern: numba was imported before the pytest plugin could set {SIM_ENV}="
            f"{int(want)}; the simulator stays {'on' if actual else 'off'}. Import numba in tests or fixtures, "
            "not in a plugin, at the top of the rootdir conftest.py or by a filterwarnings entry naming a numba "
            "warning class (add that one in pytest_configure).",
            pytest.PytestConfigWarning,
            stacklevel=2,
        )
    return actual


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    _decide(early_config)


def pytest_configure(config: pytest.Config) -> None:
    for line in (
        "gpu: needs a CUDA GPU (skipped, with the reason, where there is none or the simulator is on)",
        "cudasim: runs only under Numba's CUDA simulator",
        "no_cudasim: never runs under Numba's CUDA simulator",
        "multi_gpu(n): needs at least n CUDA GPUs",
    ):
        config.addinivalue_line("markers", line)
    _decide(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SAVED_ENV not in config.stash:
        return
    saved = config.stash[_SAVED_ENV]
    if saved is None:
        os.environ.pop(SIM_ENV, None)
    else:
        os.environ[SIM_ENV] = saved


def pytest_report_header(config: pytest.Config) -> str:
    s = _decide(config)
    if not s.enabled:
        return f"lazykern: plugin off ({OFF_ENV}=0)"
    if not s.simulator and s.gpus == 0:
        why = f"{SIM_ENV}=0 was set" if s.mode == "auto" else f"--lazykern-sim={s.mode}"
        return (
            f"lazykern: no CUDA GPU here and the simulator is off ({why}): tests marked gpu are skipped, "
            "kernel launches fail (--lazykern-sim=on runs them in the CUDA simulator)"
        )
    where = "CUDA simulator" if s.simulator else f"device ({s.gpus} GPU{'s' if s.gpus != 1 else ''})"
    return f"lazykern: kernels run on the {where} (--lazykern-sim={s.mode})"


def _skip_reason(item: pytest.Item, s: _State) -> str | None:
    """Why ``item`` cannot run here, or None."""
    usable = 0 if s.simulator else s.gpus
    if item.get_closest_marker("gpu") is not None and usable == 0:
        return _NO_GPU + (" (the CUDA simulator is on)" if s.gpus else "") + "; run it on a GPU machine"
    multi = item.get_closest_marker("multi_gpu")
    if multi is not None:
        need = int(multi.args[0]) if multi.args else int(multi.kwargs.get("n", 2))
        if usable < need:
            return f"needs {need} CUDA GPUs; {usable} usable here"
    if item.get_closest_marker("cudasim") is not None and not s.simulator:
        return "runs only under the CUDA simulator (--lazykern-sim=on)"
    if item.get_closest_marker("no_cudasim") is not None and s.simulator:
        return "does not run under the CUDA simulator"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    s = _decide(config)
    if not s.enabled:
        return
    for item in items:
        reason = _skip_reason(item, s)
        if reason is None:
            reason = _backend_skip(item, s)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))


# -- every backend ---------------------------------------------------------------
def _wanted_backend(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return None if callspec is None else callspec.params.get(BACKEND_PARAM)


def _backend_skip(item: pytest.Item, s: _State) -> str | None:
    want = _wanted_backend(item)
    if want == "device" and (s.simulator or s.gpus == 0):
        return _NO_GPU + " for the device run (the simulator run covers this machine)"
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """A simulator run asked for in a device process runs in a child pytest with the simulator on."""
    s = _decide(pyfuncitem.config)
    if not s.enabled or _wanted_backend(pyfuncitem) != "simulator" or s.simulator:
        return None
    config = pyfuncitem.config
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--lazykern-sim=on", pyfuncitem.nodeid]
    if config.pluginmanager.get_plugin("lazykern") is None:  # loaded with -p, not through its entry point
        cmd[3:3] = ["-p", __name__]
    env = {**os.environ, SIM_ENV: "1"}
    done = subprocess.run(cmd, cwd=str(config.rootpath), env=env, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"the simulator run (in a child pytest) failed:\n{done.stdout[-4000:]}{done.stderr[-2000:]}")
    return True


@pytest.fixture
def lazykern_backend(request: pytest.FixtureRequest) -> str:
    """The backend this run of an ``every_backend`` test uses: "device" or "simulator"."""
    return str(request.param)


# -- fixtures ------------------------------------------------------------------------
@pytest.fixture
def gpu_or_sim(pytestconfig: pytest.Config) -> str:
    """ "gpu" when kernels run on a real GPU, "sim" under the CUDA simulator; skips where neither can."""
    s = _decide(pytestconfig)
    if s.simulator:
        return "sim"
    if s.gpus == 0 and s.enabled:
        pytest.skip(_NO_GPU + " and the simulator is off (--lazykern-sim=off)")
    return "gpu"


def _isolated_cache(directory: Any) -> Iterator[Any]:
    from ..store import cache as cache_module

    mp = pytest.MonkeyPatch()
    previous = cache_module.default_cache_if_made()
    kc = cache_module.KernelCache(directory)
    mp.setenv("LAZYKERN_CACHE_DIR", str(directory))  # child processes use it too
    cache_module.set_default_cache(kc)
    try:
        yield kc
    finally:
        cache_module.set_default_cache(previous)
        mp.undo()
        kc.close()


@pytest.fixture
def lazykern_cache(tmp_path: Any) -> Iterator[Any]:
    """A fresh, empty kernel store for this test, made lazykern's default (and LAZYKERN_CACHE_DIR).

    Kernels given no ``cache=`` compile into it; ``lazykern_cache.stats()`` says
    what this test looked up, found and compiled.
    """
    yield from _isolated_cache(tmp_path / "lazykern-cache")


@pytest.fixture(scope="session")
def lazykern_session_cache(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One kernel store for the whole session, shared by every pytest-xdist worker.

    Workers compile each kernel about once between them: the store locks each key
    across processes. Made lazykern's default for the session.
    """
    base = tmp_path_factory.getbasetemp()
    worker = hasattr(request.config, "workerinput")  # a pytest-xdist worker
    root = base.parent if worker else base  # xdist gives each worker a base under one shared parent
    yield from _isolated_cache(root / "lazykern-session-cache")


@pytest.fixture
def lazykern_stream(gpu_or_sim: str) -> Iterator[Any]:
    """A fresh Numba stream (a simulated one under the simulator), synchronized after the test."""
    from numba import cuda

    stream = cuda.stream()
    yield stream
    stream.synchronize()
