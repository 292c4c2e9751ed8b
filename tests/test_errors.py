"""One error hierarchy: every exception and warning class of the package lives in lazykern/errors.py."""

from __future__ import annotations

import ast
import pathlib

import pytest

import lazykern
from lazykern import errors
from lazykern.scale import bundle
from lazykern.store import _entry, cache
from lazykern.tropical import _arrays

PACKAGE = pathlib.Path(lazykern.__file__).parent
_ERROR_BASES = ("Error", "Warning", "Exception")


def _exception_classes(path: pathlib.Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            bases = [ast.unparse(b) for b in node.bases]
            if any(b.endswith(_ERROR_BASES) for b in bases) and not node.name.startswith("_"):
                found.append(node.name)
    return found


def test_no_public_exception_class_outside_errors_py():
    stray = {
        str(p.relative_to(PACKAGE)): names
        for p in sorted(PACKAGE.rglob("*.py"))
        if p.name != "errors.py" and (names := _exception_classes(p))
    }
    assert stray == {}, f"define these in lazykern/errors.py and import them: {stray}"


def test_old_homes_still_export_the_same_classes():
    assert _entry.EntryError is errors.EntryError
    assert bundle.BundleError is errors.BundleError
    assert cache.LazykernWarning is lazykern.LazykernWarning is errors.LazykernWarning
    assert _arrays.DriverError is errors.DriverError


@pytest.mark.parametrize(
    "cls, bases",
    [
        (errors.EntryError, (errors.CacheError, ValueError)),
        (errors.BundleError, (errors.CacheError,)),
        (errors.DriverError, (errors.LazykernError,)),
        (errors.LazykernWarning, (UserWarning,)),
    ],
)
def test_hierarchy(cls, bases):
    assert all(issubclass(cls, b) for b in bases)


def test_a_failed_driver_call_is_a_lazykern_error(monkeypatch):

    from lazykern.launch import memory

    monkeypatch.setattr(memory._drv, "cuMemsetD8Async", lambda *args: (1,))
    with pytest.raises(errors.DriverError, match="cuMemsetD8Async of 64 bytes at 0x1000 failed"):
        memory.memset_zero(0x1000, 64, 0)
