"""An import-linter contract type that forbids a dependency's private modules outside one adapter.

import-linter's own ``forbidden`` contract takes only top-level external packages (``numba``, not
``numba.cuda.cudadrv``). Its graph keeps, for each import of an external package, the line that
imports it: this contract reads the dotted path and names from that line, so that
``from numba.cuda.cudadrv.driver import MemoryPointer`` outside ``lazykern._numba`` breaks it
while ``from numba import cuda`` does not. Registered in pyproject.toml (``contract_types``).
"""

from __future__ import annotations

import importlib.util
import re

import grimp
from importlinter import Contract, ContractCheck, fields, output

_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import\s+(.*)|import\s+([\w.]+))")


class PrivateExternalImports(Contract):
    """Only ``allowed_importers`` (and their descendants) may import ``external``'s modules or
    names outside ``public``; a name starting with ``_`` is private wherever it comes from."""

    type_name = "private_external"

    external = fields.StringField()
    public = fields.ListField(subfield=fields.StringField())
    allowed_importers = fields.ListField(subfield=fields.StringField())

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        external = str(self.external)
        public = {str(p) for p in self.public}  # type: ignore[attr-defined]
        allowed = [str(a) for a in self.allowed_importers]  # type: ignore[attr-defined]
        found = []
        for importer in sorted(graph.find_modules_that_directly_import(external)):
            if any(importer == a or importer.startswith(a + ".") for a in allowed):
                continue
            for detail in graph.get_import_details(importer=importer, imported=external):
                bad = _private_parts(str(detail["line_contents"]), external, public)
                if bad:
                    found.append((importer, detail["line_number"], detail["line_contents"], bad))
        return ContractCheck(kept=not found, metadata={"found": found})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for importer, line, text, bad in check.metadata["found"]:
            output.print_error(f"{importer}:{line}: {text.strip()}  (private: {', '.join(bad)})")
            output.new_line()
        output.print(f"Move these uses behind {', '.join(map(str, self.allowed_importers))}.")


def _private_parts(line: str, external: str, public: set[str]) -> list[str]:
    """The private modules and names one import line reaches (``[]`` if it is not ``external``'s)."""
    m = _IMPORT.match(line.split("#", 1)[0])
    if m is None:
        return []
    module = m.group(1) or m.group(3)
    if module != external and not module.startswith(external + "."):
        return []
    bad = [] if module in public else [module]
    if m.group(2) and not bad:
        for name in (n.split(" as ")[0].strip(" ()\\") for n in m.group(2).split(",")):
            dotted = f"{module}.{name}"
            # `from numba.cuda import cudadrv` names a private module through a public one
            if name and (name.startswith("_") or (dotted not in public and _is_module(dotted))):
                bad.append(dotted)
    return bad


def _is_module(dotted: str) -> bool:
    try:
        return importlib.util.find_spec(dotted) is not None
    except (ImportError, ValueError):
        return False
