"""The diskcache private parts lazykern/store/_store.py borrows, checked against the installed diskcache.

``Cache._sql`` (a statement runner on its connection) and ``Cache._disk`` (its Disk) are not public;
a diskcache release that renames or reshapes either fails here by name, not as a broken repair.
"""

from __future__ import annotations

import ast
from pathlib import Path

import diskcache
import pytest

from lazykern.store import _store

STORE = Path(_store.__file__)


@pytest.fixture
def cache(tmp_path):
    c = diskcache.Cache(str(tmp_path), disk=_store.NoPickleDisk, disk_min_file_size=16)
    yield c
    c.close()


def _moved(name: str) -> str:
    return (
        f"diskcache {diskcache.__version__} changed Cache.{name}, which lazykern/store/_store.py borrows: adapt {name}"
    )


def test_sql_of_runs_statements_on_the_cache_connection(cache):
    cache.set("k", b"x" * 64)
    try:
        rows = _store.sql_of(cache)("SELECT key, filename FROM Cache WHERE raw = 1").fetchall()
    except (AttributeError, TypeError) as exc:
        pytest.fail(f"{_moved('_sql')} ({exc})")
    assert [r[0] for r in rows] == ["k"] and rows[0][1], _moved("_sql")


def test_disk_of_removes_a_blob_file_by_its_row_name(cache, tmp_path):
    cache.set("k", b"x" * 64)
    ((name,),) = _store.sql_of(cache)("SELECT filename FROM Cache WHERE key = 'k'").fetchall()
    assert (tmp_path / name).is_file()
    try:
        _store.disk_of(cache).remove(name)
    except (AttributeError, TypeError) as exc:
        pytest.fail(f"{_moved('_disk')} ({exc})")
    assert not (tmp_path / name).exists(), _moved("_disk")


def test_only_the_adapter_functions_touch_the_private_parts():
    touching = {}
    for node in ast.walk(ast.parse(STORE.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef):
            names = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute) and n.attr in ("_sql", "_disk")}
            if names:
                touching[node.name] = names
    assert touching == {"sql_of": {"_sql"}, "disk_of": {"_disk"}}
    package = STORE.parents[1]
    others = [
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if p != STORE and any(f"._{n}" in p.read_text(encoding="utf-8") for n in ("sql", "disk"))
    ]
    assert others == []
