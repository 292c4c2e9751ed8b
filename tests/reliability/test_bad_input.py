"""Bad input to the foundation's public functions: refused with a clear error, never smuggled through."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lazykern import CacheError, CompileError, Kernel, KernelCache, KernelFamily, LaunchError, compile_source, make_key
from lazykern.compile.compiler import _OPTIONS, parse_options

SRC = 'extern "C" __global__ void k(int *a) { *a = A; }'
FIELDS = {parser("1")[0] for parser in _OPTIONS.values()}
INJECTIONS = [
    "-o",
    "-o/tmp/lazykern-pwn",
    "--output-file=/tmp/lazykern-pwn",
    "--output-file",
    "-arch=sm_50",
    "--gpu-architecture=compute_50",
    "--pre-include=/etc/passwd",
    "-include",
    "/etc/passwd",
    "-dc",
    "--ptx",
    "; rm -rf /",
    "$(touch /tmp/lazykern-pwn)",
    "-std=c++17\n-o /tmp/lazykern-pwn",
    "-DA=1\x00--output-file=/tmp/lazykern-pwn",
]
KNOWN = sorted(_OPTIONS)


@pytest.mark.parametrize("option", [o for o in INJECTIONS if not o.startswith(("-D", "-std"))])
def test_injection_options_are_refused(option):
    with pytest.raises(CompileError, match="unsupported or unsafe"):
        parse_options([option])
    with pytest.raises(CompileError):
        compile_source(SRC, name="k", arch="sm_90", options=["-DA=1", option])
    assert not os.path.exists("/tmp/lazykern-pwn")


def test_values_only_ever_become_nvrtc_options(tmp_path):
    out = tmp_path / "pwn"
    # a newline in a macro value could start a new source line: refused before NVRTC sees it
    with pytest.raises(CompileError, match="NUL or line break"):
        compile_source(SRC, name="k", arch="sm_90", options=["-DA=1\n#error injected"])
    # ptxas options are handed to NVRTC's in-process ptxas, which writes no file
    r = compile_source(SRC, name="k", arch="sm_90", options=["-DA=1", f"-Xptxas=--output-file={out}"])
    assert r.code[:4] == b"\x7fELF" and not out.exists()
    with pytest.raises(CompileError, match="NUL or line break"):
        parse_options(["-std=c++17\n-o x"])


option_text = st.one_of(st.sampled_from(KNOWN + INJECTIONS), st.text(max_size=30))
option_lists = st.lists(
    st.one_of(
        option_text,
        st.builds(lambda f, v: f + v, st.sampled_from(["-D", "-I", "-U", "-std=", "-Xptxas="]), st.text(max_size=12)),
    ),
    max_size=6,
)


@given(option_lists)
@settings(max_examples=400, deadline=None)
def test_parse_options_accepts_only_known_fields(options):
    try:
        kwargs = parse_options(options)
    except (CompileError, TypeError):
        return
    assert set(kwargs) <= FIELDS
    for opt in options:  # every accepted item is a known flag or the value of the flag before it
        flag = opt.split("=", 1)[0]
        assert (
            flag in _OPTIONS
            or opt[:2] in ("-D", "-U", "-I")
            or opt
            in sum(([v] if isinstance(v, str) else list(v) for v in kwargs.values() if isinstance(v, (str, list))), [])
        )


@given(
    st.one_of(st.none(), st.integers(), st.binary(max_size=5), st.text(max_size=5), st.lists(st.integers(), max_size=2))
)
@settings(max_examples=100, deadline=None)
def test_parse_options_rejects_non_sequences(value):
    try:
        parse_options(value)
    except (TypeError, CompileError):
        return
    assert isinstance(value, list) and not value  # only [] is valid


names = st.one_of(
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_.\-]{0,10}", fullmatch=True), st.text(max_size=12), st.integers(), st.none()
)
codes = st.one_of(st.text(max_size=40), st.binary(max_size=10), st.none())


@given(
    name=names,
    code=codes,
    symbol=st.one_of(st.none(), st.text(max_size=8)),
    options=st.one_of(st.just(()), option_lists, st.text(max_size=5)),
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_family_add_and_get_fail_cleanly(name, code, symbol, options):
    fam = KernelFamily("fuzz", cache=KernelCache(enabled=False))
    try:
        fam.add(name, code, symbol=symbol, options=options)
    except (ValueError, TypeError):
        assert name not in fam.names()
        return
    assert fam.names() == [name]
    with pytest.raises(KeyError):
        fam.get(name + "_other", "sm_90")
    with pytest.raises(ValueError):
        fam.get(name, "not-an-arch")


def test_family_get_compiles_only_valid_definitions(cache):
    fam = KernelFamily("x", cache=cache)
    fam.add("k", SRC, options=["-DA=3"])
    assert fam.get("k", "sm_90").code[:4] == b"\x7fELF"
    fam.add("bad_opt", SRC.replace("void k", "void bad_opt"), options=["--output-file=/tmp/lazykern-pwn"])
    with pytest.raises(CompileError, match="unsafe"):
        fam.get("bad_opt", "sm_90")
    assert not os.path.exists("/tmp/lazykern-pwn")


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda: compile_source(b"bytes", name="k", arch="sm_90"), TypeError),
        # refused, though as CompileError on option "-": compile_source tuple()s options before parse_options
        (lambda: compile_source(SRC, name="k", arch="sm_90", options="-DA=1"), (TypeError, CompileError)),
        (lambda: compile_source(SRC, name="k", arch="sm_90", options=[1]), TypeError),
        (lambda: compile_source(SRC, name="k", arch="x86"), ValueError),
        (lambda: compile_source(SRC, name="k", arch="sm_90", target="exe"), ValueError),
        (lambda: compile_source(SRC, name="k", arch="sm_90", route="shell"), ValueError),
        (lambda: make_key(b"bytes", arch="sm_90"), TypeError),
        (lambda: make_key(SRC, arch="sm_90", options="-DA=1"), TypeError),
        (lambda: make_key(SRC, arch=90), TypeError),
        (lambda: KernelCache(123), TypeError),
        (lambda: KernelCache(size_limit="lots"), ValueError),
        (lambda: KernelCache(enabled=False).lookup(1.5), TypeError),
        (lambda: KernelCache(enabled=False).store("k", "str code"), TypeError),
        (lambda: KernelCache(enabled=False).__setitem__("k", object()), CacheError),
    ],
)
def test_wrong_types_are_refused(call, error):
    with pytest.raises(error):
        call()


_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.text(max_size=4),
    st.binary(max_size=4),
    st.builds(np.zeros, st.integers(0, 3)),
    st.sampled_from([np.int32(1), np.float64(2.5), np.intp(7)]),
)


@given(st.lists(_values, max_size=4), st.sampled_from([("ptr", "int32"), ("float32",), None]))
@settings(max_examples=300, deadline=None)
def test_launch_packing_fails_only_with_launch_errors(args, signature):
    k = Kernel("k", "k", b"\x7fELF", arch="sm_90", signature=signature)
    try:
        packed = k.pack(args)
    except LaunchError:
        return
    # device pointers go to cuda.core as Python ints, scalars as NumPy scalars of the declared type
    assert all(isinstance(p, np.generic) or (type(p) is int) for p in packed)
