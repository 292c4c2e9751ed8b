"""The tropical family: naming scheme, laziness, and every fragment compiling with NVRTC (no GPU needed)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess

import pytest

from lazykern.tropical import core_specs, fragments, make_family

from ._warm_cache import SAMPLE_VARIANTS

# sha256 over json [name, code, signature, symbol] of every kernel in family.names() order, taken
# from the fragments registered at import before they were generated on request: a change here
# changes kernel names or texts, so every user's cache misses (say so in the change log).
FRAGMENTS_DIGEST = "d52761a240ec654577835f56fa6565fb2e70cf7a60179902d446f5eae43779d9"


def test_generated_fragments_are_the_registered_ones_byte_for_byte():
    fam = make_family()
    digest = hashlib.sha256()
    for name in fam.names():
        f = fam.source.fragment(name)
        digest.update(json.dumps([name, f.code, list(f.signature), f.symbol]).encode())
    assert len(fam.names()) == 746
    assert digest.hexdigest() == FRAGMENTS_DIGEST


def test_names_round_trip_through_specs():
    names = fragments.names()
    specs = [fragments.Spec.parse(n) for n in names]
    assert [s.name for s in specs] == names and specs == fragments.every_spec()
    assert fragments.Spec.parse("backward_ab_f64") == fragments.Spec("", "f64", kind="backward", grad="ab")
    assert fragments.Spec.parse("reduce_minplus_i32_argmax").kind == "reduce"
    assert fragments.Spec.parse("maxplus_f32_r4").rows


@pytest.mark.parametrize(
    "name",
    ["maxplus_f32_nn", "bmm_maxplus_f32_splitk", "bmm_maxplus_f32_r", "maxplus_f32_nt_r", "maxplus_f16",
     "backward_ab_i32", "backward_a_f32", "reduce_maxplus_f32_s", "maxplus", "", "maxplus_f32_argmax_argmax",
     "maxplus_f32_s_extra", "sumplus_f32"],
)  # fmt: skip
def test_names_of_no_kernel_are_refused(name):
    with pytest.raises(ValueError, match="not a tropical kernel"):
        fragments.Spec.parse(name)
    assert fragments.fragment(name) is None
    with pytest.raises(KeyError, match="has no kernel"):
        make_family().source.fragment(name)


def test_nothing_is_registered_until_asked():
    fam = make_family()
    assert fam.source.fragments == {}
    fam.source.fragment("bmm_maxmul_i32_tt")
    assert list(fam.source.fragments) == ["bmm_maxmul_i32_tt"]
    assert len(fam.names()) == 746 and fam.core_names() == fragments.core_names()


def test_names_follow_the_scheme():
    names = make_family().names()
    # tiles (large, s, t) x {matmul, bmm}, split-K (one per layout, no bmm twin), rows (r, r4), reduce, backward
    per_kernel = 3 * 4 * 2  # semirings x dtypes x argmax
    assert len(names) == len(set(names)) == per_kernel * (3 * 4 * 2 + 4 + 2 + 1) + 2  # backward: one per float dtype
    for name in ["maxplus_f32", "maxplus_f32_argmax", "maxplus_f32_nt", "bmm_maxplus_f32", "bmm_maxplus_f32_argmax",
                 "backward_ab_f32", "backward_ab_f64", "maxplus_f32_s", "maxmul_i64_r", *SAMPLE_VARIANTS]:  # fmt: skip
        assert name in names
    assert not any(n.startswith("bmm_") and n.endswith("_splitk") for n in names)
    core = {s.name for s in core_specs()}
    assert len(core) == 48  # 12 plain + 12 argmax + 24 batched
    assert all(not n.endswith(("_nt", "_tn", "_tt", "_s", "_t")) for n in core)


def test_core_names_are_registered_and_cover_the_backward_kernels():
    core = fragments.core_names()
    assert len(core) == len(set(core)) == 50
    assert set(core) <= set(make_family().names())
    assert {"maxplus_f32", "bmm_maxmul_i64_argmax", "backward_ab_f32", "backward_ab_f64"} <= set(core)


def test_fragment_text_is_one_extern_c_kernel():
    code, signature = fragments.fragment("bmm_minplus_i64_argmax_tn_s")
    assert code.count('extern "C" __global__') == 1
    assert "lk::gemm<lk::MINPLUS, lk::i64, true, true, false, lk::Tile<32, 32, 8, 2, 2>>" in code
    assert signature == fragments.BMM_SIGNATURE


def test_default_tiles_are_the_sweep_winners():
    big = {d: fragments.tile_shape("", d) for d in fragments.DTYPES}
    assert big["f32"] == fragments.TileShape(128, 128, 16, 8, 8, 1)
    assert big["i32"] == fragments.TileShape(128, 128, 16, 8, 8, 2, 8)
    assert big["f64"] == big["i64"] == fragments.TileShape(64, 64, 16, 4, 4, 2)
    arg = {d: fragments.tile_shape("", d, True) for d in fragments.DTYPES}
    assert arg["f32"] == fragments.TileShape(32, 64, 16, 4, 4, 4)
    assert arg["i32"] == fragments.TileShape(64, 64, 16, 4, 4, 2, 8)
    assert arg["i64"] == fragments.TileShape(64, 64, 16, 4, 4, 2)
    assert fragments.tile_shape("", "i32", semiring="maxmul") == fragments.TileShape(128, 128, 16, 8, 8, 1)
    assert arg["f64"] == fragments.TileShape(32, 64, 8, 4, 4, 4)
    split = {(d, a): fragments.tile_shape("splitk", d, a) for d in fragments.DTYPES for a in (False, True)}
    assert {(s.bm, s.bn) for s in split.values()} == {(64, 64)}  # plan.split_k counts 64x64 blocks
    assert split["f32", True] == split["i32", True] == fragments.TileShape(64, 64, 16, 4, 4, 2)
    frags = {n: fragments.fragment(n) for n in fragments.names()}
    assert "__launch_bounds__(128, 4) maxplus_f64_argmax(" in frags["maxplus_f64_argmax"][0]
    assert "__launch_bounds__(256, 1) maxplus_f32(" in frags["maxplus_f32"][0]
    assert "lk::Tile<128, 128, 16, 8, 8, 8>" in frags["bmm_minplus_i32_nt"][0]
    assert "lk::Tile<64, 64, 16, 4, 4>" in frags["maxmul_i64"][0]
    assert "lk::rows<lk::MAXPLUS, float, false, 4>" in frags["maxplus_f32_r4"][0]
    assert "lk::rows<lk::MAXPLUS, float, false, 8>" in frags["maxplus_f32_r"][0]


def test_splitk_and_reduce_fragments():
    frags = {n: fragments.fragment(n) for n in ("minplus_f64_argmax_tn_splitk", "reduce_maxmul_i64_argmax")}
    code, signature = frags["minplus_f64_argmax_tn_splitk"]
    assert signature == fragments.SPLITK_SIGNATURE
    assert "lk::gemm<lk::MINPLUS, double, true, true, false, lk::Tile<64, 64, 8, 4, 4>, true>" in code
    assert "splits, kslice);" in code
    code, signature = frags["reduce_maxmul_i64_argmax"]
    assert signature == fragments.REDUCE_SIGNATURE
    assert "lk::reduce_slices<lk::MAXMUL, lk::i64, true>" in code
    assert fragments.tile_shape("splitk", "f32").bk % 4 == 0  # slices stay 16-byte aligned


def test_creating_a_family_compiles_nothing(cache):
    fam = make_family(cache)
    assert fam.compile_calls == 0 and fam.compiled() == []
    assert "--use_fast_math" not in fam.source.options  # would break the inf/NaN rules


def test_lazy_forward_and_backward_compile_exactly_those(cache):
    fam = make_family(cache)
    wanted = ["maxplus_f32_argmax", "backward_ab_f32"]
    for name in wanted:
        fam.get(name, arch="sm_90")
    assert fam.compile_calls == 2
    assert fam.compiled() == sorted(wanted)
    again = make_family(cache)  # a new process: everything comes from the cache
    for name in wanted:
        again.get(name, arch="sm_90")
    assert again.compile_calls == 0


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_every_core_fragment_compiles(tropical_cache, arch):
    fam = tropical_cache.family(arch)  # compiles them, once per test run (a CompileError fails this test)
    names = [s.name for s in core_specs()] + [n for n in fam.names() if n.startswith("backward_")] + SAMPLE_VARIANTS
    kernels = fam.warm(names, arch=arch)
    assert fam.compile_calls == 0 and len(kernels) == len(names) == 68
    assert all(k.code[:4] == b"\x7fELF" and k.arch == arch for k in kernels)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cuobjdump") is None, reason="cuobjdump not on PATH")
def test_sass_inner_loops(tropical_cache, tmp_path):
    fam = tropical_cache.family("sm_90")

    def sass(name: str) -> str:
        path = tmp_path / f"{name}.cubin"
        path.write_bytes(fam.get(name, arch="sm_90").code)
        return subprocess.run(["cuobjdump", "-sass", str(path)], capture_output=True, text=True, check=True).stdout

    f32 = sass("maxplus_f32")
    assert f32.count("FMNMX") >= 512 and f32.count(" FADD") >= 512  # 8x8 per thread, BK = 8, unrolled
    assert sass("maxplus_i32").count("VIADDMNMX") >= 512  # the fast integer path: one DPX op per MAC


@pytest.mark.parametrize(
    "defines",
    [
        ("-DLK_WARP_XY=1",),
        ("-DLK_FRAG_PIPE=1",),
        ("-DLK_CP_ASYNC=1", "-DLK_STAGES=3", "-DLK_WARP_XY=1"),
        ("-DLK_KUNROLL=4",),
    ],
)
def test_round5_variants_compile_for_every_layout(defines):
    """The f32-peak sweep macros (benchmarks/sweep_variants.cuh) build the transposed layouts and argmax too."""
    from benchmarks.tile_sweep import sweep_source
    from lazykern.compile.compiler import compile_source
    from lazykern.tropical._family import OPTIONS

    specs = [fragments.Spec("maxplus", "f32", False, "tt"), fragments.Spec("minplus", "f32", True, "nt")]
    code = "\n".join(fragments.gemm_code(s, shape=fragments.TileShape(64, 128, 16, 8, 8, 2)) for s in specs)
    assert compile_source(sweep_source(code), name="r5", arch="sm_90", options=(*OPTIONS, *defines)).code


def test_sweep_switches_live_outside_the_product():
    from lazykern.tropical._family import preamble

    for switch in ("LK_WARP_XY", "LK_FRAG_PIPE", "LK_CP_ASYNC", "LK_STAGES", "LK_KUNROLL"):
        assert f"#define {switch}" not in preamble()
    assert 'asm volatile("cp.async' not in preamble()  # the helpers live in the sweep header
