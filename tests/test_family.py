from __future__ import annotations

import threading
import time

import pytest

from lazykern import CompileError, KernelFamily

from .conftest import FRAGMENTS, PREAMBLE


def test_only_the_requested_fragment_is_compiled(family):
    assert family.compiled() == []
    k = family.get("scale_i32", "sm_90")
    assert family.compile_calls == 1 and family.compiled() == ["scale_i32"]
    assert k.code[:4] == b"\x7fELF" and k.arch == "sm_90"
    assert family.get("scale_i32", "sm_90") is k
    family.get("scale_i32", "sm_80")
    assert family.compile_calls == 2


def test_translation_unit_is_preamble_plus_one_fragment(family):
    tu = family.source.translation_unit("fill_max")
    assert PREAMBLE in tu and "fill_max" in tu and "scale_i32" not in tu


def test_warm_compiles_everything_for_each_arch(family):
    kernels = family.warm(arch=["sm_80", "sm_90"])
    assert len(kernels) == 6 and family.compile_calls == 6
    assert sorted(family.compiled()) == sorted(family.names())


def test_compile_error_names_the_fragment(cache):
    fam = KernelFamily("broken", PREAMBLE, cache=cache)
    fam.add("bad", 'extern "C" __global__ void bad() { undeclared_thing(); }')
    with pytest.raises(CompileError) as info:
        fam.get("bad", "sm_80")
    assert info.value.name == "bad" and "undeclared_thing" in info.value.log


def test_unknown_name_lists_known(family):
    with pytest.raises(KeyError, match="scale_f32"):
        family.get("nope", "sm_80")


def test_bad_definitions_are_refused(cache):
    fam = KernelFamily("x", cache=cache)
    with pytest.raises(ValueError):
        fam.add("has space", "")
    with pytest.raises(TypeError):
        fam.add("k", b"bytes")
    with pytest.raises(TypeError):
        KernelFamily("x", options="-std=c++17")
    with pytest.raises(ValueError):
        KernelFamily("x", route="magic")


def test_html_repr(family):
    family.get("scale_f32", "sm_80")
    html = family._repr_html_()
    assert "not compiled" in html and "scale_f32" in html


def test_generated_fragments_are_made_on_request_and_kept(cache):
    made = []

    def generate(name: str):
        if not name.startswith("fill_"):
            return None
        made.append(name)
        value = int(name.split("_")[1])
        return f'extern "C" __global__ void {name}(int *a) {{ *a = {value} * SCALE; }}', ["ptr"]

    fam = KernelFamily("gen", PREAMBLE, cache=cache)
    fam.add("scale_f32", FRAGMENTS["scale_f32"])
    fam.add_generator(generate, lambda: ["fill_1", "fill_2"])
    assert fam.names() == ["scale_f32", "fill_1", "fill_2"] and made == []
    assert fam.get("fill_7", "sm_90").signature == ("ptr",)  # any name the generator answers
    fam.get("fill_7", "sm_90")
    assert made == ["fill_7"] and "fill_7" in fam.source.translation_unit("fill_7")
    with pytest.raises(KeyError, match="has no kernel 'other'"):
        fam.get("other", "sm_90")


def _fake_compiler(monkeypatch, during=lambda name: None):
    """The family's compile (compile_deferred) replaced by a fake that runs ``during(name)`` and returns a
    tiny ELF-looking cubin, complete (no traced pass left to wait for)."""
    from lazykern.compile import compiler

    calls = []

    def fake(source, *, name, arch, options=(), route="nvrtc"):
        calls.append(name)
        during(name)
        return compiler.CompileResult(b"\x7fELF" + name.encode(), "cubin", arch, name, tuple(options), "", 0.0), None

    monkeypatch.setattr(compiler, "compile_deferred", fake)
    return calls


def _run_threads(fn, args):
    results, errors = [], []  # a list, not a dict by thread ident: an ended thread's ident is reused

    def work(arg):
        try:
            results.append(fn(arg))
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(a,)) for a in args]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    return results


def test_different_kernels_of_one_family_compile_at_the_same_time(family, monkeypatch):
    names = list(FRAGMENTS)
    together = threading.Barrier(len(names), timeout=10)  # breaks unless every compile runs at once
    calls = _fake_compiler(monkeypatch, lambda name: together.wait())
    kernels = _run_threads(lambda n: family.get(n, "sm_90"), names)
    assert sorted(calls) == sorted(names) and family.compile_calls == len(names)
    assert sorted(k.name for k in kernels) == sorted(names)


def test_one_kernel_asked_by_many_threads_compiles_once(family, monkeypatch):
    calls = _fake_compiler(monkeypatch, lambda name: time.sleep(0.2))
    kernels = _run_threads(lambda n: family.get(n, "sm_90"), ["scale_f32"] * 8)
    assert calls == ["scale_f32"] and family.compile_calls == 1
    assert len({id(k) for k in kernels}) == 1
