"""Every registry Numba keeps is walked for user registrations (issue 43.4): an edit of a user
``lower_cast``, ``make_attribute_wrapper``, ``lower_constant``, ``typeof_impl``,
``lower_getattr_generic``, ``overload_method`` or data model is never served stale.

The cases (tests/_numba_registry_cases.py) compile on the CPU (NVRTC route, sm_80), each round in a
fresh process against one store: the base, the base again (in another order, with another hash
seed), then each round of one edit per case, twice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types as pytypes
from pathlib import Path

import pytest

from tests import _numba_registry_cases as cases

ROOT = str(Path(__file__).resolve().parents[1])


def _fresh_process(src: Path, store: Path, order: str, seed: str) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # an edit within the same second must not meet a stale .pyc
    env["PYTHONHASHSEED"] = seed
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    args = [sys.executable, "-m", "tests._numba_registry_cases", str(src), str(store), order]
    proc = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(next(li for li in proc.stdout.splitlines() if li.startswith("JSON:"))[5:])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """[(round, applied edits, report)]: each round twice, the second in the other order."""
    src, store = tmp_path_factory.mktemp("ext"), tmp_path_factory.mktemp("store")
    out = []
    for round_index in range(cases.rounds() + 1):
        applied = cases.write(src, round_index)
        for order, seed in (("forward", "0"), ("reverse", "7")):
            out.append((round_index, applied, _fresh_process(src, store, order, seed)))
    return out


@pytest.mark.slow  # fresh processes that compile
def test_unchanged_extensions_are_served_whatever_the_order(runs):
    first = runs[0][2]
    assert all(r["compiled"] for r in first["cases"].values()), first
    assert first["memory_only"] == []
    for round_index, _, report in runs[1::2]:  # each round's second run: nothing changed since the first
        assert {c: r["compiled"] for c, r in report["cases"].items()} == dict.fromkeys(cases.CASES, False), (
            round_index,
            report,
        )
        compiled_by_the_first = runs[runs.index((round_index, _, report)) - 1][2]["cases"]
        assert {c: r["served"] for c, r in report["cases"].items()} == {
            c: r["served"] for c, r in compiled_by_the_first.items()
        }


def _edits() -> list[tuple[str, str, int]]:
    return [(case, m[0], i + 1) for case, (_, muts) in cases.CASES.items() for i, m in enumerate(muts)]


@pytest.mark.slow
@pytest.mark.parametrize(("case", "label", "round_index"), _edits(), ids=lambda v: str(v))
def test_an_edited_registration_is_compiled_again_never_served_stale(runs, case, label, round_index):
    _, applied, report = runs[2 * round_index]
    assert f"{case}: {label}" in applied
    r = report["cases"][case]
    assert r["compiled"], f"{label}: the store served the binary from before the edit"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "label"),
    [("cast", "lower_cast add -> mul"), ("attribute_wrapper", "make_attribute_wrapper x -> y")],
)
def test_the_issue_examples_change_the_binary_and_are_compiled_again(runs, case, label):
    """Issue 43.4 verbatim: the edit gives another binary, which the next process compiles."""
    base = runs[0][2]["cases"][case]
    _, applied, report = runs[2]
    assert f"{case}: {label}" in applied
    assert report["cases"][case]["served"] != base["served"], "the edit leaves the binary alone: the case tests nothing"
    assert report["cases"][case]["compiled"]


@pytest.mark.slow
def test_every_edit_but_the_member_order_changes_the_binary(runs):
    """An edit that leaves the binary alone tests only the miss (a struct held in registers
    does not show its member order): every other one gives another binary."""
    same = []
    for case, label, round_index in _edits():
        before = runs[2 * round_index - 1][2]["cases"][case]["served"]
        after = runs[2 * round_index][2]["cases"][case]["served"]
        if before == after:
            same.append(f"{case}: {label}")
    assert same == ["model: register_model member order"]


# -- the walk itself, in process --------------------------------------------------------------------
def _contexts():
    from numba.cuda.descriptor import cuda_target

    cuda_target.target_context.refresh()
    return cuda_target.typing_context, cuda_target.target_context


def test_every_registry_the_cuda_contexts_hold_is_walked_and_named():
    from lazykern._numba import registries

    typing_context, target_context = _contexts()
    found, unnamed = registries.consulted(typing_context, target_context)
    held = [*typing_context._registries, *target_context._registries]
    assert held and all(any(reg is f for f in found) for reg in held)
    # the data model manager's handler tables and typeof's dispatch tables are walked too
    tables = target_context.data_model_manager._handlers.maps
    assert all(any(getattr(f, "_handlers", None) is table for f in found) for table in tables)
    from numba.cuda.typing.typeof import typeof_impl

    assert any(f is typeof_impl for f in found)
    names, missing = registries.names_of(found)
    assert unnamed == [] and missing == []
    assert len(names) == len(found)
    # a new process finds each again by name
    again = registries.find(names)
    assert len(again) == len(found) and all(any(a is f for f in found) for a in again)


def test_a_registry_or_table_numba_adds_later_is_walked(monkeypatch):
    """A new registry in a Numba module, or a new list in a registry, needs no change here."""
    from numba.cuda import types
    from numba.cuda.core.imputils import Registry

    from lazykern._numba import registries

    class LaterType(types.Type):
        def __init__(self):
            super().__init__(name="LaterType")

    def later_cast(context, builder, fromty, toty, val):
        return val

    reg = Registry("later")
    reg.lower_cast(LaterType, types.int32)(later_cast)
    reg.later_things = [(later_cast, (LaterType,))]  # a kind of registration Numba adds later
    module = pytypes.ModuleType("numba.cuda._lazykern_later")
    module.registry = reg
    monkeypatch.setitem(sys.modules, module.__name__, module)
    typing_context, target_context = _contexts()
    monkeypatch.setitem(target_context._registries, reg, None)
    found, _ = registries.consulted(typing_context, target_context)
    assert any(f is reg for f in found)
    names, missing = registries.names_of([reg])
    assert names == [["numba.cuda._lazykern_later:registry"]] and missing == []
    regs = registries.user_registrations([reg], registries.name_map([reg], names))
    assert sorted(r.place for r in regs) == [
        "numba.cuda._lazykern_later:registry.casts",
        "numba.cuda._lazykern_later:registry.later_things",
    ]
    assert all(r.impl is later_cast for r in regs)


def test_a_user_registry_no_module_holds_makes_the_kernel_memory_only():
    from numba.cuda.core.imputils import Registry

    from lazykern._numba import registries

    names, missing = registries.names_of([Registry("nowhere")])
    assert names == [] and missing and "nowhere" in missing[0]


_ONLY_NUMBA = """
import json
from numba.cuda.descriptor import cuda_target
import numba.experimental.jitclass  # Numba's own exec-made overloads of len, operator.add ...
from lazykern._numba import registries
cuda_target.target_context.refresh()
found, _ = registries.consulted(cuda_target.typing_context, cuda_target.target_context)
names, _ = registries.names_of(found)
regs = registries.user_registrations(found, registries.name_map(found, names))
print("JSON:" + json.dumps([[r.place, list(r.keys), list(r.formals)] for r in regs]))
"""


def test_numbas_own_registrations_are_not_the_users():
    """In a process with no user extension, the walk finds no user registration (a fresh
    process: other tests register extensions of their own)."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run([sys.executable, "-c", _ONLY_NUMBA], env=env, cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads(next(li for li in proc.stdout.splitlines() if li.startswith("JSON:"))[5:]) == []


def test_a_malformed_registered_section_is_a_reason():
    from lazykern._numba.resolved import VERSION, verify

    manifest = {"version": VERSION, "lines": False, "functions": [], "values": [], "registries": [[1]]}
    assert "could not be verified" in verify(manifest, test_a_malformed_registered_section_is_a_reason)
