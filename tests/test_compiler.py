from __future__ import annotations

import pytest

from lazykern import CompileError, compile_source
from lazykern.compile.compiler import normalize_arch, parse_options

SRC = 'extern "C" __global__ void k(int *a) { *a = VALUE; }'


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_cubin_for_arch_without_gpu(arch):
    r = compile_source(SRC, name="k", arch=arch, options=["-DVALUE=7"])
    assert r.code[:4] == b"\x7fELF"
    assert r.arch == arch and r.target == "cubin" and r.seconds > 0


def test_lto_route_gives_cubin():
    r = compile_source(SRC, name="k", arch="sm_90", options=["-DVALUE=7"], route="lto")
    assert r.code[:4] == b"\x7fELF"


def test_cccl_headers_are_found():
    src = "#include <cuda/std/limits>\n" + SRC.replace("VALUE", "cuda::std::numeric_limits<int>::max()")
    assert compile_source(src, name="k", arch="sm_80").code[:4] == b"\x7fELF"


def test_syntax_error_carries_log_name_arch_options():
    with pytest.raises(CompileError) as info:
        compile_source("this is not C++", name="broken", arch="sm_80", options=["-std=c++17"])
    err = info.value
    assert err.name == "broken" and err.arch == "sm_80" and err.options == ("-std=c++17",)
    assert "error" in err.log and "broken" in str(err)


def test_options_keep_order_and_reject_unknown():
    kw = parse_options(["-DA=1", "-D", "B=2", "--use_fast_math", "-std=c++17", "-Iinc"])
    assert kw == {"define_macro": ["A=1", "B=2"], "use_fast_math": True, "std": "c++17", "include_path": ["inc"]}
    for bad in (["-o", "x.cubin"], ["--output-file=x"], ["-arch=sm_90"], ["foo.cu"]):
        with pytest.raises(CompileError, match="unsupported or unsafe"):
            parse_options(bad)
    with pytest.raises(TypeError):
        parse_options("-std=c++17")


def test_arch_normalisation():
    assert normalize_arch("90") == "sm_90" == normalize_arch((9, 0)) == normalize_arch("SM_90")
    assert normalize_arch("sm_90a") == "sm_90a"
    with pytest.raises(ValueError, match="arch"):
        normalize_arch("hopper")
