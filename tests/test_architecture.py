"""docs/ARCHITECTURE.md stays true: every path it names exists, every folder is described, and its
module list is the tree's own.

``python3 -m tests.test_architecture --write`` regenerates that list (after adding a module).
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lazykern"
DOC = ROOT / "docs" / "ARCHITECTURE.md"
BEGIN, END = "<!-- modules:begin -->", "<!-- modules:end -->"
OUTSIDE = ("tests/", "benchmarks/", "notebooks/", "examples/", "docs/")


def _summary(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    if not doc:
        return "`python -m` entry point" if path.name == "__main__.py" else "(no docstring)"
    return " ".join(doc.split("\n\n")[0].split()).replace("|", "\\|")


def _layer_order() -> list[str]:
    """Top-level modules and folders, bottom layer first (the folders' layers contract)."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c.get("containers") == ["lazykern"])
    names = [n.strip(" ()").split(".")[0] for layer in reversed(layers) for n in layer.split(":")]
    return list(dict.fromkeys(names))  # the Numba adapter's modules sit in two layers: its folder once


def generate() -> str:
    rows = []
    for name in _layer_order():
        folder, module = PACKAGE / name, PACKAGE / f"{name}.py"
        if module.is_file():
            rows.append(f"| `{name}.py` | {_summary(module)} |")
        elif (folder / "__init__.py").is_file():
            for path in sorted(folder.rglob("*.py")):
                rel = path.relative_to(PACKAGE).as_posix()
                rows.append(f"| `{rel}` | {_summary(path)} |")
    return "\n".join(["| module | what it is |", "| --- | --- |", *rows])


def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


def _section(text: str) -> str:
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def write() -> None:
    text = _doc()
    head, rest = text.split(BEGIN, 1)
    DOC.write_text(f"{head}{BEGIN}\n{generate()}\n{END}{rest.split(END, 1)[1]}", encoding="utf-8")


def test_the_module_list_is_the_trees_own():
    assert _section(_doc()) == generate(), (
        "docs/ARCHITECTURE.md is out of date: python3 -m tests.test_architecture --write"
    )


def test_every_top_level_module_has_a_layer():
    # generate() walks the layers: a module or folder missing from them would be missing from the doc.
    named = set(_layer_order())
    on_disk = {p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    on_disk |= {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert on_disk <= named, f"not in the folders' layers contract: {sorted(on_disk - named)}"


def _exists(token: str) -> bool:
    outside = token.startswith(OUTSIDE) or token == "lazykern/"
    token = token.rstrip("/")
    if outside:
        return bool(list(ROOT.glob(token)))
    if "/" in token:
        return bool(list(PACKAGE.glob(token)))
    return bool(list(PACKAGE.rglob(token)))  # a bare name, inside its folder's row


def test_every_path_it_names_exists():
    tokens = set(re.findall(r"`([^`\s]+)`", _doc()))
    paths = {t for t in tokens if re.fullmatch(r"[\w.*/]+\.(py|cu|cuh)|[\w]+/(\w+/)*", t)}
    assert len(paths) > 40  # the doc names the tree; the pattern still finds its paths
    assert sorted(t for t in paths if not _exists(t)) == []


def _resolves(name: str) -> bool:
    """The longest importable prefix (documented paths are aliases: importing is the check), then attributes."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def test_every_dotted_name_it_gives_imports():
    names = set(re.findall(r"`(lazykern(?:\.\w+)+)`", _doc()))
    assert sorted(n for n in names if not _resolves(n)) == []


def test_every_folder_is_described():
    table = _doc().split("## Folders", 1)[1].split("\n## ", 1)[0]
    first_column = set(re.findall(r"^\| `([\w/]+/)` \|", table, re.M))
    folders = {f"{p.parent.relative_to(PACKAGE).as_posix()}/" for p in PACKAGE.glob("*/__init__.py")}
    assert folders <= first_column, f"folders not in the Folders table: {sorted(folders - first_column)}"
    nested = {p.parent.name + "/" for p in PACKAGE.glob("*/*/__init__.py")}
    assert all(f"`{n}`" in table for n in nested), "a nested package is not named in the Folders table"


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    else:
        print(generate())
