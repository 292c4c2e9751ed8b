"""The package's layering (import-linter contracts in pyproject.toml), the rule that no module reads
another module's underscore names, and the public-names rule for benchmarks/."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold():
    exe = shutil.which("lint-imports")
    assert exe is not None, "lint-imports is missing: pip install import-linter (the test extra)"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([exe, "--no-cache"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def _private_imports(path: Path) -> list[str]:
    """``from lazykern.x import _y`` / ``from lazykern._x import y`` / ``import lazykern._x`` in one file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "lazykern":
            parts = node.module.split(".")
            names = [a.name for a in node.names]
            if any(p.startswith("_") for p in parts) or any(n.startswith("_") for n in names):
                found.append(f"{path.name}:{node.lineno} from {node.module} import {', '.join(names)}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "lazykern" and any(p.startswith("_") for p in parts):
                    found.append(f"{path.name}:{node.lineno} import {alias.name}")
    return found


@pytest.mark.parametrize("path", sorted((ROOT / "benchmarks").glob("*.py")), ids=lambda p: p.name)
def test_benchmarks_use_public_names_only(path):
    assert _private_imports(path) == []


# -- no module reads another module's underscore names ----------------------------------------------
PACKAGE = ROOT / "lazykern"


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(dotted: str) -> bool:
    base = ROOT.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _target(path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def _defines(tree: ast.AST) -> tuple[set[str], set[str]]:
    """Underscore names a module makes itself, and the underscore methods its Protocols declare
    (a callee says what it needs of its owner: the owner implements it, mypy checks it)."""
    made: set[str] = set()
    declared: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(
            getattr(b, "id", getattr(b, "attr", "")) == "Protocol" for b in node.bases
        ):
            declared |= {f.name for f in node.body if isinstance(f, ast.FunctionDef) and _is_private(f.name)}
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            made.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            made.add(node.id)
        elif isinstance(node, ast.arg):
            made.add(node.arg)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                made.add(node.attr)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            made |= {a.asname for a in node.names if a.asname}
    return {n for n in made if _is_private(n)}, declared - made


def _private_reads() -> list[str]:
    paths = sorted(PACKAGE.rglob("*.py"))
    trees = {p: ast.parse(p.read_text(encoding="utf-8")) for p in paths}
    made = {p: _defines(t) for p, t in trees.items()}
    owners: dict[str, set[Path]] = {}
    for p, (names, _) in made.items():
        for n in names:
            owners.setdefault(n, set()).add(p)
    found = []
    for p, tree in trees.items():
        own, declared = made[p]
        where = p.relative_to(ROOT)
        modules: set[str] = set()  # local names bound to lazykern modules
        external: set[str] = set()  # local names bound to other packages' modules (ctypes._Pointer is theirs)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = _target(p, node)
                if target.split(".")[0] != "lazykern":
                    continue
                for a in node.names:
                    if _is_module(f"{target}.{a.name}"):
                        modules.add(a.asname or a.name)
                    elif _is_private(a.name):
                        found.append(f"{where}:{node.lineno}: from {target} import {a.name}")
            elif isinstance(node, ast.Import):
                modules |= {a.asname for a in node.names if a.asname and a.name.startswith("lazykern.")}
                external |= {
                    (a.asname or a.name).split(".")[0] for a in node.names if not a.name.startswith("lazykern")
                }
        stores = {
            id(t)
            for node in ast.walk(tree)
            for t in (node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)])
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
            for t in [t.value if isinstance(t, ast.Subscript) else t]
            if isinstance(t, ast.Attribute)
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not _is_private(node.attr):
                continue
            base = node.value.id if isinstance(node.value, ast.Name) else None
            if base in external:
                continue
            foreign = node.attr in owners and owners[node.attr] - {p}
            if base in modules:  # module._name: always another module's name
                found.append(f"{where}:{node.lineno}: {base}.{node.attr}")
            elif foreign and base not in ("self", "cls") and id(node) in stores:
                found.append(f"{where}:{node.lineno}: writes {base or '...'}.{node.attr}")
            elif foreign and node.attr not in own and node.attr not in declared:
                defined_in = ", ".join(sorted(str(o.relative_to(ROOT)) for o in owners[node.attr]))
                found.append(f"{where}:{node.lineno}: reads .{node.attr} (made in {defined_in})")
    return found


def test_no_module_reads_another_modules_underscore_names():
    # Give the other module a small function or property without the underscore (a "public in the
    # package" name), or declare the callback in a Protocol of the calling module (jit/ does).
    assert _private_reads() == []
