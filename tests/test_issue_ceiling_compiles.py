"""benchmarks/issue_ceiling.py without a GPU: the microkernels compile to the SASS they claim, the host math holds."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from benchmarks import issue_ceiling as ic

needs_cuobjdump = pytest.mark.skipif(shutil.which("cuobjdump") is None, reason="cuobjdump is not on PATH")


@pytest.fixture(scope="module")
def cubin() -> bytes:
    return ic.compile_cubin("sm_90")


def test_every_kernel_compiles_for_sm_90(cubin):
    assert cubin[:4] == b"\x7fELF"
    for v in ic.VARIANTS:
        assert v.symbol.encode() in cubin, f"{v.symbol} missing from the cubin"


@needs_cuobjdump
def test_f32_loop_is_fadd_and_fmnmx_in_equal_counts(cubin):
    report = ic.sass_reports(cubin)["f32"]
    hist = report["histogram"]
    assert hist["FADD"] == hist["FMNMX"] == report["macs"] == 512
    assert report["clean"], ic.describe_loop(ic.VARIANTS[0], report)


@needs_cuobjdump
def test_every_fixed_form_loop_is_clean_and_none_spills(cubin):
    reports = ic.sass_reports(cubin)
    for v in ic.VARIANTS:
        assert reports[v.name]["local_memory"] == 0, ic.describe_loop(v, reports[v.name])
        if v.per_mac is not None:
            assert reports[v.name]["clean"], ic.describe_loop(v, reports[v.name])


def test_hottest_loop_takes_the_largest_backward_branch():
    insns = [(0x00, "MOV R1, R2"), (0x10, "FADD R3, R1, R2"), (0x20, "@!P0 BRA 0x10"), (0x30, "@P0 BRA 0x50"),
             (0x40, "EXIT"), (0x50, "BRA 0x50")]  # fmt: skip
    assert ic.hottest_loop(insns) == ["FADD R3, R1, R2", "@!P0 BRA 0x10"]
    assert ic.opcode_histogram(["@!P0 BRA 0x10", "DSETP.GT.AND P0, PT, R2, R4, PT"]) == {"BRA": 1, "DSETP.GT.AND": 1}


def test_reference_grows_the_last_row_and_the_rest_follows():
    v = ic.VARIANTS[0]
    src = ic.inputs(v)
    acc = ic.reference(v, src, 10).reshape(v.rows, v.cols)
    a = src[: v.rows]
    assert acc.dtype == np.float32
    np.testing.assert_array_equal(acc[-1], src[-v.cols :] + a[-1] * 10 * v.steps)
    np.testing.assert_array_equal(acc[:-1], acc[-1] - a[-1] + a[:-1, None])


def test_effective_mhz_is_the_median_over_blocks():
    stamps = np.array([[100, 0, 2_000_100, 1_000_000, 0], [0, 50, 1_980_000, 1_000_050, 1], [5, 0, 5, 0, 2]])
    assert ic.effective_mhz(stamps.astype(np.uint64)) == pytest.approx(1990.0)


def test_nvidia_smi_lines_parse_and_summarize():
    lines = [
        "2026/11/22 05:29:43.123, 1980, 1980, 650.12, 700.00, 55, 0x0000000000000000",
        "2026/11/22 05:29:43.223, 1755, 1980, 699.80, 700.00, 57, 0x0000000000000004",
        "2026/11/22 05:29:43.323, 1830, 1980, [N/A], 700.00, 58, 0x0000000000000004",
        "Field clocks_event_reasons.active is not a valid field to query.",
    ]
    samples = [s for s in map(ic.parse_sample, lines) if s is not None]
    assert len(samples) == 3 and samples[2]["power.draw"] is None
    summary = ic.summarize_samples(samples)
    assert summary["clocks_sm_mhz"] == 1830 and summary["clocks_sm_mhz_min"] == 1755
    assert summary["power_w"] == pytest.approx(674.96)
    assert summary["reasons_masks"] == ["0x0", "0x4"] and summary["reasons"] == ["sw_power_cap"]
