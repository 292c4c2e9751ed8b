"""What NVRTC is handed (#line directives) and how its complaints reach a person."""

from __future__ import annotations

import traceback
import warnings

import pytest

from lazykern import CompileError, KernelCache, KernelFamily, LazykernWarning
from lazykern.compile.source import FamilySource

PREAMBLE = "#define X 1\n__device__ int f(int a) {\n  return a + undefined_in_preamble;\n}\n"
FRAGMENT = 'extern "C" __global__ void bad_kernel(int *a) {\n  *a = X;\n  *a = oops;\n}'


def test_line_directives_number_fragment_and_preamble_lines_on_their_own():
    fs = FamilySource("fam", PREAMBLE)
    fs.add("bad_kernel", FRAGMENT)
    unit = fs.translation_unit("bad_kernel")
    assert unit.startswith('#line 1 "fam-preamble"\n#define X 1\n')
    assert '#line 1 "bad_kernel"\nextern "C"' in unit
    assert fs.all_in_one().count("#line 1 ") == 2


def test_compile_errors_name_fragment_lines_and_carry_the_log_once(tmp_path):
    fam = KernelFamily("fam", PREAMBLE, cache=KernelCache(tmp_path / "c"))
    fam.add("bad_kernel", FRAGMENT)
    with pytest.raises(CompileError) as info:
        fam.get("bad_kernel", "sm_90")
    exc = info.value
    assert "bad_kernel(3): error" in exc.log and "fam-preamble(3): error" in exc.log
    first = str(exc).splitlines()[0]
    assert first.startswith("NVRTC failed to compile 'bad_kernel': fam-preamble(3): error: identifier")
    shown = "".join(traceback.format_exception(exc))
    assert shown.count('identifier "oops" is undefined') == 1  # no chained copy of the same log
    assert exc.source == fam.source.translation_unit("bad_kernel") and ".source" in str(exc)


def test_an_arch_nvrtc_cannot_target_is_refused_with_the_valid_ones(tmp_path):
    fam = KernelFamily("fam", cache=KernelCache(tmp_path / "c"))
    fam.add("k", 'extern "C" __global__ void k(int *a) { *a = 1; }')
    with pytest.raises(ValueError, match=r"sm_999 .*use one of sm_\d+.*sm_90"):
        fam.get("k", "sm_999")


def test_warnings_point_at_the_users_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        KernelCache(blocker / "cache")  # this line is the user's
    [w] = [w for w in caught if issubclass(w.category, LazykernWarning)]
    assert w.filename == __file__ and "unusable" in str(w.message)


def test_a_failed_compile_leaves_nothing_for_the_garbage_collector_to_trip_on(tmp_path, monkeypatch):
    """cuda.core's Program raised in __dealloc__ when a traceback cycle kept it (cuda-python#2876)."""
    import gc
    import sys

    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    fam = KernelFamily("fam", PREAMBLE, cache=KernelCache(tmp_path / "c"))
    fam.add("bad_kernel", FRAGMENT)
    for _ in range(3):
        with pytest.raises(CompileError):
            fam.get("bad_kernel", "sm_80")
    gc.collect()
    assert seen == []
