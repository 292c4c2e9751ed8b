"""The documented module paths of the public API, kept importable after the package moved into folders.

Users import some modules by name (``from lazykern.compiler import current_arch``,
``lazykern.multigpu.bmm_multi``, ``%load_ext lazykern.ipython``; installed entry points name
``lazykern.cli:main`` and ``lazykern.pytest_plugin``). Each such path resolves to the module
that lives in its folder now, the very same object: ``lazykern.memory is lazykern.launch.memory``,
so an attribute set through one path (``monkeypatch.setattr``) is seen through the other. A meta
path finder does it on first import, so ``import lazykern`` still imports nothing more.
Library code imports the real paths (import-linter checks those). Under ``python -m`` a path runs
what its real path runs (``python -m lazykern.cli`` is ``python -m lazykern``); a path that is no
command is refused in one line naming ``python -m lazykern``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import CodeType, ModuleType

# Documented path -> where the module lives (tests/test_public_api.py imports each one both ways).
# relayout: keep (the tool that moved the modules rewrites every file but this table).
PUBLIC_PATHS = {
    "lazykern.arrays": "lazykern.launch.arrays",
    "lazykern.bench": "lazykern.tools.bench",
    "lazykern.bundle": "lazykern.scale.bundle",
    "lazykern.cache": "lazykern.store.cache",
    "lazykern.cli": "lazykern.tools.cli",
    "lazykern.compiler": "lazykern.compile.compiler",
    "lazykern.dask": "lazykern.scale.dask",
    "lazykern.decorator": "lazykern.jit.decorator",
    "lazykern.demo": "lazykern.tools.demo",
    "lazykern.family": "lazykern.families.family",
    "lazykern.ipython": "lazykern.tools.ipython",
    "lazykern.kernel": "lazykern.launch.kernel",
    "lazykern.memory": "lazykern.launch.memory",
    "lazykern.multigpu": "lazykern.scale.multigpu",
    "lazykern.pytest_plugin": "lazykern.tools.pytest_plugin",
    "lazykern.source": "lazykern.compile.source",
    "lazykern.testing": "lazykern.tools.testing",
    "lazykern.tropical.counting": "lazykern.tn.counting",
    "lazykern.tropical.einsum": "lazykern.tn.einsum",
    "lazykern.tropical.networks": "lazykern.tn.networks",
    "lazykern.tropical.orders": "lazykern.tn.orders",
    "lazykern.warm": "lazykern.families.warm",
}


def real_name(name: str) -> str | None:
    """Where the module a documented path names lives (its submodules too), or None."""
    if not name.startswith("lazykern.") or name.endswith(".__main__"):
        # Every import in the process asks this finder first: answer others at once. ``python -m``
        # runs a package's __main__ from its real folder.
        return None
    for alias, real in PUBLIC_PATHS.items():
        if name == alias or name.startswith(alias + "."):
            return real + name[len(alias) :]
    return None


class _Loader(importlib.abc.Loader):
    """Hands the import system the already-imported real module instead of executing a file."""

    def __init__(self, real: str) -> None:
        self.real = real
        self._spec: ModuleSpec | None = None

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.real)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system set __spec__ to the alias spec: the module keeps its own (reload, pickle).
        module.__spec__ = self._spec

    def get_code(self, fullname: str) -> CodeType:
        """What ``python -m ALIAS`` runs (runpy asks for it): ``python -m REAL``, or one line refusing.

        The real module's own code cannot be handed over: runpy would run it with the alias's
        ``__package__``, and its relative imports would resolve in the wrong folder.
        """
        real = importlib.util.find_spec(self.real)
        is_package = real is not None and real.submodule_search_locations is not None
        if not is_package or importlib.util.find_spec(self.real + ".__main__") is None:
            # runpy prints an ImportError from here as one line and exits 1.
            raise ImportError(
                f"{fullname} is a library module, not a command; run `python -m lazykern --help` for the commands"
            )
        return compile(f"import runpy\nrunpy.run_module({self.real!r}, run_name='__main__', alter_sys=True)\n",
                       f"<python -m {fullname}: {self.real}>", "exec")  # fmt: skip


class _Finder:
    @staticmethod
    def find_spec(name: str, path: Sequence[str] | None = None, target: ModuleType | None = None) -> ModuleSpec | None:
        real = real_name(name)
        if real is None:
            return None
        return ModuleSpec(name, _Loader(real))


def install() -> None:
    """Put the finder first (once): ahead of path finders that could load a second copy of a module."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
